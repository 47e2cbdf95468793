"""The near-duplicate search: exact distances per measure, SSIM against scikit-image, planted pairs,
bounded memory, resume, review status, sample reading it, bad inputs."""

from __future__ import annotations

import json
import logging
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from skimage.metrics import structural_similarity

from pipeline.rebuild.near_duplicates import (
    SearchConfig,
    near_duplicate_search,
    read_reviews,
)
from pipeline.rebuild.near_duplicates.features import Segment, decode_copies
from pipeline.rebuild.near_duplicates.search import search_top_k
from pipeline.rebuild.near_duplicates.ssim import dssim, ssim, ssim_against, ssim_stats
from pipeline.toys.synthetic import photo_like_array

L2_DSSIM = SearchConfig(metrics=("l2", "dssim"), top_k=5, workers=1)


def _save(path, array, quality=90):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, quality=quality)
    return path


def _photos(n, seed, size=(96, 72)):
    rng = np.random.default_rng(seed)
    return [photo_like_array(rng, *size) for _ in range(n)]


@pytest.fixture
def world(tmp_path):
    """A reference folder of 12 photos; candidates: 3 planted copies (JPEG q40, brightness, resize) + 2 new."""
    photos = _photos(14, 0)
    refs, cands = tmp_path / "refs", tmp_path / "cands"
    for i, a in enumerate(photos[:12]):
        _save(refs / f"r{i:02d}.jpg", a)
    _save(cands / "jpeg.jpg", photos[0], quality=40)
    _save(cands / "bright.jpg", np.clip(photos[1].astype(int) * 1.1, 0, 255).astype(np.uint8))
    small = Image.fromarray(photos[2]).resize((86, 65)).resize((96, 72))
    _save(cands / "resize.jpg", np.asarray(small))
    _save(cands / "new0.jpg", photos[12])
    _save(cands / "new1.jpg", photos[13])
    return tmp_path, refs, cands


def _copies(folder):
    files = sorted(p for p in folder.rglob("*.jpg"))
    return [p.relative_to(folder).as_posix() for p in files], np.stack([decode_copies(p, False)[0] for p in files])


def _rows(result, metric):
    table = result.neighbours.filter(pa.compute.equal(result.neighbours.column("metric"), metric)).to_pylist()
    out = {}
    for row in table:
        out.setdefault(row["candidate_id"], []).append((row["reference_id"], row["reference_source"], row["distance"]))
    return out


def test_l2_matches_brute_force_numpy(world):
    root, refs, cands = world
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", SearchConfig(metrics=("l2",), top_k=4, workers=1))
    c_ids, c_pix = _copies(cands)
    r_ids, r_pix = _copies(refs)
    all_ids = [(i, str(refs)) for i in r_ids] + [(i, str(cands)) for i in c_ids]
    all_pix = np.concatenate([r_pix, c_pix]).reshape(len(all_ids), -1).astype(np.float64)
    got = _rows(result, "l2")
    for q, cid in enumerate(c_ids):
        d = ((all_pix - c_pix[q].reshape(-1).astype(np.float64)) ** 2).sum(axis=1)
        d[len(r_ids) + q] = np.inf  # never its own neighbour
        order = np.argsort(d, kind="stable")[:4]
        assert [(r, s) for r, s, _ in got[cid]] == [all_ids[j] for j in order]
        np.testing.assert_allclose([x for _, _, x in got[cid]], d[order], rtol=1e-5)


def test_dssim_matches_scikit_image_on_every_pair(world):
    root, refs, cands = world
    config = SearchConfig(metrics=("l2", "dssim"), top_k=16, workers=1)  # top-k >= references: every pair is compared
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", config)
    c_ids, c_pix = _copies(cands)
    r_ids, r_pix = _copies(refs)
    pool = list(zip([(i, str(refs)) for i in r_ids] + [(i, str(cands)) for i in c_ids], list(r_pix) + list(c_pix)))
    got = _rows(result, "dssim")
    for q, cid in enumerate(c_ids[:2]):
        expected = sorted(
            ((1 - structural_similarity(c_pix[q], image, win_size=35, channel_axis=-1, data_range=255)) / 2, key)
            for key, image in pool if key != (cid, str(cands))
        )
        assert [(r, s) for r, s, _ in got[cid]] == [key for _, key in expected]
        np.testing.assert_allclose([x for _, _, x in got[cid]], [d for d, _ in expected], atol=1e-6)
    assert result.report["top_k"] == {"asked": 16, "listed": 16}


@pytest.mark.parametrize("window", [35, 7])
def test_ssim_matches_scikit_image(window):
    a, b = _photos(2, 3, (256, 256))
    c = np.clip(a.astype(int) + 25, 0, 255).astype(np.uint8)
    flat = np.full_like(a, 128)
    for x, y in ((a, b), (a, c), (a, a), (a, flat), (flat, flat)):
        expected = structural_similarity(x, y, win_size=window, channel_axis=-1, data_range=255)
        assert ssim(x, y, window) == pytest.approx(expected, abs=1e-6)
    many = ssim_stats(np.stack([a, b, c]), window)
    np.testing.assert_allclose(
        ssim_against(many, 0, many),
        [structural_similarity(a, y, win_size=window, channel_axis=-1, data_range=255) for y in (a, b, c)], atol=1e-6)


def test_planted_duplicates_found_at_rank_1_and_reviews_needed(world):
    root, refs, cands = world
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", L2_DSSIM)
    planted = {"jpeg.jpg": "r00.jpg", "bright.jpg": "r01.jpg", "resize.jpg": "r02.jpg"}
    for metric in ("l2", "dssim"):
        got = _rows(result, metric)
        for cid, source in planted.items():
            assert got[cid][0][:2] == (source, str(refs)), (metric, cid, got[cid][:2])
    status = {(r["candidate_id"], r["metric"]): r for r in result.status.to_pylist()}
    for cid, source in planted.items():
        assert not status[(cid, "l2")]["sufficiently_reviewed"]
        assert status[(cid, "l2")]["nearest_unreviewed_id"] == source
    assert status[("new0.jpg", "l2")]["sufficiently_reviewed"] and status[("new0.jpg", "dssim")]["sufficiently_reviewed"]
    on_disk = pq.read_table(root / "out" / "neighbours.parquet")
    assert on_disk.schema.names == ["candidate_id", "metric", "rank", "reference_id", "reference_source", "distance"]
    assert on_disk.num_rows == 5 * 2 * 5


def test_reviewed_pairs_make_a_candidate_sufficiently_reviewed(world):
    root, refs, cands = world
    reviews = root / "reviewed_pairs.jsonl"
    rows = [{"candidate_id": c, "metric": "l2", "reference_id": r, "reviewer": "me", "date": "2026-12-01", "decision": "near_duplicate"}
            for c, r in (("jpeg.jpg", "r00.jpg"), ("bright.jpg", "r01.jpg"))]
    reviews.write_text("".join(json.dumps(r) + "\n" for r in rows))
    original = root / "original.json"
    original.write_text(json.dumps({"resize.jpg": {"dssim": {"reviewer": "x", "date": "d", "references": ["r02.jpg"]}}}))
    assert read_reviews(original) == {("resize.jpg", "r02.jpg", None)}
    folder = root / "REVIEW"  # the review app's folder
    folder.mkdir()
    (folder / "reviewed_pairs.jsonl").write_text(reviews.read_text())
    (folder / "near_duplicates.json").write_text(json.dumps({"resize.jpg": ["r02.jpg"]}))
    assert read_reviews(folder) == {("jpeg.jpg", "r00.jpg", None), ("bright.jpg", "r01.jpg", None), ("resize.jpg", "r02.jpg", None)}
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", L2_DSSIM, reviews=reviews)
    status = {(r["candidate_id"], r["metric"]): r for r in result.status.to_pylist()}
    for cid in ("jpeg.jpg", "bright.jpg"):
        for metric in ("l2", "dssim"):  # a pair reviewed on one list counts on every list
            assert status[(cid, metric)]["sufficiently_reviewed"], (cid, metric)
            assert status[(cid, metric)]["reviewed_up_to"] > 1e8 if metric == "l2" else 0.2205
    assert not status[("resize.jpg", "l2")]["sufficiently_reviewed"]
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", L2_DSSIM, reviews=original)
    assert {(r["candidate_id"], r["metric"]): r["sufficiently_reviewed"] for r in result.status.to_pylist()}[("resize.jpg", "dssim")]


def test_bounded_memory_gives_the_same_answer(world, tmp_path):
    root, refs, cands = world
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", SearchConfig(metrics=("l2",), top_k=4, workers=1))
    pixels = sorted((root / "out" / "features" / "pixels-256").rglob("shard-*.npy"))
    queries, references = [Segment(str(pixels[0]))], [Segment(str(p)) for p in pixels]
    total = sum(np.load(p, mmap_mode="r").nbytes for p in pixels)
    budget = 4 << 20  # 4 MB: one float32 row of 256 x 256 x 3 is 0.75 MB
    assert total * 4 > 3 * budget  # the references as float32 (4 bytes a pixel) are far larger than the budget
    peaks = []
    for times in (1, 4):  # the same references listed 4 times: 4x the rows, the same peak
        tracemalloc.start()
        D_small, I_small = search_top_k(queries, references * times, 4, memory_bytes=budget, center=128.0)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    D_big, I_big = search_top_k(queries, references, 4, memory_bytes=1 << 30, center=128.0)
    assert peaks[0] < 3 * budget and peaks[1] < 1.2 * peaks[0], peaks  # one-row granularity at this tiny budget
    D_small, I_small = search_top_k(queries, references, 4, memory_bytes=budget, center=128.0)
    np.testing.assert_array_equal(I_small, I_big)
    np.testing.assert_allclose(D_small, D_big, rtol=1e-12)
    assert result.report["settings"]["memory_mb"] == 1024


def test_resume_with_added_references_computes_only_the_new_ones(world):
    root, refs, cands = world
    more = root / "more"
    for i, a in enumerate(_photos(4, 9)):
        _save(more / f"m{i}.jpg", a)
    first = near_duplicate_search(str(cands), [str(refs)], root / "out", L2_DSSIM)
    assert first.report["features_computed"] == 5 + 12
    again = near_duplicate_search(str(cands), [str(refs), str(more)], root / "out", L2_DSSIM)
    assert again.report["features_computed"] == 4
    fresh = near_duplicate_search(str(cands), [str(refs), str(more)], root / "fresh", L2_DSSIM)
    assert fresh.report["features_computed"] == 5 + 12 + 4
    assert again.neighbours.equals(fresh.neighbours)
    assert {r["source"] for r in again.report["references"]} == {str(refs), str(more), str(cands)}


@pytest.mark.slow
def test_ray_shards_merge_to_the_same_top_k(world):
    pytest.importorskip("ray", reason="ray is part of the rebuild extra")
    root, refs, cands = world
    config = SearchConfig(metrics=("l2",), top_k=4, workers=1)
    plain = near_duplicate_search(str(cands), [str(refs)], root / "out", config)
    sharded = near_duplicate_search(str(cands), [str(refs)], root / "out", SearchConfig(metrics=("l2",), top_k=4, workers=1, ray="local", ray_shards=3))
    assert sharded.neighbours.column("reference_id").equals(plain.neighbours.column("reference_id"))
    np.testing.assert_allclose(sharded.neighbours.column("distance").to_numpy(), plain.neighbours.column("distance").to_numpy(), rtol=1e-6)


def test_unreadable_image_is_named_and_left_out(world, caplog):
    root, refs, cands = world
    (cands / "broken.jpg").write_bytes(b"this is not a JPEG")
    with caplog.at_level(logging.WARNING):
        result = near_duplicate_search(str(cands), [str(refs)], root / "out", L2_DSSIM)
    assert [x["id"] for x in result.report["left_out"]] == ["broken.jpg"]
    assert "cannot identify image" in result.report["left_out"][0]["reason"]
    assert "broken.jpg" in caplog.text
    assert "broken.jpg" not in set(result.neighbours.column("candidate_id").to_pylist() + result.neighbours.column("reference_id").to_pylist())


def test_table_without_ids_is_refused(world):
    root, refs, cands = world
    table = root / "refs.parquet"
    pq.write_table(pa.table({"image": [(refs / "r00.jpg").read_bytes()]}), table)
    with pytest.raises(ValueError, match="has no id column candidate_id or image_id or id"):
        near_duplicate_search(str(cands), [str(table)], root / "out", L2_DSSIM)
    pq.write_table(pa.table({"image_id": ["a", None], "image": [(refs / "r00.jpg").read_bytes()] * 2}), table)
    with pytest.raises(ValueError, match="1 image\\(s\\) have no id"):
        near_duplicate_search(str(cands), [str(table)], root / "out", L2_DSSIM)


def test_mismatched_sizes(world):
    root, refs, cands = world
    a, b = _photos(2, 5, (64, 64))
    with pytest.raises(ValueError, match="shape \\(64, 64, 3\\) with one of shape \\(48, 64, 3\\)"):
        dssim(a, b[:48])
    _save(cands / "big.jpg", _photos(1, 6, (300, 200))[0])  # any size: every image is compared as its 256 x 256 copy
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", L2_DSSIM)
    assert "big.jpg" in result.neighbours.column("candidate_id").to_pylist()


def test_empty_collection_is_refused(world):
    root, _, cands = world
    (root / "empty").mkdir()
    with pytest.raises(ValueError, match="is empty"):
        near_duplicate_search(str(cands), [str(root / "empty")], root / "out", L2_DSSIM)


def test_top_k_larger_than_the_references_lists_them_all(world, caplog):
    root, refs, cands = world
    with caplog.at_level(logging.WARNING):
        result = near_duplicate_search(str(cands), [str(refs)], root / "out", SearchConfig(metrics=("l2",), top_k=100, workers=1))
    assert "--top-k 100 is more than the 16 references" in caplog.text
    assert result.report["top_k"] == {"asked": 100, "listed": 16}
    assert result.neighbours.num_rows == 5 * 16
    with pytest.raises(ValueError, match="--top-k must be a positive"):
        SearchConfig(top_k=0)


def test_output_folder_of_someone_else_is_refused(world):
    root, refs, cands = world
    (root / "mine").mkdir()
    (root / "mine" / "thesis.tex").write_text("x")
    with pytest.raises(ValueError, match="refusing to replace"):
        near_duplicate_search(str(cands), [str(refs)], root / "mine", L2_DSSIM)
    assert (root / "mine" / "thesis.tex").read_text() == "x"


def test_pool_candidates_and_sample_excludes_the_unreviewed(world):
    """A pool's candidates with a planted copy of a reference; `sample` reads review_status.parquet."""
    from helpers_rebuild import A, B, cid, pool_with

    from pipeline.rebuild.revision import SamplingConfig
    from pipeline.rebuild.sample import sample_revision
    from pipeline.rebuild.sample_inputs import read_review
    from pipeline.rebuild.tables import from_rows, write_table

    root, refs, _ = world
    photos = _photos(6, 21)
    pool_dir = root / "pool"
    pool_dir.mkdir()
    rows = [(cid(n), A if n < 3 else B, 10, 9) for n in range(6)]
    images = [_save(pool_dir / "images" / f"{n}.jpg", photos[n]) for n in range(6)]
    images[4] = _save(pool_dir / "images" / "4.jpg", np.asarray(Image.open(refs / "r05.jpg")), quality=40)  # a copy of a reference
    write_table(from_rows([{"candidate_id": c, "wnid": w} for c, w, _, _ in rows], "candidates"), pool_dir / "candidates.parquet")
    write_table(from_rows([{"candidate_id": cid(n), "path": f"images/{n}.jpg"} for n in range(6)], "images"), pool_dir / "images.parquet")
    result = near_duplicate_search(str(pool_dir), [str(refs)], root / "out", L2_DSSIM)
    first = {r["candidate_id"]: r for r in result.neighbours.to_pylist() if r["rank"] == 1 and r["metric"] == "l2"}
    assert (first[cid(4)]["reference_id"], first[cid(4)]["reference_source"]) == ("r05.jpg", str(refs))
    review = read_review(root / "out" / "review_status.parquet")
    assert review.column_names == ["candidate_id", "l2", "fc7", "dssim"]
    pool, frequencies = pool_with(rows)
    config = SamplingConfig(rule="threshold-0.7", seed=0, per_class=3, wnids=(A, B))
    decisions = sample_revision(pool, frequencies, config, output_filename="r.json", near_duplicate_review=review).decisions
    decision = dict(zip(decisions.column("candidate_id").to_pylist(), decisions.column("decision").to_pylist()))
    assert decision[cid(4)] == "review_unfinished"
    assert [decision[cid(n)] for n in (0, 1, 2, 3, 5)] == ["selected"] * 5


@pytest.mark.torch
@pytest.mark.slow
def test_fc7_matches_brute_force_on_the_model_features(world, tmp_path):
    pytest.importorskip("torchvision", reason="fc7 needs the eval extra")
    from pipeline.rebuild.near_duplicates.features import Fc7Model

    root, refs, cands = world
    for p in sorted(refs.glob("*.jpg"))[4:]:
        p.unlink()
    for p in ("new0.jpg", "new1.jpg"):
        (cands / p).unlink()
    config = SearchConfig(metrics=("fc7",), top_k=3, workers=1, pretrained=False, device="cpu")
    result = near_duplicate_search(str(cands), [str(refs)], root / "out", config)
    model = Fc7Model(pretrained=False)
    keys, features = [], []
    for folder in (refs, cands):
        for p in sorted(folder.glob("*.jpg")):
            keys.append((p.name, str(folder)))
            features.append(model(decode_copies(p, True)[1][None])[0].astype(np.float64))
    features = np.stack(features)
    assert features.shape[1] == 4096 and (features >= 0).all()  # after the ReLU
    got = _rows(result, "fc7")
    for q, name in enumerate(sorted(p.name for p in cands.glob("*.jpg"))):
        d = ((features - features[4 + q]) ** 2).sum(axis=1)
        d[4 + q] = np.inf
        order = np.argsort(d)[:3]
        assert [(r, s) for r, s, _ in got[name]] == [keys[j] for j in order]
        np.testing.assert_allclose([x for _, _, x in got[name]], d[order], rtol=1e-4)


@pytest.mark.torch
def test_torch_search_gives_the_faiss_neighbours():
    """The GPU path's arithmetic (torch), run on the CPU here: the same neighbours as FAISS."""
    pytest.importorskip("torch", reason="the GPU path needs the eval extra")
    import faiss

    from pipeline.rebuild.near_duplicates.search import _knn_torch

    rng = np.random.default_rng(4)
    q, r = rng.normal(size=(7, 64)).astype(np.float32), rng.normal(size=(50, 64)).astype(np.float32)
    D, I = _knn_torch(q, r, 5, "cpu")
    D_ref, I_ref = faiss.knn(q, r, 5)
    np.testing.assert_array_equal(I, I_ref)
    np.testing.assert_allclose(D, D_ref, rtol=1e-4)


def test_command_line(world, capsys):
    from pipeline.__main__ import main

    root, refs, cands = world
    code = main(["near-duplicates", "--candidates", str(cands), "--references", str(refs), "--output", str(root / "out"),
                 "--metrics", "l2", "--top-k", "3", "--threshold", "l2=5e7", "--workers", "1"])
    assert code == 0
    printed = capsys.readouterr().out
    assert '"listed": 3' in printed and "review_status.parquet" in printed
    status = pq.read_table(root / "out" / "review_status.parquet").to_pylist()
    assert {r["threshold"] for r in status} == {5e7}
    assert main(["near-duplicates", "--candidates", str(cands), "--output", str(root / "out2"), "--metrics", "l2,sift"]) == 1
    assert "unknown measure(s) ['sift']" in capsys.readouterr().err


def test_dataset_spec_references_with_row_or_column_ids(world):
    import datasets

    root, refs, cands = world
    files = sorted(refs.glob("*.jpg"))
    features = datasets.Features({"image": datasets.Image(), "name": datasets.Value("string"), "label": datasets.ClassLabel(names=["n01440764", "n01443537"])})
    table = datasets.Dataset.from_dict(
        {"image": [{"bytes": p.read_bytes(), "path": None} for p in files], "name": [p.stem for p in files], "label": [0, 1] * (len(files) // 2)},
        features=features)
    (root / "ds" / "data").mkdir(parents=True)
    table.to_parquet(str(root / "ds" / "data" / "test-00000-of-00001.parquet"))
    spec = f"{root / 'ds'}@test"
    result = near_duplicate_search(str(cands), [spec], root / "out", SearchConfig(metrics=("l2",), top_k=2, workers=1, include_candidates=False))
    first = {r["candidate_id"]: (r["reference_id"], r["reference_source"]) for r in result.neighbours.to_pylist() if r["rank"] == 1}
    assert first["jpeg.jpg"] == ("0", spec) and first["bright.jpg"] == ("1", spec)  # the row index
    named = near_duplicate_search(str(cands), [spec], root / "out", SearchConfig(metrics=("l2",), top_k=2, workers=1, include_candidates=False, id_column="name"))
    assert {r["reference_id"] for r in named.neighbours.to_pylist() if r["candidate_id"] == "jpeg.jpg" and r["rank"] == 1} == {"r00"}
    with pytest.raises(ValueError, match="has no id column 'nope'"):
        near_duplicate_search(str(cands), [spec], root / "out", SearchConfig(metrics=("l2",), id_column="nope"))
