"""``mturk publish`` and ``mturk collect`` against a fake of MTurk's requester API, driven by boto3."""

import csv
import json

import pytest

from fake_mturk import FakeMTurk
from pipeline.rebuild import mturk
from pipeline.rebuild.ingest import ingest
from pipeline.rebuild.task_key import TaskKey, read_tasks
from pipeline.rebuild.tasks import TasksConfig, make_tasks
from pipeline.toys.annotators import write_toy_pool

BASE = "https://images.example.org/round-1"


@pytest.fixture(autouse=True)
def dummy_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key-never-printed")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("mturk")
    pool = write_toy_pool(root / "pool", n_classes=3, candidates_per_class=50, originals_per_class=6)
    pool.write_candidates_jsonl(root / "candidates.jsonl")
    pool.write_originals_csv(root / "originals.csv")
    make_tasks(root / "pool", root / "template", TasksConfig(image_base_url=BASE, upload=False),
               environ={"TASKS_SECRET": "mturk test secret 0123456789"})
    return root


@pytest.fixture()
def tasks(made, tmp_path):
    import shutil

    shutil.copytree(made / "template", tmp_path / "tasks")
    return tmp_path / "tasks"


@pytest.fixture()
def fake():
    with FakeMTurk(page_size=2) as service:
        yield service


def test_publish_creates_one_hit_per_task_with_the_original_settings(made, tasks, fake):
    report = mturk.publish(tasks, endpoint_url=fake.endpoint_url)
    assert report == {"environment": "sandbox", "tasks": 6, "created": 6, "adopted": 0, "already": 0}
    created = fake.calls("CreateHIT")
    assert len(created) == 6
    first = created[0]
    assert (first["Reward"], first["MaxAssignments"], first["AssignmentDurationInSeconds"]) == ("0.10", 10, 600)
    assert (first["LifetimeInSeconds"], first["AutoApprovalDelayInSeconds"]) == (7 * 86400, 3 * 86400)
    task = read_tasks(tasks)[0]
    assert first["Title"] == "Select every image that contains a tench" and first["RequesterAnnotation"].endswith(task.task_id)
    question = first["Question"]
    assert question.startswith("<HTMLQuestion") and "${" not in question and f"{BASE}/{task.images[0]}.jpg" in question
    recorded = mturk.read_hits(tasks / "hits-sandbox.jsonl")
    assert set(recorded) == {t.task_id for t in read_tasks(tasks)}
    # a second run creates nothing
    assert mturk.publish(tasks, endpoint_url=fake.endpoint_url)["created"] == 0 and len(fake.calls("CreateHIT")) == 6
    # and `tasks` will not replace a published folder (its HIT record would be lost)
    with pytest.raises(ValueError, match="published to MTurk"):
        make_tasks(made / "pool", tasks, TasksConfig(upload=False))


def test_the_sandbox_unless_live():
    assert mturk.mturk_client().meta.endpoint_url == "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
    assert mturk.mturk_client(live=True).meta.endpoint_url == "https://mturk-requester.us-east-1.amazonaws.com"


def test_relative_image_urls_are_refused_before_any_hit(made, tmp_path, fake):
    make_tasks(made / "pool", tmp_path / "local", TasksConfig(upload=False), environ={"TASKS_SECRET": "x" * 20})
    with pytest.raises(ValueError, match="relative.*--image-base-url"):
        mturk.publish(tmp_path / "local", endpoint_url=fake.endpoint_url)
    assert not fake.calls("CreateHIT")


def test_rerun_after_an_interruption_never_creates_a_hit_twice(tasks, fake):
    def interrupted(items):
        for number, item in enumerate(items):
            if number == 3:
                raise KeyboardInterrupt
            yield item

    with pytest.raises(KeyboardInterrupt):
        mturk.publish(tasks, endpoint_url=fake.endpoint_url, progress=interrupted)
    assert len(fake.hits) == 3
    # the 5th create succeeds on MTurk but its answer is lost: botocore retries, MTurk refuses the token again
    fake.drop_after_create = {5}
    report = mturk.publish(tasks, endpoint_url=fake.endpoint_url)
    assert (report["already"], report["created"], report["adopted"]) == (3, 2, 1)
    assert len(fake.calls("CreateHIT")) == 3 + 3 + 1  # the retried create was refused by its token
    assert len(fake.hits) == 6 and len({h["RequesterAnnotation"] for h in fake.hits.values()}) == 6
    assert sorted(r["hit_id"] for r in mturk.read_hits(tasks / "hits-sandbox.jsonl").values()) == sorted(fake.hits)


def test_a_run_that_died_before_recording_adopts_the_hit(tasks, fake):
    mturk.publish(tasks, endpoint_url=fake.endpoint_url)
    lines = (tasks / "hits-sandbox.jsonl").read_text().splitlines()
    (tasks / "hits-sandbox.jsonl").write_text("\n".join(lines[:2]) + "\n")  # the record of 4 HITs lost
    report = mturk.publish(tasks, endpoint_url=fake.endpoint_url)
    assert (report["created"], report["adopted"], report["already"]) == (0, 4, 2) and len(fake.hits) == 6


def test_throttling_is_retried(tasks, fake):
    fake.throttle = {"CreateHIT": 2, "ListAssignmentsForHIT": 1}
    assert mturk.publish(tasks, endpoint_url=fake.endpoint_url)["created"] == 6
    assert len(fake.calls("CreateHIT")) == 8
    mturk.collect(tasks, tasks.parent / "results.csv", endpoint_url=fake.endpoint_url)
    assert fake.throttle == {"CreateHIT": 0, "ListAssignmentsForHIT": 0}


def _answer_all(fake, tasks, picks_per_hit=3, workers=5, status="Submitted"):
    key = TaskKey.load([tasks])
    hits = mturk.read_hits(tasks / "hits-sandbox.jsonl")
    expected = {}
    for task_id, hit in hits.items():
        names = key.tasks[task_id].images
        for w in range(workers):
            chosen = [f"{BASE}/{n}.jpg" for n in names[w : w + picks_per_hit]]
            aid = fake.submit(hit["hit_id"], f"WORKER{w}", chosen, status=status if w else "Rejected")
            expected[aid] = {key.entries[n].id for n in names[w : w + picks_per_hit]}
    return expected


def test_collect_pages_through_every_assignment_and_ingest_reads_them(made, tasks, fake, tmp_path):
    mturk.publish(tasks, endpoint_url=fake.endpoint_url)
    expected = _answer_all(fake, tasks)
    report = mturk.collect(tasks, tmp_path / "results.csv", endpoint_url=fake.endpoint_url)
    assert report["assignments"] == 30 and report["Rejected"] == 6 and report["Submitted"] == 24
    assert len(fake.calls("ListAssignmentsForHIT")) == 6 * 3  # 5 assignments per HIT, 2 per page
    with open(tmp_path / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["Answer.selected"].count("|") == 2 and rows[0]["Input.task_id"]
    ingest(tmp_path / "pool", candidates=made / "candidates.jsonl", originals=made / "originals.csv",
           results=[tmp_path / "results.csv"], tasks=[tasks])
    import pyarrow.parquet as pq

    got = {}
    for row in pq.read_table(tmp_path / "pool" / "annotations.parquet").to_pylist():
        got.setdefault(row["assignment_id"], set())
        if row["selected"]:
            got[row["assignment_id"]].add(row["image_id"])
    assert got == expected


def test_collect_again_keeps_what_mturk_no_longer_lists(tasks, fake, tmp_path):
    mturk.publish(tasks, endpoint_url=fake.endpoint_url)
    _answer_all(fake, tasks, workers=2)
    out = tmp_path / "results.csv"
    mturk.collect(tasks, out, endpoint_url=fake.endpoint_url)
    gone = next(iter(fake.assignments))
    fake.assignments[gone] = []  # MTurk deleted this HIT's assignments (e.g. 120 days later)
    for assignment in fake.assignments[list(fake.assignments)[1]]:
        assignment["AssignmentStatus"] = "Approved"
    report = mturk.collect(tasks, out, endpoint_url=fake.endpoint_url)
    assert report["assignments"] == 12 and report["kept_from_before"] == 12 and report["Approved"] >= 1
    with open(out, newline="") as f:
        assert sum(1 for r in csv.DictReader(f) if r["HITId"] == gone) == 2


def test_the_command_never_prints_credentials(tasks, fake, capsys):
    from pipeline.__main__ import main

    assert main(["mturk", "publish", str(tasks), "--endpoint-url", fake.endpoint_url]) == 0
    assert main(["mturk", "collect", str(tasks), "--endpoint-url", fake.endpoint_url, "--output", str(tasks.parent / "r.csv")]) == 0
    assert main(["mturk", "collect", str(tasks), "--live", "--output", str(tasks.parent / "r.csv")]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out.split("}\n")[0] + "}")["created"] == 6
    assert "publish" in out.err and "fake-secret-key" not in out.out + out.err and "AKIDFAKE" not in out.out + out.err


def test_s3_base_uploads_the_annotation_copies(made, tmp_path, monkeypatch, fake):
    from pipeline.toys.annotators import write_original_images, write_toy_pool as toy

    pool = toy(tmp_path / "pool", n_classes=2, candidates_per_class=10, originals_per_class=3, images=True)
    write_original_images(tmp_path / "originals.parquet", pool)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", fake.endpoint_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    make_tasks(tmp_path / "pool", tmp_path / "t", TasksConfig(image_base_url="s3://bucket/round-1"),
               original_images=tmp_path / "originals.parquet", environ={"TASKS_SECRET": "s3 test secret 0123456789"})
    names = {p.name for p in (tmp_path / "t" / "upload").iterdir()}
    assert {k.rsplit("/", 1)[1] for k in fake.objects} == names and all(k.startswith("/bucket/round-1/") for k in fake.objects)
    assert {ctype for _, ctype in fake.objects.values()} == {"image/jpeg"}
    with open(tmp_path / "t" / "batch_input.csv", newline="") as f:
        assert next(csv.DictReader(f))["image_1_url"].startswith("https://bucket.s3.amazonaws.com/round-1/")
