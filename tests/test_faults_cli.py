"""Issue 11, the pipeline CLI: quiet logs, -v after the command, logs never inside a progress bar, extras checked first."""

import os
import re
import subprocess
import sys
from pathlib import Path

import blocked_imports
import pytest

from pipeline.__main__ import build_parser

ROOT = Path(__file__).parents[1]

# `python -m pipeline ...` with some top-level modules made unimportable, as a core install lacks them
BLOCKING = blocked_imports.script()


def run_python(code, *args, cwd, timeout=120):
    env = os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# --- -v before or after the command ------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, verbosity",
    [(["demo"], 0), (["demo", "-v"], 1), (["-v", "demo"], 1), (["demo", "--verbose"], 1), (["demo", "-vv"], 2), (["simulate", "-v", "--seeds", "2"], 1)],
)
def test_verbose_is_accepted_after_the_command_as_well(argv, verbosity):
    assert build_parser().parse_args(argv).verbose == verbosity


def test_demo_v_is_not_refused(tmp_path):
    done = run_python("import runpy, sys; sys.argv = ['pipeline', 'demo', '-v', '--help']; runpy.run_module('pipeline', run_name='__main__')", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "-v, --verbose" in done.stdout and "unrecognized arguments" not in done.stderr


# --- quiet by default --------------------------------------------------------------------------

LOGS = """
import logging, sys
from pipeline.__main__ import configure_logging
configure_logging(int(sys.argv[1]))
logging.getLogger("imagenetv2.metadata").info("candidate metadata: 3000 of 3000 images have a search record")
logging.getLogger("pipeline.rebuild.ingest").debug("a debug line")
logging.getLogger("pipeline.rebuild.ingest").warning("results.csv: no assignments")
print("result line")
"""


def test_info_lines_are_hidden_without_v_and_warnings_and_results_shown(tmp_path):
    done = run_python(LOGS, "0", cwd=tmp_path)
    assert "candidate metadata" not in done.stderr and "a debug line" not in done.stderr
    assert "WARNING pipeline.rebuild.ingest: results.csv: no assignments" in done.stderr
    assert done.stdout == "result line\n"


def test_v_shows_info_and_vv_debug(tmp_path):
    one, two = run_python(LOGS, "1", cwd=tmp_path), run_python(LOGS, "2", cwd=tmp_path)
    assert "INFO imagenetv2.metadata: candidate metadata: 3000 of 3000" in one.stderr and "a debug line" not in one.stderr
    assert "DEBUG pipeline.rebuild.ingest: a debug line" in two.stderr


def test_ingest_prints_no_info_lines_by_default(tmp_path):
    import json

    from helpers_rebuild import A, cid, val
    from test_ingest import row, write_csv

    (tmp_path / "c.jsonl").write_text(json.dumps({"id_ours": cid(0), "wnid": A}) + "\n")
    (tmp_path / "o.csv").write_text(f"image_id,wnid\n{val(1)},{A}\n")
    write_csv(tmp_path / "b.csv", [row("H1", "A1", "W1", "Approved", A, [cid(0), val(1)], [cid(0)])])
    command = "import runpy, sys; sys.argv = ['pipeline', *sys.argv[1:]]; runpy.run_module('pipeline', run_name='__main__')"
    args = ["ingest", "--candidates", "c.jsonl", "--originals", "o.csv", "--results", "b.csv", "--output", "pool"]
    quiet = run_python(command, *args, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert " INFO " not in quiet.stderr and '"annotation_rows": 2' in quiet.stdout
    loud = run_python(command, *args, "-v", cwd=tmp_path)
    assert "INFO pipeline.rebuild.ingest: read 1 assignments from b.csv" in loud.stderr


# --- log lines and progress bars ----------------------------------------------------------------

BAR = """
import logging, sys, time
from tqdm import tqdm
from pipeline.__main__ import configure_logging
configure_logging(1)
log = logging.getLogger("pipeline.test")
for i in tqdm(range(6), desc="images", mininterval=0, miniters=1, file=sys.stderr, ascii=True):
    if i == 3:
        log.info("halfway there")
    time.sleep(0.01)
"""


def test_log_lines_never_share_a_line_with_a_progress_bar(tmp_path):
    done = run_python(BAR, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (start,) = [m.start() for m in re.finditer(r"\d\d:\d\d:\d\d INFO pipeline.test: halfway there", done.stderr)]
    before = done.stderr[:start]
    line_so_far = re.split(r"[\r\n]", before)[-1]
    assert line_so_far.strip() == "", repr(before[-80:])  # the bar was cleared first
    assert done.stderr[start:].split("\n", 1)[0].endswith("halfway there")  # and the line ends with the message
    assert "images: 100%" in done.stderr


# --- a missing extra is said at the start --------------------------------------------------------


def test_demo_without_matplotlib_says_which_extra_before_any_step(tmp_path):
    done = run_python(BLOCKING, "matplotlib", "demo", "--output", "out", "--no-progress", cwd=tmp_path)
    assert done.returncode == 1
    assert "`python -m pipeline demo` needs matplotlib, which is not installed" in done.stderr
    assert 'pip install -e ".[pipeline]"' in done.stderr
    assert "[1/8]" not in done.stdout and not (tmp_path / "out").exists()
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [
    ["ingest", "--candidates", "c.jsonl", "--originals", "o.csv", "--results", "b.csv", "--output", "pool"],
    ["selection-frequency", "pool"],
    ["sample", "pool", "--output", "r.json", "--rule", "top-images", "--seed", "0"],
    ["build-set", "r.json", "--pool", "pool", "--output", "sets"],
])
def test_rebuild_commands_without_pyarrow_say_which_extra(tmp_path, command):
    done = run_python(BLOCKING, "pyarrow", *command, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"`python -m pipeline {command[0]}` needs pyarrow" in done.stderr and 'pip install -e ".[pipeline]"' in done.stderr


@pytest.mark.parametrize("blocked, command", [
    ("boto3", ["mturk", "publish", "tasks"]),
    ("faiss", ["near-duplicates", "--candidates", "pool", "--output", "nd"]),
    ("uvicorn", ["annotate", "tasks"]),
])
def test_other_pipeline_commands_say_which_extra_before_any_work(tmp_path, blocked, command):
    done = run_python(BLOCKING, blocked, *command, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"`python -m pipeline {command[0]}` needs {blocked}, which is not installed" in done.stderr
    assert 'pip install -e ".[pipeline]"' in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
