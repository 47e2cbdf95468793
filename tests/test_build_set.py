"""build-set: release-layout tars and the Hub-ready folder, through the ImageNetV2 builder."""

import hashlib
import json
import tarfile

import datasets
import pytest

from imagenetv2 import get_variant
from imagenetv2.classes import wnid_to_index
from pipeline.__main__ import main
from pipeline.rebuild.build_set import MANIFEST, build_set, write_release_tar
from pipeline.rebuild.ingest import POOL_FILES, load_pool
from pipeline.rebuild.revision import SamplingConfig, load_revision
from pipeline.rebuild.sample import sample_stage
from pipeline.rebuild.selection_frequency import selection_frequency_stage
from pipeline.toys.synthetic import tiny_jpeg
from pipeline.toys.synthetic_pool import PoolShape, make_synthetic_pool
from pipeline.rebuild.tables import write_table

RULES = ("matched-frequency", "threshold-0.7", "top-images")


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """A 4-class synthetic pool with image files, and one valid revision per rule (3 per class)."""
    root = tmp_path_factory.mktemp("rebuild")
    shape = PoolShape(n_classes=4, candidates_per_class=24, originals_per_class=12, positive_controls=12, negative_controls=2,
                      grid=24, annotators=12, workers=30, spammer_fraction=0.0, rejected_fraction=0.0, candidate_beta=(2.0, 1.0))
    synthetic = make_synthetic_pool(11, shape)
    images = root / "images"
    images.mkdir()
    for i, c in enumerate(synthetic.candidate_ids):
        (images / f"{c}.jpeg").write_bytes(tiny_jpeg(i))
    pool = root / "pool"
    write_table(synthetic.candidates_table(), pool / POOL_FILES["candidates"])
    write_table(synthetic.originals_table(), pool / POOL_FILES["originals"])
    write_table(synthetic.annotations(), pool / POOL_FILES["annotations"])
    from pipeline.rebuild.ingest import image_store_from_folder

    write_table(image_store_from_folder(images, set(synthetic.candidate_ids), pool), pool / POOL_FILES["images"])
    selection_frequency_stage(pool)
    revisions = {}
    for n, rule in enumerate(RULES):
        config = SamplingConfig(rule=rule, seed=n, per_class=3, wnids=tuple(synthetic.wnids), min_num_val_images_per_wnid=10)
        out = sample_stage(pool, root / "revisions" / f"rebuilt-{rule}.json", config)
        assert out.revision.is_valid, out.report["problems"]
        revisions[rule] = root / "revisions" / f"rebuilt-{rule}.json"
    return root, pool, revisions


def test_release_tar_layout_and_reproducible_bytes(rebuilt, tmp_path):
    root, pool, revisions = rebuilt
    revision = load_revision(revisions["threshold-0.7"])
    store = load_pool(pool, ("images",)).image_bytes()
    variant = get_variant("threshold-0.7")
    first = write_release_tar(revision, store, variant.top_folder, tmp_path / "one.tar")
    second = write_release_tar(revision, store, variant.top_folder, tmp_path / "two.tar")
    assert (first.size, first.sha256) == (second.size, second.sha256)
    assert first.sha256 == hashlib.sha256((tmp_path / "one.tar").read_bytes()).hexdigest()
    index = wnid_to_index()
    with tarfile.open(tmp_path / "one.tar") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        folders = [m.name for m in tar.getmembers() if m.isdir()]
    assert folders[0] == "imagenetv2-threshold0.7-format-val"
    assert set(files) == {f"imagenetv2-threshold0.7-format-val/{index[w]}/{c}.jpeg" for c, w in revision.image_filenames}
    cid = revision.image_filenames[0][0]
    assert files[f"imagenetv2-threshold0.7-format-val/{index[revision.image_filenames[0][1]]}/{cid}.jpeg"] == store[cid].read_bytes()


def test_build_set_gives_a_hub_folder_that_loads(rebuilt, tmp_path):
    root, pool, revisions = rebuilt
    built = build_set(pool, [revisions[r] for r in RULES], tmp_path / "sets")
    assert [b.config for b in built] == list(RULES)
    store = load_pool(pool, ("images",)).image_bytes()
    index = wnid_to_index()
    for rule in RULES:
        revision = load_revision(revisions[rule])
        ds = datasets.load_dataset(str(tmp_path / "sets" / "hub"), rule, split="test")
        rows = ds.with_format("arrow")[:].to_pylist()
        assert sorted((r["candidate_id"], r["wnid"]) for r in rows) == sorted(revision.image_filenames)
        assert all(r["label"] == index[r["wnid"]] for r in rows)
        assert all(r["image"]["bytes"] == store[r["candidate_id"]].read_bytes() for r in rows)
        assert (tmp_path / "sets" / "hub" / "revisions" / f"{rule}.json").read_bytes() == revisions[rule].read_bytes()
        assert json.loads((tmp_path / "sets" / "hub" / "revisions" / f"{rule}.report.json").read_text())["rule"] == rule
    card = (tmp_path / "sets" / "hub" / "README.md").read_text()
    assert "rebuilt-matched-frequency" in card and "pretty_name: ImageNetV2 (rebuilt)" in card
    manifest = json.loads((tmp_path / "sets" / MANIFEST).read_text())
    assert manifest["configs"]["top-images"]["archive"]["name"] == "imagenetv2-top-images.tar.gz"
    # a second build replaces the output and gives the same archives
    again = build_set(pool, [revisions[r] for r in RULES], tmp_path / "sets")
    assert [b.archive for b in again] == [b.archive for b in built]


def test_build_set_refusals(rebuilt, tmp_path):
    root, pool, revisions = rebuilt
    with pytest.raises(ValueError, match="two revisions for config top-images"):
        build_set(pool, [revisions["top-images"], revisions["top-images"]], tmp_path / "a")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="refusing to replace"):
        build_set(pool, [revisions["top-images"]], tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    invalid = json.loads(revisions["top-images"].read_text()) | {"is_valid": False}
    (tmp_path / "invalid.json").write_text(json.dumps(invalid))
    with pytest.raises(ValueError, match="is marked invalid"):
        build_set(pool, [tmp_path / "invalid.json"], tmp_path / "b")
    assert build_set(pool, [tmp_path / "invalid.json"], tmp_path / "b", allow_invalid=True)[0].images == 12


def test_images_must_exist_and_be_jpegs(rebuilt, tmp_path):
    root, pool, revisions = rebuilt
    revision = load_revision(revisions["top-images"])
    cid = revision.image_filenames[0][0]
    store = load_pool(pool, ("images",)).image_bytes()
    with pytest.raises(ValueError, match=f"image of candidate {cid} .* is not a JPEG"):
        write_release_tar(revision, store | {cid: b"\x89PNG\r\n"}, "top", tmp_path / "x.tar")
    with pytest.raises(FileNotFoundError, match="1 image\\(s\\) of revision rebuilt-top-images are not in the image store"):
        write_release_tar(revision, {k: v for k, v in store.items() if k != cid}, "top", tmp_path / "x.tar")
    assert not (tmp_path / "x.tar").exists()


@pytest.mark.integration
def test_build_set_command(rebuilt, tmp_path, capsys):
    root, pool, revisions = rebuilt
    assert main(["build-set", str(revisions["top-images"]), "--pool", str(pool), "--output", str(tmp_path / "out")]) == 0
    assert "top-images: 12 images from rebuilt-top-images" in capsys.readouterr().out
    assert main(["build-set", str(tmp_path / "missing.json"), "--pool", str(pool), "--output", str(tmp_path / "out2")]) == 1
    assert "missing.json is neither a file nor a released revision" in capsys.readouterr().err
