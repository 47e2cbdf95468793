"""Issue 11, build-set: the one ownership mechanism, and every revision pair checked against the pool."""

import json

import pytest
from test_build_set import rebuilt  # noqa: F401 (the module's fixture)

from pipeline.__main__ import main
from pipeline.core.ownership import MARKER, OutputError, owner
from pipeline.rebuild.build_set import build_set


def swapped_revision(path, tmp_path):
    """The revision with its first image's wnid replaced by another class of the revision."""
    data = json.loads(path.read_text())
    cid, wnid = data["image_filenames"][0]
    other = next(w for _, w in data["image_filenames"] if w != wnid)
    data["image_filenames"][0] = [cid, other]
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(data))
    return out, cid, wnid, other


def test_revision_pair_that_disagrees_with_the_pool_is_refused_naming_the_pair(rebuilt, tmp_path, capsys):  # noqa: F811
    root, pool, revisions = rebuilt
    edited, cid, wnid, other = swapped_revision(revisions["top-images"], tmp_path)
    assert main(["build-set", str(edited), "--pool", str(pool), "--output", str(tmp_path / "sets")]) == 1
    err = capsys.readouterr().err
    assert f"image_filenames[0] pairs candidate {cid} with {other}, but the pool has it under {wnid}" in err
    assert not (tmp_path / "sets").exists()


def test_revision_naming_a_candidate_the_pool_lacks_is_refused(rebuilt, tmp_path):  # noqa: F811
    root, pool, revisions = rebuilt
    data = json.loads(revisions["top-images"].read_text())
    data["image_filenames"][1][0] = "f" * 40
    (tmp_path / "foreign.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"image_filenames\\[1\\] {'f' * 40} is not a candidate of the pool"):
        build_set(pool, [tmp_path / "foreign.json"], tmp_path / "sets")


@pytest.mark.parametrize("where", ["pool", "pool/sets", "."])
def test_output_that_is_inside_or_holds_an_input_is_refused(rebuilt, where):  # noqa: F811
    root, pool, revisions = rebuilt
    before = sorted(str(p) for p in root.rglob("*"))
    with pytest.raises(OutputError, match="it is, contains or lies inside the input"):
        build_set(pool, [revisions["top-images"]], root / where)
    assert sorted(str(p) for p in root.rglob("*")) == before


def test_a_file_or_another_commands_folder_is_refused(rebuilt, tmp_path):  # noqa: F811
    root, pool, revisions = rebuilt
    (tmp_path / "file").write_text("mine")
    with pytest.raises(OutputError, match="a file of that name exists"):
        build_set(pool, [revisions["top-images"]], tmp_path / "file")
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / MARKER).write_text(json.dumps({"project": "imagenetv2-hf", "command": "demo", "version": "0.1.0"}))
    (demo / "results.json").write_text("{}")
    with pytest.raises(OutputError, match="it is a demo output, not a build-set output"):
        build_set(pool, [revisions["top-images"]], demo)
    assert (tmp_path / "file").read_text() == "mine" and (demo / "results.json").read_text() == "{}"


@pytest.mark.slow
def test_output_is_marked_by_build_set(rebuilt, tmp_path):  # noqa: F811
    root, pool, revisions = rebuilt
    build_set(pool, [revisions["top-images"]], tmp_path / "sets")
    assert owner(tmp_path / "sets")["command"] == "build-set"
