"""The class list: ImageNet-1k package data, class list files, WordNet filling, errors."""

import json
import os

import pytest

from pipeline.rebuild.classes import imagenet_1k, load_classes, write_class_list

WORDNET = "/usr/share/wordnet"  # Debian's wordnet-base (installed by the Makefile's test target)
needs_wordnet = pytest.mark.skipif(not os.path.isfile(os.path.join(WORDNET, "data.noun")), reason="Debian's wordnet-base is not installed (apt-get install wordnet-base)")


def test_imagenet_1k_default_has_names_lemmas_parents_and_similar_classes():
    classes = load_classes()
    assert len(classes) == 1000 and classes.is_imagenet_1k
    assert classes.wnids == tuple(sorted(classes.wnids))
    assert len({n.lower() for n in classes.names}) == 1000
    assert classes.name("n02012849") == "crane (bird)" and classes.name("n03126707") == "crane (machine)"
    tench = classes.info("n01440764")
    assert tench.lemmas == ("tench", "Tinca tinca") and tench.gloss.startswith("freshwater dace-like")
    assert tench.parent == "cyprinid"  # WordNet's hypernym of tench.n.01
    # most similar classes come from the original's wnid_to_most_similar_wnids.json (itself excluded)
    similar = json.loads(open(os.path.join(os.path.dirname(__file__), "..", "pipeline", "data", "wnid_to_most_similar_wnids.json")).read())
    assert classes.most_similar("n01440764") == tuple(similar["n01440764"][1:])
    assert sum(1 for c in classes.classes if c.parent) == 1000


def test_plain_text_file_of_imagenet_ids_is_filled_from_package_data(tmp_path):
    path = tmp_path / "classes.txt"
    path.write_text("# three ImageNet classes\nn01443537\nn01440764   # tench\n\nn02012849\n")
    classes = load_classes(path)
    assert classes.wnids == ("n01440764", "n01443537", "n02012849")
    assert classes.index("n02012849") == 2 and classes.names == ("tench", "goldfish", "crane (bird)")
    assert classes.most_similar("n01440764") == ("n01443537",)  # only classes of the list
    assert not classes.is_imagenet_1k


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_json_and_yaml_class_lists_with_own_classes(tmp_path, suffix):
    entries = [
        {"wnid": "zebra_crossing", "lemmas": ["zebra crossing", "crosswalk"], "gloss": "a striped road crossing"},
        {"id": "bike_lane", "name": "bicycle lane", "lemmas": ["bike lane"], "parent": "lane", "most_similar": ["zebra_crossing", "nowhere"]},
        "n01440764",
    ]
    path = tmp_path / f"classes{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"classes": entries}))
    else:
        import yaml

        path.write_text(yaml.safe_dump(entries))
    classes = load_classes(path)
    assert classes.wnids == ("bike_lane", "n01440764", "zebra_crossing")
    assert classes.names == ("bicycle lane", "tench", "zebra crossing")
    assert classes.info("bike_lane").parent == "lane" and classes.most_similar("bike_lane") == ("zebra_crossing",)
    assert "zebra_crossing" in classes and "nowhere" not in classes
    again = tmp_path / "again.json"
    again.write_text(write_class_list(classes))
    assert load_classes(again).classes == classes.classes


@pytest.mark.parametrize(
    "text, message",
    [
        ('[{"wnid": "a", "lemmas": ["x"]}, {"wnid": "b", "lemmas": ["X"]}]', "share the name 'X'"),
        ('[{"wnid": "a", "lemmas": ["x"]}, {"wnid": "a", "lemmas": ["y"]}]', "listed twice"),
        ('[{"wnid": "a", "lemmas": ["x"], "colour": "red"}]', "unknown field(s) colour"),
        ('[{"wnid": "a b", "lemmas": ["x"]}]', "is not an id"),
        ('[{"wnid": "a", "lemmas": "x", "most_similar": "b"}]', "most_similar must be a list"),
        ('{"wnid": "a"', "not valid JSON"),
        ("[]", "no classes"),
    ],
)
def test_bad_class_lists_say_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "classes.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_classes(path)


def test_wordnet_id_outside_imagenet_without_wordnet_names_the_package(tmp_path):
    path = tmp_path / "classes.txt"
    path.write_text("n02121808\n")  # domestic cat: not an ImageNet-1k class
    with pytest.raises(ValueError, match="wordnet-base"):
        load_classes(path)
    with pytest.raises(FileNotFoundError, match="apt-get install wordnet-base"):
        load_classes(path, wordnet=tmp_path)


@pytest.mark.slow
@needs_wordnet
def test_wordnet_fills_lemmas_gloss_parent_and_similar_classes(tmp_path):
    path = tmp_path / "classes.txt"
    path.write_text("n02121808\nn02084071\nn01503061\nn02374451\n")  # domestic cat, dog, bird, horse
    classes = load_classes(path, wordnet=WORDNET)
    cat = classes.info("n02121808")
    assert cat.lemmas[:2] == ("domestic cat", "house cat") and cat.name == "domestic cat"
    assert cat.gloss.startswith("any domesticated member of the genus Felis")
    assert cat.parent == "cat"  # hypernyms cat.n.01 and domestic_animal.n.01: none in the gloss, the first by name
    assert classes.info("n02084071").parent == "canine"
    # dog is closer to cat than a bird or a horse is (WordNet path similarity)
    assert classes.most_similar("n02121808")[0] == "n02084071"
    assert set(classes.most_similar("n02121808")) == {"n02084071", "n01503061", "n02374451"}


def test_imagenet_1k_package_data_agrees_with_the_builders_classes():
    from imagenetv2.classes import imagenet_classes

    classes = imagenet_1k()
    assert [(c.wnid, c.name, c.lemmas, c.gloss) for c in classes.classes] == [(c.wnid, c.name, c.synset, c.gloss) for c in imagenet_classes()]


def test_imagenet_1k_is_cached():
    assert imagenet_1k() is imagenet_1k()
