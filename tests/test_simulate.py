"""The worked example: MatchedFrequency on noisy selection frequencies makes a harder set."""

import json

import numpy as np
import pytest

from pipeline.__main__ import main
from pipeline.toys.simulate import JSON_KEYS, ROWS, bar_masks, draw_images, make_world, simulate, true_selection_frequency


def test_world_follows_the_spec():
    masks = bar_masks()
    assert masks[0, 6:10, 2:14].all() and masks[0].sum() == 48  # horizontal bar: rows 6-9, columns 2-13
    assert masks[1, 2:14, 6:10].all() and masks[1].sum() == 48  # vertical bar: rows 2-13, columns 6-9
    # Φ((c - 0.3) / 0.2): 0.5 at c = 0.3; Φ(1) = 0.8413 at c = 0.5 (standard normal table)
    np.testing.assert_allclose(true_selection_frequency(np.array([0.3, 0.5, 0.1])), [0.5, 0.841345, 0.158655], atol=1e-6)
    images = draw_images(40_000, np.random.default_rng(0))
    # the classifier's score for contrast c is N(±32c, 12²) (64 pixels of ±1 weight, noise 1.5),
    # so its accuracy is the mean of Φ(32c/12) over c ~ U(0, 0.6): 0.7495 by numerical integration
    c = np.linspace(0, 0.6, 100_001)
    expected = np.mean(true_selection_frequency(32 * c / 12 * 0.2 + 0.3))
    assert abs(images.correct.mean() - expected) < 0.01
    world = make_world(0)
    assert len(world.originals.label) == 10_000 and len(world.pool.label) == 80_000


@pytest.mark.slow
def test_matched_frequency_drop_shrinks_with_more_annotators(tmp_path, capsys):
    path = tmp_path / "simulate.json"
    assert main(["simulate", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [list(r) for r in rows] == [list(JSON_KEYS)] * len(ROWS)
    by = {(r["strategy"], r["annotators"]): r for r in rows}
    mf10, mf200 = by[("MatchedFrequency", 10)], by[("MatchedFrequency", 200)]
    assert mf10["change_mean"] < 0 and abs(mf10["change_mean"]) > abs(mf200["change_mean"])
    assert by[("MatchedFrequency", 40)]["change_mean"] > mf10["change_mean"]
    # the published row (k = 10): observed 0.75 / 0.75, true 0.75 / 0.71, change -2.0 [-3.0, -0.8]
    assert round(mf10["observed_sf_original"], 2) == 0.75 and round(mf10["observed_sf_new"], 2) == 0.75
    assert round(mf10["true_sf_original"], 2) == 0.75 and round(mf10["true_sf_new"], 2) == 0.71
    assert mf10["change_min"] <= -2.0 <= mf10["change_max"]
    assert by[("Threshold0.7", 10)]["change_mean"] > 0 and by[("TopImages", 10)]["change_mean"] > 0
    assert "MatchedFrequency   10   0.75 / 0.75   0.75 / 0.71" in capsys.readouterr().out


def test_simulate_is_deterministic():
    rows = [("MatchedFrequency", 10), ("TopImages", 10)]
    assert simulate([3], rows) == simulate([3], rows)
