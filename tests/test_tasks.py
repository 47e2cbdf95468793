"""The tasks stage: grid rules, public names, the files it writes, follow-up rounds, and ingest --tasks."""

import csv
import json
import os
import re
import stat
from collections import Counter

import pytest
from PIL import Image

from pipeline.rebuild.classes import load_classes
from pipeline.rebuild.ingest import ingest
from pipeline.rebuild.task_grid import GridConfig
from pipeline.rebuild.task_key import TaskKey, TaskKeyError, read_key, read_key_header, read_tasks
from pipeline.rebuild.task_page import placeholders
from pipeline.rebuild.tasks import TasksConfig, make_tasks, mturk_cost
from pipeline.toys.annotators import answer_tasks, toy_truth, write_original_images, write_toy_pool

SECRET = {"TASKS_SECRET": "a test secret of enough length"}


@pytest.fixture(scope="module")
def toys(tmp_path_factory):
    root = tmp_path_factory.mktemp("toys")
    pool = write_toy_pool(root / "pool", n_classes=5, candidates_per_class=60, originals_per_class=10, images=True)
    write_original_images(root / "originals.parquet", pool)
    pool.write_candidates_jsonl(root / "candidates.jsonl")
    pool.write_originals_csv(root / "originals.csv")
    make_tasks(root / "pool", root / "tasks", TasksConfig(), original_images=root / "originals.parquet", environ=SECRET)
    return root, pool


def roles(folder):
    key = {e.name: e for e in read_key(folder)}
    return key, read_tasks(folder)


def test_grid_sizes_controls_and_negatives_from_the_most_similar_class(toys):
    root, pool = toys
    key, tasks = roles(root / "tasks")
    classes = load_classes()
    pool_classes = set(pool.wnids.tolist())
    assert len(tasks) == 5 * 2  # 60 candidates per class, 42 per grid
    for task in tasks:
        entries = [key[n] for n in task.images]
        assert len(task.images) == len(set(task.images)) == 48
        count = Counter(e.role for e in entries)
        assert count == {"candidate": 42, "positive": 3, "negative": 3}
        assert all(e.wnid == task.wnid for e in entries if e.role in ("candidate", "positive"))
        expected = next(w for w in classes.most_similar(task.wnid) if w in pool_classes)
        assert {e.wnid for e in entries if e.role == "negative"} == {expected}
    assert next(t for t in tasks if t.wnid == "n01440764") and classes.most_similar("n01440764")[0] == "n01443537"


def test_every_candidate_covered_and_the_last_grid_topped_up(toys):
    root, pool = toys
    key, tasks = roles(root / "tasks")
    shown = Counter(key[n].id for t in tasks for n in t.images if key[n].role == "candidate")
    assert set(shown) == set(pool.candidate_ids.tolist())
    # 60 = 42 + 18: the second grid of each class repeats 24 candidates of the first
    assert sum(1 for c in shown.values() if c == 2) == 5 * 24
    # controls rotate: six different originals of the class are shown in its two tasks
    for wnid in pool.wnids:
        positives = {key[n].id for t in tasks if t.wnid == wnid for n in t.images if key[n].role == "positive"}
        assert len(positives) == 6


def test_positions_are_seeded(toys, tmp_path):
    root, _ = toys
    make_tasks(root / "pool", tmp_path / "again", TasksConfig(upload=False), environ=SECRET)
    make_tasks(root / "pool", tmp_path / "other", TasksConfig(grid=GridConfig(seed=1), upload=False), environ=SECRET)
    first = (root / "tasks" / "tasks.jsonl").read_text()
    assert (tmp_path / "again" / "tasks.jsonl").read_text() == first
    assert (tmp_path / "other" / "tasks.jsonl").read_text() != first
    positions = [next(i for i, n in enumerate(t.images) if n in {e.name for e in read_key(root / "tasks") if e.role == "positive"})
                 for t in read_tasks(root / "tasks")]
    assert len(set(positions)) > 1  # controls are not always at the same place


def test_public_names_hide_ids_and_roles(toys):
    root, pool = toys
    ids = set(pool.candidate_ids.tolist()) | set(pool.original_ids.tolist())
    text = "".join((root / "tasks" / f).read_text() for f in ("tasks.jsonl", "batch_input.csv", "task.html"))
    for image_id in ids:
        assert image_id not in text and image_id.split(".")[0] not in text
    names = {e.name for e in read_key(root / "tasks")}
    assert all(re.fullmatch(r"[0-9a-f]{32}", n) for n in names)
    assert not any(i in n or n in i for n in names for i in ids)
    assert stat.S_IMODE(os.stat(root / "tasks" / "key.jsonl").st_mode) == 0o600
    assert read_key_header(root / "tasks")["secret"] is None  # from TASKS_SECRET, not stored


def test_a_generated_secret_is_stored_in_the_key(toys, tmp_path):
    root, _ = toys
    make_tasks(root / "pool", tmp_path / "t", TasksConfig(upload=False), environ={})
    assert len(bytes.fromhex(read_key_header(tmp_path / "t")["secret"])) == 32
    names = {e.name for e in read_key(tmp_path / "t")}
    assert not names & {e.name for e in read_key(root / "tasks")}  # another secret, other names


def test_batch_input_page_and_upload(toys):
    root, _ = toys
    folder = root / "tasks"
    with open(folder / "batch_input.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    tasks = read_tasks(folder)
    assert [r["task_id"] for r in rows] == [t.task_id for t in tasks]
    assert rows[0]["class_name"] == "tench" and rows[0]["wikipedia_url"] == "https://en.wikipedia.org/wiki/tench"
    assert rows[0]["gloss"].startswith("freshwater dace-like game fish")
    assert [rows[0][f"image_{k}_url"] for k in range(1, 49)] == [f"upload/{n}.jpg" for n in tasks[0].images]
    page = (folder / "task.html").read_text()
    assert set(placeholders(page)) <= set(rows[0]) and page.count('name="selected"') == 48
    files = sorted(p.stem for p in (folder / "upload").iterdir())
    assert files == sorted({n for t in tasks for n in t.images})
    for path in list((folder / "upload").iterdir())[:20]:
        with Image.open(path) as image:
            assert image.format == "JPEG" and max(image.size) == 500


def test_summary_counts_and_cost(toys):
    summary = json.loads((toys[0] / "tasks" / "summary.json").read_text())
    assert summary["tasks"] == 10 and summary["reasons"] == {"initial": 10}
    assert summary["images_per_class"] == {"min": 60, "median": 60, "max": 60}
    assert summary["cost"] == mturk_cost(10, 10, 0.10)
    assert summary["cost"]["total_usd"] == pytest.approx(10 * 10 * (0.10 + 0.04))
    assert mturk_cost(1, 9, 0.10)["fee_per_assignment_usd"] == 0.02 and mturk_cost(1, 3, 0.01)["fee_per_assignment_usd"] == 0.01


def test_a_class_with_few_candidates_gets_one_grid_of_all(tmp_path):
    write_toy_pool(tmp_path / "pool", n_classes=2, candidates_per_class=10, originals_per_class=4)
    summary = make_tasks(tmp_path / "pool", tmp_path / "t", TasksConfig(upload=False), environ=SECRET)
    assert summary["tasks"] == 2 and any("only 10 candidates" in n for n in summary["notes"])
    assert all(len(t.images) == 16 for t in read_tasks(tmp_path / "t"))


def test_bad_options_and_outputs_are_refused(toys, tmp_path):
    root, _ = toys
    with pytest.raises(ValueError, match="must exceed positive"):
        GridConfig(images_per_task=6, positive=3, negative=3)
    with pytest.raises(ValueError, match="image-base-url"):
        TasksConfig(image_base_url="ftp://x")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("mine")
    with pytest.raises(ValueError, match="refusing to replace"):
        make_tasks(root / "pool", tmp_path / "mine", TasksConfig(upload=False), environ=SECRET)
    with pytest.raises(ValueError, match="original-images"):
        make_tasks(root / "pool", tmp_path / "t", TasksConfig(), environ=SECRET)
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "mine" and not (tmp_path / "t").exists()


def _results(root, pool, out, **kwargs):
    answer_tasks(root / "tasks", out, toy_truth(pool), workers=30, **kwargs)
    with open(out, newline="") as f:
        return list(csv.DictReader(f))


def _write(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_ingest_maps_names_back_and_records_control_accuracy(toys, tmp_path):
    root, pool = toys
    rows = _results(root, pool, tmp_path / "results.csv", rejected_fraction=0.1)
    report = ingest(tmp_path / "p", candidates=root / "candidates.jsonl", originals=root / "originals.csv",
                    results=[tmp_path / "results.csv"], tasks=[root / "tasks"])
    assert report["assignments"]["total"] == len(rows) == 100 and report["candidates_never_shown"] == 0
    import pyarrow.parquet as pq

    annotations = pq.read_table(tmp_path / "p" / "annotations.parquet").to_pylist()
    key = TaskKey.load([root / "tasks"])
    first = rows[0]
    task = key.tasks[first["Input.task_id"]]
    picked = {key.entries[u.rsplit("/", 1)[1][:-4]].id for u in (first["Answer.selected"] or "").split("|") if u}
    mine = [a for a in annotations if a["assignment_id"] == first["AssignmentId"]]
    assert [a["image_id"] for a in mine] == [key.entries[n].id for n in task.images]
    assert {a["image_id"] for a in mine if a["selected"]} == picked and all(a["wnid"] == task.wnid for a in mine)
    accuracy = {r["worker_id"]: r for r in report["worker_control_accuracy"]}
    counted = [r for r in rows if r["AssignmentStatus"] != "Rejected"]
    assert sum(r["controls"] for r in accuracy.values()) == 6 * len(counted)
    from pipeline.rebuild.selection_frequency import worker_control_accuracy
    from pipeline.rebuild.pool import load_pool

    p = load_pool(tmp_path / "p", ["annotations", "originals"])
    independent = {r["worker_id"]: (r["controls"], r["correct"]) for r in worker_control_accuracy(p.annotations, p.originals).to_pylist()}
    assert independent == {w: (r["controls"], r["correct"]) for w, r in accuracy.items()}


@pytest.mark.parametrize("change, message", [
    (lambda r, other: r.update({"Input.task_id": "n01440764-000000000000"}), "line 2: unknown task 'n01440764-000000000000'"),
    (lambda r, other: r.update({"Answer.selected": "upload/" + "0" * 32 + ".jpg"}), "line 2: selected image '0{32}' is not a name of any task"),
    (lambda r, other: r.update({"Answer.selected": other["Input.image_1_url"]}), "line 2: selected image [0-9a-f]{32} is not one of the images of task"),
    (lambda r, other: r.update({"Input.image_5_url": other["Input.image_5_url"]}), "line 2: image 5 of task .*tampered"),
])
def test_a_bad_results_row_is_an_error_naming_it(toys, tmp_path, change, message):
    root, pool = toys
    rows = _results(root, pool, tmp_path / "results.csv")
    other = next(r for r in rows if r["Input.task_id"] != rows[0]["Input.task_id"])
    change(rows[0], other)
    _write(tmp_path / "bad.csv", rows)
    with pytest.raises(TaskKeyError, match=message):
        ingest(tmp_path / "p", candidates=root / "candidates.jsonl", originals=root / "originals.csv",
               results=[tmp_path / "bad.csv"], tasks=[root / "tasks"])
    assert not (tmp_path / "p").exists()


def test_follow_up_round_covers_only_what_is_short(toys, tmp_path):
    root, pool = toys
    _results(root, pool, tmp_path / "results.csv", rejected_fraction=0.15, seed=3)
    ingest(tmp_path / "p", candidates=root / "candidates.jsonl", originals=root / "originals.csv",
           results=[tmp_path / "results.csv"], tasks=[root / "tasks"])
    import pyarrow.parquet as pq

    counted = Counter((a["image_id"], a["wnid"]) for a in pq.read_table(tmp_path / "p" / "annotations.parquet").to_pylist()
                      if a["status"] != "Rejected")
    short = {c for c, w in zip(pool.candidate_ids, pool.wnids[pool.candidate_class]) if counted[(c, w)] < 10}
    assert short  # some candidates lost annotations to rejections
    config = TasksConfig(follow_up=True, min_originals=8, upload=False)
    summary = make_tasks(tmp_path / "p", tmp_path / "f", config, environ=SECRET)
    key, tasks = roles(tmp_path / "f")
    short_tasks = [t for t in tasks if t.reason.startswith("candidates with fewer")]
    covered = {key[n].id for t in short_tasks for n in t.images if key[n].role == "candidate"}
    assert short <= covered and len(short_tasks) == sum(-(-sum(1 for c in short if c in set(pool.candidate_ids[pool.candidate_class == k])) // 42)
                                                         for k in range(5))
    original_tasks = [t for t in tasks if "annotated originals" in t.reason]
    assert len(original_tasks) == 5 and sum(summary["reasons"].values()) == len(tasks)
    for t in original_tasks:  # 6 originals of 10 were shown (some lost annotations): the class needs 8, least annotated first
        extra = sorted(counted[(key[n].id, t.wnid)] for n in t.images if key[n].role == "positive")
        mine = sorted(counted[(o, t.wnid)] for o, w in zip(pool.original_ids, pool.wnids[pool.original_class]) if w == t.wnid)
        annotated = sum(1 for c in mine if c >= 10)
        assert extra == [c for c in mine if c < 10][: 8 - annotated] and extra[0] == 0
    both = TaskKey.load([root / "tasks", tmp_path / "f"])
    assert len(both.tasks) == 10 + len(tasks)


def test_another_class_list_gives_names_and_negatives(tmp_path):
    from pipeline.rebuild.classes import ClassInfo, ClassList

    write_toy_pool(tmp_path / "pool", n_classes=3, candidates_per_class=10, originals_per_class=4)
    from pipeline.rebuild.pool import load_pool

    wnids = sorted(set(load_pool(tmp_path / "pool", ["candidates"]).candidates.column("wnid").to_pylist()))
    classes = ClassList(tuple(ClassInfo(w, f"thing {i}", (f"thing {i}",), f"gloss {i}", "", (wnids[(i + 2) % 3],))
                              for i, w in enumerate(wnids)), "my list")
    make_tasks(tmp_path / "pool", tmp_path / "t", TasksConfig(upload=False), classes=classes, environ=SECRET)
    key, tasks = roles(tmp_path / "t")
    for task in tasks:
        i = wnids.index(task.wnid)
        assert {key[n].wnid for n in task.images if key[n].role == "negative"} == {wnids[(i + 2) % 3]}
    with open(tmp_path / "t" / "batch_input.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert (row["class_name"], row["gloss"], row["wikipedia_url"]) == ("thing 0", "gloss 0", "https://en.wikipedia.org/wiki/thing_0")
    with pytest.raises(ValueError, match="lacks"):
        make_tasks(tmp_path / "pool", tmp_path / "u", TasksConfig(upload=False), classes=ClassList(classes.classes[:2], "short"), environ=SECRET)


def test_tasks_from_a_pool_that_ingest_made_before_any_annotation(toys, tmp_path):
    import pyarrow as pa

    from pipeline.rebuild.tables import write_table
    from pipeline.toys.annotators import toy_jpeg

    root, pool = toys
    ids = pool.candidate_ids.tolist()
    write_table(pa.table({"candidate_id": pa.array(ids, pa.string()), "image": pa.array([toy_jpeg(i) for i in range(len(ids))], pa.binary())}),
                tmp_path / "images.parquet")
    report = ingest(tmp_path / "pool", candidates=root / "candidates.jsonl", originals=root / "originals.csv", results=[],
                    images=tmp_path / "images.parquet")
    assert report["annotation_rows"] == 0 and report["image_files"] == len(ids)
    summary = make_tasks(tmp_path / "pool", tmp_path / "tasks", TasksConfig(), original_images=root / "originals.parquet", environ=SECRET)
    assert summary["tasks"] == 10 and len(list((tmp_path / "tasks" / "upload").iterdir())) == len(read_key(tmp_path / "tasks"))
    with pytest.raises(ValueError, match="--tasks given without results"):
        ingest(tmp_path / "p2", candidates=root / "candidates.jsonl", originals=root / "originals.csv", results=[], tasks=[tmp_path / "tasks"])
