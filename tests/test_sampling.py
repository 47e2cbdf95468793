"""The three sampling rules on small hand-made pools where the right answer is known.

Expected values are worked out by hand from the rules in shared/reference/NOTES.md ("How the
original pipeline decided things"); each test says how.
"""

import numpy as np
import pytest
from helpers_rebuild import A, B, C, cid, pool_with, val

from pipeline.rebuild.revision import SamplingConfig
from pipeline.rebuild.sample import sample_revision
from pipeline.rebuild.sampling_rules import (
    REASONS,
    CandidateArrays,
    histogram_bin,
    largest_remainder,
    matched_frequency_targets,
    rank_within_groups,
    sample_matched_frequency,
    sample_threshold,
    sample_top_images,
)


def decisions(output) -> dict:
    table = output.decisions.to_pydict()
    return dict(zip(table["candidate_id"], table["decision"]))


def chosen(output) -> set:
    return {c for c, _ in output.revision.image_filenames}


# --- bins and rounding ------------------------------------------------------------------------


def test_bins_edges_go_to_the_bin_above():
    # "a value goes to the first bin whose edge it is below, so >= 0.8 is the top bin"
    values = [0.0, 0.1999, 0.2, 0.3999, 0.4, 0.6, 0.7999, 0.8, 1.0]
    assert histogram_bin(values).tolist() == [0, 0, 1, 1, 2, 3, 3, 4, 4]


def test_bins_reject_unsorted_edges():
    with pytest.raises(ValueError, match="increasing edges"):
        histogram_bin([0.5], [0.4, 0.2])


@pytest.mark.parametrize(
    "counts, total, expected",
    [
        ([3, 3, 2, 1, 1], 10, [3, 3, 2, 1, 1]),  # already sums to 10
        ([1, 0, 1, 0, 3], 4, [1, 0, 1, 0, 2]),  # 0.8, 0, 0.8, 0, 2.4: two 0.8 remainders get the 2 extra slots
        ([1, 1, 1, 0, 0], 10, [3, 3, 4, 0, 0]),  # 3.33 each: equal remainders, the higher bin first
        ([2, 1, 0, 0, 0], 10, [7, 3, 0, 0, 0]),  # 6.67, 3.33: the larger remainder (0.67) wins
        ([0, 0, 0, 0, 0], 10, [0, 0, 0, 0, 0]),  # no originals: nothing to match
    ],
)
def test_largest_remainder_by_hand(counts, total, expected):
    assert largest_remainder([counts], total).tolist() == [expected]


def test_largest_remainder_properties_on_random_histograms():
    # Hamilton's method: floor or floor + 1 of the exact share, the sum exact, and no bin that
    # did not get an extra slot has a larger remainder than one that did.
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 30, (500, 5))
    counts[counts.sum(axis=1) == 0, 0] = 1
    result = largest_remainder(counts, 10)
    exact = 10 * counts / counts.sum(axis=1, keepdims=True)
    assert (result.sum(axis=1) == 10).all()
    extra = result - np.floor(exact)
    assert set(np.unique(extra)) <= {0, 1}
    remainder = exact - np.floor(exact)
    for r, e in zip(remainder, extra):
        if e.any() and (e == 0).any():
            assert r[e == 1].min() >= r[e == 0].max()


def test_targets_only_count_originals_with_enough_annotations():
    # class 0: originals with 12, 12, 3 annotations; the 3-annotation one (sf 0.1) is ignored
    targets, usable = matched_frequency_targets(
        np.array([0, 0, 0]), np.array([0.9, 0.5, 0.1]), np.array([12, 12, 3]), 1, per_class=4, min_annotations_val=10
    )
    assert usable.tolist() == [2]
    assert targets.tolist() == [[0, 0, 2, 0, 2]]


def test_rank_within_groups():
    assert rank_within_groups(np.array([2, 1, 2, 1, 2]), np.array([3.0, 1.0, 1.0, 0.0, 2.0])).tolist() == [2, 1, 0, 0, 1]


# --- MatchedFrequency -------------------------------------------------------------------------

# originals of A: sf 0.1, 0.5, 0.9, 0.9, 0.95 (10 annotations) → histogram [1, 0, 1, 0, 3] →
# per_class 4: exact [0.8, 0, 0.8, 0, 2.4] → targets [1, 0, 1, 0, 2]
ORIGINALS_A = [(val(1), A, 10, 1), (val(2), A, 10, 5), (val(3), A, 10, 9), (val(4), A, 10, 9), (val(5), A, 20, 19)]
MF = dict(rule="matched-frequency", seed=1, per_class=4, wnids=(A,), min_num_val_images_per_wnid=5)


def bin_of_chosen(output) -> list[int]:
    table = output.decisions.to_pydict()
    return sorted(b for b, d in zip(table["bin"], table["decision"]) if d == "selected")


def test_matched_frequency_fills_each_bin_to_its_target():
    candidates = [(cid(i), A, 10, s) for i, s in enumerate([0, 1, 1, 5, 5, 10, 9, 8, 9, 10])]  # bins 0,0,0,2,2,4,4,4,4,4
    pool, sf = pool_with(candidates, ORIGINALS_A)
    out = sample_revision(pool, sf, SamplingConfig(**MF), output_filename="r.json")
    assert out.revision.is_valid
    assert out.report["target_histogram"] == [1, 0, 1, 0, 2]
    assert bin_of_chosen(out) == [0, 2, 4, 4]
    assert out.report["upward_sampled"] == 0
    assert out.report["mean_selection_frequency"]["originals"] == pytest.approx((0.1 + 0.5 + 0.9 + 0.9 + 0.95) / 5)


@pytest.mark.parametrize("upward", [True, False])
def test_matched_frequency_upward_sampling_takes_the_next_higher_non_empty_bin(upward):
    # bin 2 (target 1) is empty; bin 3 has one candidate, bin 4 three: the slot must come from bin 3
    candidates = [(cid(0), A, 10, 1), (cid(1), A, 10, 7)] + [(cid(i), A, 10, 9) for i in range(2, 5)]
    pool, sf = pool_with(candidates, ORIGINALS_A)
    out = sample_revision(pool, sf, SamplingConfig(**MF, allow_upward_sampling=upward), output_filename="r.json")
    if upward:
        assert out.revision.is_valid and out.report["upward_sampled"] == 1
        table = out.decisions.to_pydict()
        assert dict(zip(table["candidate_id"], table["upward_to_bin"]))[cid(1)] == 2
        assert bin_of_chosen(out) == [0, 3, 4, 4]
    else:  # the original marked the revision invalid and left the slot empty
        assert not out.revision.is_valid
        assert len(out.revision.image_filenames) == 3
        assert out.report["short_classes"] == {A: 1}
        assert "upward sampling is off" in out.report["problems"][0]


def test_matched_frequency_upward_sampling_prefers_the_previous_revision():
    # bin 3 target 1 but empty; bin 4 target 1 with three candidates, two of them in the previous
    # revision: one is carried over for bin 4, the other must fill bin 3's slot, whatever the seed
    arrays = CandidateArrays(
        class_index=np.zeros(3, int), selection_frequency=np.array([0.9, 0.9, 0.9]), num_annotations=np.full(3, 10),
        in_previous=np.array([False, True, True]),
    )
    for seed in range(20):
        result = sample_matched_frequency(arrays, np.array([[0, 0, 0, 1, 1]]), rng=np.random.default_rng(seed), allow_upward_sampling=True)
        assert sorted(result.selected.tolist()) == [1, 2]


def test_matched_frequency_class_without_enough_originals_is_invalid():
    pool, sf = pool_with([(cid(i), A, 10, 9) for i in range(6)], ORIGINALS_A[:3])
    out = sample_revision(pool, sf, SamplingConfig(**MF), output_filename="r.json")
    assert not out.revision.is_valid
    assert "fewer than 5 originals" in out.report["problems"][0]


def test_matched_frequency_chaining_keeps_valid_images_up_to_each_bins_target():
    candidates = [(cid(i), A, 10, s) for i, s in enumerate([0, 1, 1, 5, 5, 10, 9, 8, 9, 10])]
    pool, sf = pool_with(candidates, ORIGINALS_A)
    first = sample_revision(pool, sf, SamplingConfig(**MF), output_filename="r-0.json")
    removed = sorted(chosen(first))[0]
    second = sample_revision(pool, sf, SamplingConfig(**(MF | {"seed": 99})), output_filename="r-1.json", blacklist=[removed], previous=first.revision)
    assert second.revision.starting_from == "r-0.json"
    assert chosen(first) - {removed} <= chosen(second)
    assert removed not in chosen(second)
    assert second.report["carried_over"] == 3 and second.report["replaced_from_previous"] == 1
    assert bin_of_chosen(second) == [0, 2, 4, 4]


# --- Threshold --------------------------------------------------------------------------------


def test_threshold_with_per_class_overrides():
    # A keeps 0.7; B is lowered to 0.5: a 0.55 candidate passes in B, not in A
    candidates = [(cid(0), A, 20, 14), (cid(1), A, 20, 11), (cid(2), B, 20, 11), (cid(3), B, 20, 9), (cid(4), A, 20, 20), (cid(5), B, 20, 19)]
    pool, sf = pool_with(candidates)
    config = SamplingConfig(rule="threshold-0.7", seed=3, per_class=2, wnids=(A, B), wnid_thresholds={B: 0.5})
    out = sample_revision(pool, sf, config, output_filename="t.json")
    assert decisions(out) == {cid(0): "selected", cid(1): "below_threshold", cid(2): "selected", cid(3): "below_threshold", cid(4): "selected", cid(5): "selected"}
    assert out.revision.is_valid
    assert out.revision.to_json()["wnid_thresholds"] == {B: 0.5}


def test_threshold_picks_at_random_among_eligible_and_short_class_is_invalid():
    candidates = [(cid(i), A, 10, 9) for i in range(8)] + [(cid(8), B, 10, 9)]
    pool, sf = pool_with(candidates)
    picks = set()
    for seed in range(10):
        out = sample_revision(pool, sf, SamplingConfig(rule="threshold-0.7", seed=seed, per_class=2, wnids=(A, B)), output_filename="t.json")
        assert not out.revision.is_valid and out.report["short_classes"] == {B: 1}
        picks.add(frozenset(c for c, w in out.revision.image_filenames if w == A))
    assert len(picks) > 3  # different seeds, different samples


def test_threshold_chaining_replaces_only_removed_images():
    candidates = [(cid(i), A, 10, 9) for i in range(10)]
    pool, sf = pool_with(candidates)
    config = SamplingConfig(rule="threshold-0.7", seed=5, per_class=4, wnids=(A,))
    first = sample_revision(pool, sf, config, output_filename="t-0.json")
    removed = sorted(chosen(first))[:2]
    second = sample_revision(pool, sf, config, output_filename="t-1.json", blacklist=removed, previous=first.revision)
    assert chosen(first) - set(removed) <= chosen(second) and len(chosen(second)) == 4
    assert second.report["carried_over"] == 2 and second.report["replaced_from_previous"] == 2
    table = second.decisions.to_pydict()
    assert sum(table["carried_over"]) == 2


def test_chaining_refuses_a_previous_revision_of_another_rule():
    pool, sf = pool_with([(cid(i), A, 10, 9) for i in range(3)])
    first = sample_revision(pool, sf, SamplingConfig(rule="top-images", seed=0, per_class=1, wnids=(A,)), output_filename="c.json")
    with pytest.raises(ValueError, match="same rule"):
        sample_revision(pool, sf, SamplingConfig(rule="threshold-0.7", seed=0, per_class=1, wnids=(A,)), output_filename="a.json", previous=first.revision)


# --- TopImages --------------------------------------------------------------------------------


def top_one(candidates, previous=None):
    pool, sf = pool_with(candidates)
    out = sample_revision(pool, sf, SamplingConfig(rule="top-images", seed=0, per_class=1, wnids=(A,)), output_filename="c.json", previous=previous)
    return chosen(out).pop()


def test_top_images_highest_selection_frequency_first():
    assert top_one([(cid(0), A, 10, 9), (cid(1), A, 10, 10), (cid(2), A, 20, 19)]) == cid(1)


def test_top_images_ties_by_number_of_annotations():
    assert top_one([(cid(0), A, 10, 9), (cid(1), A, 20, 18), (cid(2), A, 10, 9)]) == cid(1)


def test_top_images_ties_then_by_membership_in_the_previous_revision():
    pool, sf = pool_with([(cid(0), A, 10, 9), (cid(1), A, 10, 9), (cid(2), A, 10, 9)])
    config = SamplingConfig(rule="top-images", seed=0, per_class=1, wnids=(A,))
    previous = sample_revision(pool, sf, config, output_filename="c-0.json", blacklist=[cid(2)]).revision
    assert previous.image_filenames == ((cid(1), A),)  # without cid(2), the larger id of the tie
    assert top_one([(cid(0), A, 10, 9), (cid(1), A, 10, 9), (cid(2), A, 10, 9)], previous=previous) == cid(1)


def test_top_images_ties_last_by_the_larger_id():
    # the original sorted (sf, annotations, in previous, id) and reversed the list
    assert top_one([(cid(5), A, 10, 9), (cid(7), A, 10, 9), (cid(6), A, 10, 9)]) == cid(7)


# --- exclusions -------------------------------------------------------------------------------


def test_exclusion_reasons_in_order():
    # each candidate has two problems; the earlier reason in the order must be recorded
    candidates = [
        (cid(0), A, 3, 3),  # blacklisted + too few annotations → blacklisted
        (cid(1), A, 3, 3),  # too few annotations + near-duplicate of an original → too_few_annotations
        (cid(2), A, 10, 5),  # below threshold + near-duplicate → below_threshold
        (cid(3), A, 10, 9),  # near-duplicate + unreviewed → near_duplicate
        (cid(4), A, 10, 9),  # unreviewed → review_unfinished
        (cid(5), A, 10, 9),  # fine
    ]
    pool, sf = pool_with(candidates)
    import pyarrow as pa

    pairs = pa.table({"image_id": [cid(1), cid(2), cid(3)], "duplicate_id": [val(7)] * 3})
    review = pa.table({"candidate_id": [cid(i) for i in (0, 1, 2, 5)], "l2": [2e8] * 4, "fc7": [2e4] * 4, "dssim": [0.3] * 4})
    out = sample_revision(
        pool, sf, SamplingConfig(rule="threshold-0.7", seed=0, per_class=1, wnids=(A,)), output_filename="t.json",
        blacklist=[cid(0)], near_duplicates=pairs, near_duplicate_review=review,
    )
    assert decisions(out) == {
        cid(0): "blacklisted", cid(1): "too_few_annotations", cid(2): "below_threshold",
        cid(3): "near_duplicate", cid(4): "review_unfinished", cid(5): "selected",
    }
    assert out.report["exclusions"] == dict.fromkeys(REASONS, 1)


def test_unknown_blacklist_ids_are_an_error():
    pool, sf = pool_with([(cid(0), A, 10, 9)])
    with pytest.raises(ValueError, match="the blacklist names 1 candidate"):
        sample_revision(pool, sf, SamplingConfig(rule="top-images", seed=0, per_class=1, wnids=(A,)), output_filename="c.json", blacklist=[cid(9)])


# --- determinism ------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["matched-frequency", "threshold-0.7", "top-images"])
def test_same_seed_same_revision_and_another_seed_another(rule):
    rng = np.random.default_rng(0)
    candidates = [(cid(i), [A, B, C][i % 3], 10, int(rng.integers(0, 11))) for i in range(300)]
    originals = [(val(i), [A, B, C][i % 3], 10, int(rng.integers(3, 11))) for i in range(60)]
    pool, sf = pool_with(candidates, originals)
    config = SamplingConfig(rule=rule, seed=42, per_class=5, wnids=(A, B, C), min_num_val_images_per_wnid=20)
    runs = [sample_revision(pool, sf, config, output_filename="x.json", time_string="t", username="u") for _ in range(2)]
    assert runs[0].revision.dumps() == runs[1].revision.dumps()
    assert runs[0].revision.is_valid
    other = sample_revision(pool, sf, SamplingConfig(rule=rule, seed=43, per_class=5, wnids=(A, B, C), min_num_val_images_per_wnid=20), output_filename="x.json")
    assert other.revision.image_filenames != runs[0].revision.image_filenames  # the order at least is shuffled by the seed


def test_rules_at_array_level_match_the_docstring_semantics():
    arrays = CandidateArrays(np.array([0, 0, 0, 1, 1]), np.array([0.9, 0.7, 0.69, 0.55, 0.4]), np.full(5, 10))
    r = sample_threshold(arrays, np.array([0.7, 0.5]), rng=np.random.default_rng(0), per_class=2)
    assert sorted(r.selected.tolist()) == [0, 1, 3] and r.shortfall.tolist() == [0, 1]
    r = sample_top_images(arrays, 2, rng=np.random.default_rng(0), per_class=1)
    assert sorted(r.selected.tolist()) == [0, 3]
