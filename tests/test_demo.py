"""The demo end to end: `python -m pipeline demo` from a fresh process, offline."""

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import blocked_imports
import pytest

from pipeline.core.ownership import owner

ROOT = Path(__file__).parents[1]


# `python -m pipeline demo ...` with torch, torchvision, timm and transformers made unimportable:
# the demo is the core install's job and must not need the eval extra.
WITHOUT_TORCH = blocked_imports.script(report_loaded=True)
TORCH = "torch,torchvision,timm,transformers"


@pytest.mark.slow
@pytest.mark.integration
def test_demo_end_to_end_without_torch(tmp_path):
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    output = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, TORCH, "demo", "--output", str(output), "--no-progress"],
        cwd=tmp_path, env=env | {"PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded: []" in done.stdout
    for step in range(1, 9):
        assert f"[{step}/8]" in done.stdout
    results = json.loads((output / "results.json").read_text())
    by = {(r["classifier"], r["set"]): r for r in results["accuracies"]}
    assert len(by) == 5 * 4
    for rule in ("matched-frequency", "threshold-0.7", "top-images"):
        report = json.loads((output / "revisions" / f"demo-{rule}-1.report.json").read_text())
        assert report["is_valid"] and report["images"] == 3000 and report["replaced_from_previous"] > 0
        assert all(report["exclusions"][reason] > 0 for reason in ("blacklisted", "near_duplicate", "review_unfinished"))
        ds = datasets.load_dataset(str(output / "sets" / "hub"), rule, split="test")
        assert ds.num_rows == 3000
        fit = results["linear_fits"][rule]
        assert fit["n_models"] == 5 and fit["slope_ci_low"] <= fit["slope"] <= fit["slope_ci_high"]
    # stronger models are better everywhere; the rules rank as in the paper: top-images easiest
    strongest, weakest = "colour-a (strongest)", "colour-e (weakest)"
    for s in ("original", "matched-frequency", "threshold-0.7", "top-images"):
        assert by[(strongest, s)]["accuracy"] > by[(weakest, s)]["accuracy"]
    assert by[(weakest, "top-images")]["accuracy"] > by[(weakest, "threshold-0.7")]["accuracy"] > by[(weakest, "matched-frequency")]["accuracy"]
    png = (output / "accuracy.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert "linear fit of new against original accuracy" in done.stdout
    for found in ("found at rank 1 by l2: 4 of 4", "found at rank 1 by dssim: 4 of 4", "4 of 4 planted excluded as review_unfinished"):
        assert found in done.stdout  # the near-duplicate step: planted copies found and held back by sample
    # quiet by default (issue 11): the numbered steps and results, no INFO lines of the stages or the builder
    assert "candidate metadata" not in done.stdout + done.stderr and " INFO " not in done.stderr
    assert owner(output)["command"] == "demo"


def test_demo_refuses_to_replace_a_folder_that_is_not_a_demo_output(tmp_path):
    from pipeline.toys.demo import run_demo

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a demo output"):
        run_demo(tmp_path, echo=lambda line: None)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_demo_refuses_another_commands_output_before_any_step(tmp_path):
    from pipeline.core.ownership import MARKER
    from pipeline.toys.demo import run_demo

    (tmp_path / MARKER).write_text(json.dumps({"project": "imagenetv2-hf", "command": "ingest", "version": "0.1.0"}))
    (tmp_path / "candidates.parquet").write_bytes(b"PAR1")
    lines = []
    with pytest.raises(ValueError, match="it is an ingest output, not a demo output"):
        run_demo(tmp_path, echo=lines.append)
    assert lines == [] and (tmp_path / "candidates.parquet").read_bytes() == b"PAR1"
