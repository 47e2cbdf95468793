"""The loop without a browser: review -> `sample --review` -> review `--starting-from` the previous review -> sample again."""

from __future__ import annotations

import json

import pytest
from helpers_review import PER_CLASS, WNIDS, make_world
from starlette.testclient import TestClient

from pipeline.rebuild.review.server import create_app
from pipeline.rebuild.review.session import open_session
from pipeline.rebuild.review_folder import read_review_folder
from pipeline.rebuild.revision import SamplingConfig, load_revision
from pipeline.rebuild.sample import sample_stage

WHO = "Lin"
CONFIG = SamplingConfig(rule="top-images", seed=0, per_class=PER_CLASS, wnids=tuple(WNIDS))


def _by_class(revision_path):
    out = {}
    for cid, wnid in load_revision(revision_path).image_filenames:
        out.setdefault(wnid, []).append(cid)
    return out


def _client(world, revision, output, **kwargs):
    session = open_session(world.pool, revision, output, originals=[world.originals], near_duplicates=world.near_duplicates, **kwargs)
    return TestClient(create_app(session))


def _post(client, path, **body):
    response = client.post(path, json={"reviewer": WHO, **body})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def first_round(tmp_path):
    world = make_world(tmp_path)
    before = _by_class(world.revision)
    client = _client(world, world.revision, tmp_path / "R1")
    _post(client, "/api/mark", candidate_id=before[WNIDS[0]][0], reason="wrong_class", note="")
    for wnid in (WNIDS[0], WNIDS[2]):
        _post(client, "/api/class-state", wnid=wnid, reviewed=True)
    _post(client, "/api/class-state", wnid=WNIDS[1], problematic=True)
    _post(client, "/api/pair", candidate_id=world.duplicate, reference_id=world.duplicate_of, metric="l2", decision="confirm")
    return world, before, tmp_path / "R1"


def test_sample_review_replaces_and_reports_per_class(first_round, tmp_path):
    world, before, review = first_round
    result = sample_stage(world.pool, tmp_path / "rev-1.json", CONFIG, review=review)
    after = _by_class(tmp_path / "rev-1.json")
    assert result.revision.starting_from == "rev-0.json"  # chained from the revision that was reviewed
    assert before[WNIDS[0]][0] not in after[WNIDS[0]] and world.duplicate not in after[WNIDS[1]]
    assert after[WNIDS[2]] == before[WNIDS[2]] and all(len(after[w]) == PER_CLASS for w in WNIDS)
    assert len(set(after[WNIDS[0]]) - set(before[WNIDS[0]])) == 1 and len(set(after[WNIDS[1]]) - set(before[WNIDS[1]])) == 1
    section = result.report["review"]
    assert section == {"folder": "R1", "blacklisted": 1, "confirmed_near_duplicates": 1, "reviewed_revision": "rev-0.json", "replaced": 2,
                       "per_class": {WNIDS[0]: {"wrong class": 1}, WNIDS[1]: {"near-duplicate": 1}}}
    assert set(result.report["inputs"]) >= {"review_blacklist", "review_near_duplicates", "starting_from"}
    decisions = dict(zip(result.decisions.column("candidate_id").to_pylist(), result.decisions.column("decision").to_pylist()))
    assert decisions[before[WNIDS[0]][0]] == "blacklisted" and decisions[world.duplicate] == "near_duplicate"


def test_carry_over_keeps_what_the_new_revision_still_has(first_round, tmp_path):
    world, before, review = first_round
    sample_stage(world.pool, tmp_path / "rev-1.json", CONFIG, review=review)
    after = _by_class(tmp_path / "rev-1.json")
    client = _client(world, tmp_path / "rev-1.json", tmp_path / "R2", starting_from=review)
    classes = {c["wnid"]: c for c in client.get("/api/session").json()["classes"]}
    # A changed (a replacement) and B was problematic: both to review again; C is unchanged and stays reviewed
    assert [(classes[w]["reviewed"], classes[w]["problematic"]) for w in WNIDS] == [(False, False), (False, True), (True, False)]
    page = client.get(f"/api/class/{WNIDS[0]}").json()
    new = [i["id"] for i in page["images"] if i["new"]]
    assert new == sorted(set(after[WNIDS[0]]) - set(before[WNIDS[0]]))
    folder = read_review_folder(tmp_path / "R2")  # the blacklist and the confirmed pairs are kept whole
    assert folder.blacklist == {before[WNIDS[0]][0]: "wrong class"} and folder.near_duplicates == {world.duplicate: [world.duplicate_of]}
    assert json.loads((tmp_path / "R2" / "review.json").read_text())["starting_from"] == "R1"
    # the second round blacklists one more image; the next revision still excludes the first one
    _post(client, "/api/mark", candidate_id=after[WNIDS[2]][1], reason="drawing", note="a poster")
    result = sample_stage(world.pool, tmp_path / "rev-2.json", CONFIG, review=tmp_path / "R2")
    final = _by_class(tmp_path / "rev-2.json")
    assert before[WNIDS[0]][0] not in final[WNIDS[0]] and after[WNIDS[2]][1] not in final[WNIDS[2]] and world.duplicate not in final[WNIDS[1]]
    assert result.revision.starting_from == "rev-1.json"
    assert result.report["review"]["per_class"] == {WNIDS[2]: {"cartoon, painting, drawing or rendering": 1}}


def test_resuming_with_another_starting_point_is_refused(first_round, tmp_path):
    world, _, review = first_round
    sample_stage(world.pool, tmp_path / "rev-1.json", CONFIG, review=review)
    _client(world, tmp_path / "rev-1.json", tmp_path / "R2", starting_from=review)
    _client(world, tmp_path / "rev-1.json", tmp_path / "R2", starting_from=review)  # the same command again resumes
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ValueError, match="was started from R1"):
        _client(world, tmp_path / "rev-1.json", tmp_path / "R2", starting_from=tmp_path / "elsewhere")


def test_the_near_duplicate_stage_reads_the_reviewed_pairs(first_round):
    """The reviewed pairs are in the format `near-duplicates --reviews` reads (docs/near_duplicates.md)."""
    import pyarrow.parquet as pq

    from pipeline.rebuild.near_duplicates.review_status import (
        read_reviews,
        review_status,
    )

    world, _, review = first_round
    pairs = read_reviews(review / "reviewed_pairs.jsonl")
    assert pairs == {(world.duplicate, world.duplicate_of, "validation")}
    status = review_status(pq.read_table(world.near_duplicates / "neighbours.parquet"), pairs, {"l2": 1.2e8, "fc7": 13200.0}, top_k=30)
    rows = {(r["candidate_id"], r["metric"]): r for r in status.to_pylist()}
    # l2: one more neighbour under the threshold to review; fc7: the only one is reviewed
    assert rows[(world.duplicate, "l2")]["num_unreviewed_below_threshold"] == 1 and not rows[(world.duplicate, "l2")]["sufficiently_reviewed"]
    assert rows[(world.duplicate, "fc7")]["sufficiently_reviewed"]
    app_status = _client(world, world.revision, review).get(f"/api/near-duplicates/{world.duplicate}").json()["status"]
    assert app_status == {"fc7": {"sufficient": True, "unreviewed_below_threshold": 0}, "l2": {"sufficient": False, "unreviewed_below_threshold": 1}}


def test_read_review_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="run `python -m pipeline review"):
        read_review_folder(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is not a review folder"):
        read_review_folder(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "blacklist.json").write_text('["a list"]')
    with pytest.raises(ValueError, match="expected a JSON object"):
        read_review_folder(tmp_path / "bad")
