"""Bad inputs to ``python -m pipeline evaluate`` (issue 11), each reproduced as the issue writes it.

Every case is refused before any model runs, with a message that names the problem and the fix,
or (``--limit``) gives the behaviour the issue asks for.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import blocked_imports  # noqa: E402
import pytest  # noqa: E402

from pipeline.__main__ import main  # noqa: E402
from pipeline.core.ownership import MARKER  # noqa: E402
from pipeline.evaluation import results as R  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args) -> int:
    return main(["evaluate", "--no-progress", "--n-bootstrap", "0", *map(str, args)])


def sets(hub):
    return ("--original", f"{hub}:matched-frequency", "--new", f"{hub}:threshold-0.7")


def scored(output, model, dataset):
    return R.read_predictions(output / R.PREDICTIONS_DIR / f"{R.job_key(model, dataset)}.npz")


# --- evaluation subsets ------------------------------------------------------------------------


@pytest.mark.torch
def test_limit_is_a_seeded_sample_spread_over_the_classes(tmp_path, imagenetv2_hub_folder, capsys):
    """`--limit 32` on ImageNetV2 (sorted by class, 10 images each) scored four classes; now 32."""
    models = tmp_path / "models.json"
    models.write_text(json.dumps([{"source": "timm:test_resnet"}, {"name": "other", "source": "timm:test_efficientnet"}]))
    args = ("--no-pretrained", *sets(imagenetv2_hub_folder), "--limit", 32, "--workers", 0, "--batch-size", 16)
    assert run_cli("--models", models, *args, "--output", tmp_path / "a") == 0
    assert run_cli("--model", "timm:test_resnet", *args, "--output", tmp_path / "b") == 0  # a re-run from scratch
    dataset = "imagenetv2:matched-frequency@test"
    a = scored(tmp_path / "a", "test_resnet", dataset)
    assert len(np.unique(a["label"])) == 32  # one image from each of 32 classes (the first 32 rows: 4 classes)
    assert np.all(np.diff(a["index"]) > 0) and a["index"].max() > 1000
    assert np.array_equal(a["index"], scored(tmp_path / "a", "other", dataset)["index"])  # every model
    assert np.array_equal(a["index"], scored(tmp_path / "b", "test_resnet", dataset)["index"])  # every re-run
    rows = json.loads((tmp_path / "a" / R.RESULTS_JSON).read_text())
    assert {r["limit"] for r in rows["rows"]} == {32} and {r["total"] for r in rows["rows"]} == {32}
    assert "spread over the classes" in rows["settings"]["limit_sample"]


@pytest.mark.torch
def test_limit_on_cifar10_1_is_not_all_airplanes(tmp_path, cifar10_1_hub_folder):
    """`--limit 64` on CIFAR-10.1 v6 was all airplanes; now every class, 6 or 7 images each."""
    overlay = {"input_size": [3, 32, 32], "crop_pct": 1.0}
    models = tmp_path / "models.json"
    models.write_text(json.dumps([{"source": "timm:test_resnet", "kwargs": {"num_classes": 10, "pretrained_cfg_overlay": overlay}}]))
    code = run_cli("--models", models, "--no-pretrained", "--original", f"{cifar10_1_hub_folder}:v4",
                   "--new", f"{cifar10_1_hub_folder}:v6", "--limit", 64, "--workers", 0, "--output", tmp_path / "eval")
    assert code == 0
    labels = scored(tmp_path / "eval", "test_resnet", "hub:v6@test")["label"]
    assert sorted(np.bincount(labels, minlength=10).tolist()) == [6] * 6 + [7] * 4


def test_limit_help_says_what_it_takes(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--limit N score a sample of N images of each dataset: rows spread over the classes" in text
    assert "the same for every model and every re-run" in text


# --- local paths -------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--model", "--original"])
@pytest.mark.parametrize("path", ["./no-such-folder", "~/no-such-folder-for-evaluate", "/no/such/folder"])
def test_a_missing_local_path_is_no_such_folder(tmp_path, capsys, monkeypatch, flag, path):
    monkeypatch.chdir(tmp_path)
    spec = f"hf:{path}" if flag == "--model" else path
    args = {"--model": spec, "--original": path}
    code = run_cli("--model", args["--model"] if flag == "--model" else "timm:test_resnet",
                   "--original", args["--original"] if flag == "--original" else ROOT,
                   "--new", ROOT / "no-such-new", "--output", tmp_path / "eval")
    err = capsys.readouterr().err
    assert code == 2
    assert "no such folder" in err and path.rsplit("/", 1)[-1] in err
    assert "Repo id" not in err and "Hub" not in err.replace("not the Hub", "")
    assert not (tmp_path / "eval").exists()


def test_a_path_inside_an_existing_folder_is_local(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sets").mkdir()
    assert run_cli("--model", "timm:test_resnet", "--original", "sets/imagenet-val", "--new", "sets/v2",
                   "--output", tmp_path / "eval") == 2
    assert "no such folder 'sets/imagenet-val'" in capsys.readouterr().err
    assert run_cli("--model", "hf:sets/my-vit", "--original", "sets/a", "--new", "sets/b", "--output", tmp_path / "eval") == 2
    assert "model source 'hf:sets/my-vit': no such folder 'sets/my-vit'" in capsys.readouterr().err


# --- the output folder -------------------------------------------------------------------------


def test_output_naming_an_existing_file_is_a_clear_error(tmp_path, imagenetv2_hub_folder, capsys):
    existing = tmp_path / "notes.txt"
    existing.write_text("mine")
    code = run_cli("--model", "timm:test_resnet", "--no-pretrained", *sets(imagenetv2_hub_folder), "--output", existing)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"refusing to write the folder {existing}: a file of that name exists; pass another --output" in err
    assert existing.read_text() == "mine"


def test_output_folder_of_a_user_is_refused_before_any_model_runs(tmp_path, imagenetv2_hub_folder, capsys):
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine")
    assert run_cli("--model", "timm:test_resnet", "--no-pretrained", *sets(imagenetv2_hub_folder), "--output", folder) == 2
    assert "was not written by this project" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]
    # inside a dataset folder: refused too
    assert run_cli("--model", "timm:test_resnet", *sets(imagenetv2_hub_folder), "--output", imagenetv2_hub_folder / "eval") == 2
    assert "lies inside the input" in capsys.readouterr().err
    assert not (imagenetv2_hub_folder / "eval").exists()


@pytest.mark.torch
def test_a_results_folder_written_by_evaluate_is_resumable(tmp_path, imagenetv2_hub_folder, capsys):
    output = tmp_path / "eval"
    args = ("--model", "timm:test_resnet", "--no-pretrained", *sets(imagenetv2_hub_folder), "--limit", 4, "--workers", 0, "--output", output)
    assert run_cli(*args) == 0
    assert json.loads((output / MARKER).read_text())["command"] == "evaluate"
    (output / MARKER).unlink()  # a folder written before the marker existed
    capsys.readouterr()
    assert run_cli(*args) == 0
    assert "(0 run now, 2 reused)" in capsys.readouterr().out
    assert (output / MARKER).is_file()


# --- options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, message",
    [
        (("--n-bootstrap", "-1"), "--n-bootstrap must be 0 (no fit intervals) or a positive number of resamples, got -1"),
        (("--batch-size", "0"), "--batch-size must be at least 1, got 0"),
        (("--workers", "-2"), "--workers must be 0 (load in the main process) or more, got -2"),
        (("--limit", "0"), "--limit must be a positive number of images, got 0"),
        (("--cache-memory", "-1"), "--cache-memory must be a number of GiB, 0 or more, got -1.0"),
        (("--device", "gpu"), "--device must be auto, cpu, mps, cuda or cuda:N, got 'gpu'"),
    ],
)
def test_bad_options_are_refused_before_any_model_runs(tmp_path, imagenetv2_hub_folder, capsys, monkeypatch, option, message):
    from pipeline.evaluation import jobs

    monkeypatch.setattr(jobs, "load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    output = tmp_path / "eval"
    assert run_cli("--model", "timm:test_resnet", *sets(imagenetv2_hub_folder), "--output", output, *option) == 2
    assert message in capsys.readouterr().err
    assert not output.exists()


@pytest.mark.torch
def test_cuda_without_a_gpu_is_refused_before_any_model_runs(tmp_path, imagenetv2_hub_folder, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --device cuda is valid here")
    assert run_cli("--model", "timm:test_resnet", *sets(imagenetv2_hub_folder), "--output", tmp_path / "eval", "--device", "cuda") == 2
    assert "torch sees no CUDA device; use --device cpu" in capsys.readouterr().err
    assert not (tmp_path / "eval").exists()


# --- the eval extra -----------------------------------------------------------------------------

# `python -m pipeline evaluate ...` with the eval extra's modules made unimportable
WITHOUT_EVAL = blocked_imports.script()
EVAL_EXTRA = "torch,torchvision,timm,transformers,matplotlib"


def test_without_the_eval_extra_evaluate_says_what_to_install_at_the_start(tmp_path):
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EVAL, EVAL_EXTRA, "evaluate", "--model", "timm:resnet50", "--original", "ILSVRC/imagenet-1k@validation",
         "--new", "./no-such-set", "--output", str(tmp_path / "eval")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "needs the eval extra" in done.stderr and 'pip install -e ".[eval]"' in done.stderr
    assert "torch, torchvision, timm, transformers, matplotlib cannot be imported" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "eval").exists()
