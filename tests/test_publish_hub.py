"""``python -m pipeline push`` and ``push-metric`` end to end against the fake Hub.

Every client runs in a subprocess with ``HF_ENDPOINT`` pointing at the fake Hub, a fresh
``HF_HOME`` and no Xet, so the real huggingface_hub / datasets / evaluate code paths run: the
commands push, then ``datasets.load_dataset(repo, config, revision=tag)`` and ``evaluate.load``
read back through the same server.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import pytest
import yaml

from fake_hub import FakeHub
from pipeline.core.export import ConfigExport, read_card, write_hub_folder
from pipeline.toys.synthetic import tiny_jpeg


pytestmark = pytest.mark.integration

REPO = "org/toy"
_homes = itertools.count()


# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def hub(tmp_path):
    with FakeHub(tmp_path / "hub") as hub:
        yield hub
        assert hub.unknown_requests == [], f"the fake Hub got requests it does not implement: {hub.unknown_requests}"


def client_env(hub, tmp_path, token="default", **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(hub.client_env(tmp_path / f"home-{next(_homes)}", token=token))
    env.update(extra)
    return env


def cli(hub, tmp_path, *args, token="default", env=None, timeout=300):
    """Run ``python -m pipeline ARGS`` as a user would; returns the CompletedProcess."""
    env = env or client_env(hub, tmp_path, token=token)
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *map(str, args)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout
    )


def ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


LOAD_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import datasets
    repo, id_column, wanted = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    out = []
    for config, revision in wanted:
        ds = datasets.load_dataset(repo, config, split="test", revision=revision)
        image = ds[0]["image"]
        out.append({
            "config": config, "revision": revision, "rows": ds.num_rows,
            "ids": [str(v) for v in ds.data.column(id_column).to_pylist()],
            "features": ds.features.to_dict(),
            "label_names": ds.features["label"].names,
            "image": [type(image).__name__, list(image.size)],
        })
    print(json.dumps(out))
    """
)


def load_from_hub(hub, tmp_path, repo, id_column, wanted):
    """``load_dataset(repo, config, revision=...)`` for each (config, revision), in a fresh subprocess."""
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, repo, id_column, json.dumps(wanted)],
        env=client_env(hub, tmp_path, token=None), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    ok(result)
    return {(r["config"], r["revision"]): r for r in json.loads(result.stdout.strip().splitlines()[-1])}


def hub_card(hub, repo, revision):
    text = hub.read_file(repo, "README.md", revision).decode()
    return yaml.safe_load(text.split("---")[1]), text


def local_ids(folder, config, id_column):
    ds = datasets.load_dataset(str(folder), config, split="test")
    return [str(v) for v in ds.data.column(id_column).to_pylist()]


def derive_revision(folder, out, replace: dict, id_column: str, revision_names: dict = None):
    """Write revision 2 of a Hub-ready folder: in each config of ``replace``, the first n rows get a
    new id and new image bytes (as a rebuilt revision replaces reviewed-out images)."""
    card = read_card(folder)
    extra = {k: v for k, v in card.data.to_dict().items() if k not in ("configs", "dataset_info")}
    exports = []
    for entry in card.data["configs"]:
        name = entry["config_name"]
        ds = datasets.load_dataset(str(folder), name, split="test")
        features = ds.features
        rows = ds.cast_column("image", datasets.Image(decode=False)).to_dict()
        for k in range(replace.get(name, 0)):
            old = rows[id_column][k]
            rows[id_column][k] = (
                hashlib.sha1(f"replacement-{name}-{k}".encode()).hexdigest() if isinstance(old, str) else 10**9 + k
            )
            rows["image"][k] = {"bytes": tiny_jpeg(50_000 + k), "path": None}
        undecoded = features.copy()
        undecoded["image"] = datasets.Image(decode=False)
        new = datasets.Dataset.from_dict(rows, features=undecoded).cast_column("image", datasets.Image())
        exports.append(ConfigExport(name, new, default=bool(entry.get("default"))))
    extra_files = {}
    for path in sorted((Path(folder) / "revisions").glob("*.json")):
        data = json.loads(path.read_text())
        if path.stem in (revision_names or {}):
            data["output_filename"] = revision_names[path.stem]
        extra_files[f"revisions/{path.name}"] = json.dumps(data).encode()
    return write_hub_folder(out, exports, card.text, extra, extra_files=extra_files)


FEATURES = datasets.Features(
    {"image": datasets.Image(), "label": datasets.ClassLabel(names=["cat", "dog"]), "candidate_id": datasets.Value("string")}
)


def toy_export(name, ids, default=False):
    ds = datasets.Dataset.from_dict(
        {
            "image": [{"bytes": tiny_jpeg(int(hashlib.md5(i.encode()).hexdigest()[:6], 16)), "path": None} for i in ids],
            "label": [n % 2 for n in range(len(ids))],
            "candidate_id": list(ids),
        },
        features=FEATURES,
    )
    return ConfigExport(name, ds, default=default)


@pytest.fixture(scope="module")
def toy_revisions(tmp_path_factory):
    """Two revisions of a two-config folder: in rev2, 3 of 12 images of 'first' are replaced
    (and its revision file is toy-b-8 instead of toy-b-7); 'second' is unchanged."""
    root = tmp_path_factory.mktemp("toy")
    first = [f"a{i:02d}" for i in range(12)]
    second = [f"b{i:02d}" for i in range(8)]
    rev1 = write_hub_folder(root / "rev1", [toy_export("first", first, True), toy_export("second", second)], "# Toy\n",
                            {"license": "mit", "row_id": "candidate_id"}, extra_files={"revisions/first.json": b'{"output_filename": "toy-b-7.json"}'})  # fmt: skip
    rev2 = write_hub_folder(root / "rev2", [toy_export("first", ["n0", "n1", "n2"] + first[3:], True), toy_export("second", second)],
                            "# Toy\n", {"license": "mit", "row_id": "candidate_id"}, extra_files={"revisions/first.json": b'{"output_filename": "toy-b-8.json"}'})  # fmt: skip
    return rev1, rev2


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


# --- datasets: pushing revisions and loading them back --------------------------------------


def test_push_two_revisions_then_load_each(hub, tmp_path, toy_revisions):
    rev1, rev2 = toy_revisions
    before = snapshot(rev1)

    plan = ok(cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "v1", "--dry-run"))
    assert hub.write_requests() == [] and REPO not in {r for _, r in hub.repos}
    assert "will be created" in plan.stdout and "dry run: nothing was uploaded" in plan.stdout
    assert "data/first/test-00000-of-00001.parquet" in plan.stdout and "first: 12 rows (first revision)" in plan.stdout

    pushed = ok(cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "v1"))
    assert "published org/toy revision v1" in pushed.stdout
    assert snapshot(rev1) == before  # the user's folder is never modified
    assert hub.operations("lfs_upload") and all(r.status == 200 for r in hub.operations("lfs_upload"))

    writes = len(hub.write_requests())
    plan = ok(cli(hub, tmp_path, "push", rev2, "--repo-id", REPO, "--dry-run"))
    assert len(hub.write_requests()) == writes, "a dry run must not write"
    assert "tag:        v2 (new)" in plan.stdout and "previous:   v1" in plan.stdout
    assert "first: 12 rows, 3 images added, 3 removed (changed, by candidate_id)" in plan.stdout
    assert "unchanged" in plan.stdout and "data/second/test-00000-of-00001.parquet" in plan.stdout

    ok(cli(hub, tmp_path, "push", rev2, "--repo-id", REPO))  # no --tag: the next vN
    repo = hub.repo(REPO)
    assert sorted(repo.tags) == ["v1", "v2"] and repo.tags["v2"] == repo.branches["main"]
    assert len(repo.commits) == 3  # the initial commit, then exactly one commit per push

    card, text = hub_card(hub, REPO, "v2")
    assert card["revision"] == {
        "name": "v2",
        "previous": "v1",
        "configs": {
            "first": {"revision_file": "toy-b-8.json", "rows": 12, "compared_by": "candidate_id", "images_added": 3, "images_removed": 3},
            "second": {"revision_file": None, "rows": 8, "compared_by": "candidate_id", "images_added": 0, "images_removed": 0},
        },
    }  # fmt: skip
    assert "## Revision `v2`" in text and "| first | toy-b-8.json | 12 | 3 | 3 |" in text
    changes = json.loads(hub.read_file(REPO, "revisions/changes.json", "v2"))
    assert changes["configs"]["first"]["added"] == ["n0", "n1", "n2"]
    assert changes["configs"]["first"]["removed"] == ["a00", "a01", "a02"]
    assert hub_card(hub, REPO, "v1")[0]["revision"]["previous"] is None

    loaded = load_from_hub(hub, tmp_path, REPO, "candidate_id",
                           [("first", "v1"), ("first", "v2"), ("second", "v1"), ("first", "main")])  # fmt: skip
    assert loaded[("first", "v1")]["ids"] == local_ids(rev1, "first", "candidate_id")
    assert loaded[("first", "v2")]["ids"] == local_ids(rev2, "first", "candidate_id")
    assert loaded[("first", "main")]["ids"] == loaded[("first", "v2")]["ids"]
    assert loaded[("second", "v1")]["rows"] == 8
    for r in loaded.values():
        assert r["label_names"] == ["cat", "dog"] and r["image"] == ["JpegImageFile", [8, 8]]
        assert datasets.Features.from_dict(r["features"]) == FEATURES


def test_branch_private_and_message(hub, tmp_path, toy_revisions):
    rev1, _ = toy_revisions
    ok(cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "candidate-1", "--branch", "staging",
           "--private", "--message", "Rebuilt from toy-b-7"))  # fmt: skip
    repo = hub.repo(REPO)
    assert repo.private
    assert hub.list_files(REPO, "main") == [".gitattributes"]  # main untouched
    head = repo.commits[repo.branches["staging"]]
    assert head.title == "Rebuilt from toy-b-7" and repo.tags["candidate-1"] == head.oid
    assert "data/first/test-00000-of-00001.parquet" in hub.list_files(REPO, "candidate-1")


def test_an_existing_tag_is_never_overwritten(hub, tmp_path, toy_revisions):
    rev1, rev2 = toy_revisions
    ok(cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "v1"))
    writes = len(hub.write_requests())
    result = cli(hub, tmp_path, "push", rev2, "--repo-id", REPO, "--tag", "v1")
    assert result.returncode == 1 and "tag 'v1' already exists on org/toy" in result.stderr
    assert len(hub.write_requests()) == writes


def test_bad_arguments_are_refused_before_any_request(hub, tmp_path, toy_revisions):
    rev1, _ = toy_revisions
    result = cli(hub, tmp_path, "push", rev1, "--repo-id", "toy")
    assert result.returncode == 2 and "not of the form ORG/NAME" in result.stderr
    result = cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "refs/tags/x")
    assert result.returncode == 2 and "tag name 'refs/tags/x' is not allowed" in result.stderr
    result = cli(hub, tmp_path, "push", tmp_path / "missing", "--repo-id", REPO)
    assert result.returncode == 1 and "is not a folder" in result.stderr
    assert hub.requests == []


# --- credentials -------------------------------------------------------------------------------


def test_missing_token_is_a_clear_error(hub, tmp_path, toy_revisions):
    rev1, _ = toy_revisions
    for command in (["push", rev1, "--repo-id", REPO], ["push-metric", "--repo-id", "org/metric"]):
        result = cli(hub, tmp_path, *command, token=None)
        assert result.returncode == 1
        assert "no Hugging Face token found" in result.stderr and "HF_TOKEN" in result.stderr and "hf auth login" in result.stderr
    assert hub.write_requests() == []


def test_token_stored_at_login_is_used(hub, tmp_path, toy_revisions):
    rev1, _ = toy_revisions
    env = client_env(hub, tmp_path, token=None)
    Path(env["HF_HOME"]).mkdir(parents=True)
    (Path(env["HF_HOME"]) / "token").write_text(hub.token)  # where `hf auth login` stores it
    ok(cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "v1", env=env))
    assert hub.repo(REPO).tags["v1"]


def test_rejected_token_is_a_clear_error_and_no_token_is_ever_shown(hub, tmp_path, toy_revisions):
    rev1, _ = toy_revisions
    outputs = []
    hub.reject_tokens = True
    for command in (["push", rev1, "--repo-id", REPO], ["push-metric", "--repo-id", "org/metric"]):
        result = cli(hub, tmp_path, "-v", *command)
        assert result.returncode == 1
        assert "rejected the token" in result.stderr and "401" in result.stderr and "HF_TOKEN" in result.stderr
        outputs.append(result.stdout + result.stderr)
    hub.reject_tokens = False
    hub.fail("commit", status=500)  # an error from the middle of a push, printed with -v
    failed = cli(hub, tmp_path, "-v", "push", rev1, "--repo-id", REPO)
    assert failed.returncode == 1
    hub.clear_faults()
    success = ok(cli(hub, tmp_path, "-v", "push", rev1, "--repo-id", REPO))
    outputs += [failed.stdout + failed.stderr, success.stdout + success.stderr]
    logged = "\n".join(outputs + [repr(r) for r in hub.requests])
    assert hub.token not in logged and hub.token[8:] not in logged
    assert "hf_***" not in success.stdout  # nothing needed redacting in normal output either


# --- a failed push loses nothing ----------------------------------------------------------------


@pytest.mark.parametrize(
    "fault, expected",
    [
        pytest.param(lambda hub: hub.fail("commit", status=500), "HTTP 500", id="commit-500"),
        pytest.param(lambda hub: hub.drop("commit"), "the connection to the Hub", id="commit-dropped"),
        pytest.param(lambda hub: hub.drop("lfs_upload"), "uploading", id="lfs-upload-dropped", marks=pytest.mark.slow),
    ],
)
def test_failed_push_keeps_the_previous_revision_and_can_be_rerun(hub, tmp_path, toy_revisions, fault, expected):
    rev1, rev2 = toy_revisions
    ok(cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "v1"))
    fault(hub)  # lasts until cleared: the client's own retries fail too
    result = cli(hub, tmp_path, "push", rev2, "--repo-id", REPO, "--tag", "v2")
    assert result.returncode == 1
    assert "error: push failed" in result.stderr and expected in result.stderr
    assert "Nothing was published" in result.stderr and "tag v1 still give the previous revision" in result.stderr
    assert "Re-run the same command" in result.stderr
    repo = hub.repo(REPO)
    assert sorted(repo.tags) == ["v1"] and repo.branches["main"] == repo.tags["v1"]
    loaded = load_from_hub(hub, tmp_path, REPO, "candidate_id", [("first", "v1"), ("first", "main")])
    assert loaded[("first", "v1")]["ids"] == loaded[("first", "main")]["ids"] == local_ids(rev1, "first", "candidate_id")

    hub.clear_faults()
    ok(cli(hub, tmp_path, "push", rev2, "--repo-id", REPO, "--tag", "v2"))
    assert hub_card(hub, REPO, "v2")[0]["revision"]["configs"]["first"]["images_added"] == 3
    loaded = load_from_hub(hub, tmp_path, REPO, "candidate_id", [("first", "v2"), ("first", "v1")])
    assert loaded[("first", "v2")]["ids"] == local_ids(rev2, "first", "candidate_id")
    assert loaded[("first", "v1")]["ids"] == local_ids(rev1, "first", "candidate_id")


def test_failed_tag_is_completed_by_a_rerun(hub, tmp_path, toy_revisions):
    rev1, _ = toy_revisions
    hub.fail("create_tag", status=500, times=1)
    result = cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "v1")
    assert result.returncode == 1 and "is not tagged v1" in result.stderr and "only creates the tag" in result.stderr
    commits = len(hub.repo(REPO).commits)
    ok(cli(hub, tmp_path, "push", rev1, "--repo-id", REPO, "--tag", "v1"))
    repo = hub.repo(REPO)
    assert len(repo.commits) == commits and repo.tags["v1"] == repo.branches["main"]


# --- the metric Space -------------------------------------------------------------------------


METRIC_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import evaluate
    out = {}
    for repo, revision in json.loads(sys.argv[1]):
        metric = evaluate.load(repo, revision=revision)
        out[f"{repo}@{revision}"] = metric.compute(predictions=[0, 1, 2, 2], references=[0, 1, 1, 2])
    print(json.dumps(out))
    """
)


def test_push_metric_then_evaluate_load_computes(hub, tmp_path):
    plan = ok(cli(hub, tmp_path, "push-metric", "--repo-id", "org/clopper_pearson_accuracy", "--dry-run"))
    assert hub.write_requests() == [] and "clopper_pearson_accuracy.py" in plan.stdout
    hub.fail("commit", status=500, times=1)
    failed = cli(hub, tmp_path, "push-metric", "--repo-id", "org/clopper_pearson_accuracy", "--tag", "v1")
    assert failed.returncode == 1 and "HTTP 500" in failed.stderr and "Re-run the same command" in failed.stderr
    ok(cli(hub, tmp_path, "push-metric", "--repo-id", "org/clopper_pearson_accuracy", "--tag", "v1"))
    ok(cli(hub, tmp_path, "push-metric", "--repo-id", "org/cp-accuracy"))  # another name: the script goes as cp-accuracy.py too
    space = hub.repo("org/clopper_pearson_accuracy", "space")
    assert space.sdk == "gradio" and "v1" in space.tags
    assert {"README.md", "app.py", "clopper_pearson_accuracy.py", "requirements.txt"} <= set(
        hub.list_files("org/clopper_pearson_accuracy", repo_type="space")
    )
    result = subprocess.run(
        [sys.executable, "-c", METRIC_SCRIPT,
         json.dumps([["org/clopper_pearson_accuracy", None], ["org/clopper_pearson_accuracy", "v1"], ["org/cp-accuracy", None]])],
        env=client_env(hub, tmp_path, token=None), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    ok(result)
    computed = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(computed) == 3
    for value in computed.values():
        # 3 of 4 correct; Clopper-Pearson 95%: Beta(0.025; 3, 2) and Beta(0.975; 4, 1), as scipy gives them
        assert value["correct"] == 3 and value["total"] == 4 and value["accuracy"] == 0.75
        assert value["ci_low"] == pytest.approx(0.19412044968324346) and value["ci_high"] == pytest.approx(0.9936905367902902)


# --- the real sets: ImageNetV2 and CIFAR-10.1 folders from the builders --------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "fixture, id_column, replace, revision_names",
    [
        ("imagenetv2_hub_folder", "candidate_id", {"matched-frequency": 5, "threshold-0.7": 2}, {"matched-frequency": "imagenetv2-b-34.json"}),
        ("cifar10_1_hub_folder", "ti_index", {"v6": 4}, {}),
    ],
    ids=["imagenetv2", "cifar10_1"],
)  # fmt: skip
def test_real_sets_two_revisions_round_trip(hub, tmp_path, request, fixture, id_column, replace, revision_names):
    rev1 = request.getfixturevalue(fixture)
    rev2 = derive_revision(rev1, tmp_path / "rev2", replace, id_column, revision_names)
    configs = [c["config_name"] for c in read_card(rev1).data["configs"]]
    repo = f"org/{fixture.split('_hub')[0]}"

    ok(cli(hub, tmp_path, "push", rev1, "--repo-id", repo, "--tag", "v1"))
    ok(cli(hub, tmp_path, "push", rev2, "--repo-id", repo, "--tag", "v2"))

    card, _ = hub_card(hub, repo, "v2")
    assert card["revision"]["previous"] == "v1"
    for config in configs:
        entry = card["revision"]["configs"][config]
        assert entry["compared_by"] == id_column
        assert entry["images_added"] == entry["images_removed"] == replace.get(config, 0)
    v1_card, _ = hub_card(hub, repo, "v1")
    for config in configs:
        revision_file = rev1 / "revisions" / f"{config}.json"
        expected = json.loads(revision_file.read_text())["output_filename"] if revision_file.exists() else None
        assert v1_card["revision"]["configs"][config]["revision_file"] == expected
        assert card["revision"]["configs"][config]["revision_file"] == revision_names.get(config, expected)

    wanted = [(c, r) for c in configs for r in ("v1", "v2")]
    loaded = load_from_hub(hub, tmp_path, repo, id_column, wanted)
    local_features = datasets.load_dataset(str(rev1), configs[0], split="test").features
    for config in configs:
        for revision, folder in (("v1", rev1), ("v2", rev2)):
            got = loaded[(config, revision)]
            assert got["ids"] == local_ids(folder, config, id_column), (config, revision)
            assert datasets.Features.from_dict(got["features"]) == local_features
            assert got["label_names"] == local_features["label"].names
            assert got["image"][0].endswith("ImageFile")
        changed = sum(a != b for a, b in zip(loaded[(config, "v1")]["ids"], loaded[(config, "v2")]["ids"], strict=True))
        assert changed == replace.get(config, 0)
