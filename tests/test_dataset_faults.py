"""Faults and bad inputs of the dataset builders and `python -m imagenetv2|cifar10_1 build` (issue 11).

Each test reproduces one reported case as written and asserts the outcome. ImageNetV2 cases run on a
small set (a revision of a few images and its archive in the release layout) so that they take
seconds; CIFAR-10.1 cases on the synthetic files beside the real labels (tests/fixtures_cifar10_1.py).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest

import cifar10_1
from fixtures_cifar10_1 import cifar10_1_checksums, cifar10_1_data_dir  # noqa: F401 (fixtures)
from fixtures_imagenetv2 import Entry, synthetic_jpeg, write_tar
from imagenetv2 import PACKAGE, ImageNetV2, get_variant
from imagenetv2.classes import wnids
from pipeline.core.builders import CacheFullError
from pipeline.core.build_command import main
from pipeline.core.ownership import MARKER

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "top-images"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def small_set(folder: Path, n: int = 12, *, replace: dict | None = None, as_folder: bool = False):
    """A revision of ``n`` images and its archive (or extracted folder) in ``folder``; returns the
    builder kwargs for a rebuilt set (its own checksum) and the archive's checksum."""
    variant = get_variant(CONFIG)
    top = variant.top_folder
    all_wnids = wnids()
    pairs, entries = [], [Entry(top, folder=True)]
    for i in range(n):
        cid = f"{i:040x}"
        pairs.append([cid, all_wnids[i]])
        data = (replace or {}).get(i, synthetic_jpeg(i, 0))
        entries.append(Entry(f"{top}/{i}/{cid}.jpeg", data))
    folder.mkdir(parents=True, exist_ok=True)
    revision = folder.parent / f"{folder.name}-revision.json"
    revision.write_text(json.dumps({"output_filename": "small-1.json", "image_filenames": pairs}))
    if as_folder:
        for class_index in range(1000):  # an extracted folder has every class folder
            (folder / top / str(class_index)).mkdir(parents=True, exist_ok=True)
        for e in entries[1:]:
            (folder / e.name).parent.mkdir(parents=True, exist_ok=True)
            (folder / e.name).write_bytes(e.data)
        return {"revision_file": str(revision)}, None
    checksum = write_tar(folder / variant.archive.name, entries)
    return {"revision_file": str(revision), "archive_checksum": checksum}, checksum


def build(data_dir, cache_dir, verification_mode="basic_checks", **kwargs) -> datasets.Dataset:
    builder = ImageNetV2(config_name=CONFIG, data_dir=str(data_dir), cache_dir=str(cache_dir), **kwargs)
    builder.download_and_prepare(verification_mode=verification_mode, num_proc=1)
    return builder


def run_cli(package_module: str, *args, env_code: str = "", timeout: int = 120, **popen) -> subprocess.Popen:
    """``python -m <package> build ...`` in a subprocess, after ``env_code`` (patches that inject a fault)."""
    code = f"import sys\n{env_code}\nfrom {package_module} import PACKAGE\nfrom pipeline.core.build_command import main\nsys.exit(main(PACKAGE, sys.argv[1:]))\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", code, "build", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def photo_set(folder: Path, n: int = 24):
    """A small set of photo-like JPEGs (about 110 KB each: a table of them spans many Parquet pages)."""
    import numpy as np

    from pipeline.toys.synthetic import photo_like_jpeg

    rng = np.random.default_rng(0)
    return small_set(folder, n, replace={i: photo_like_jpeg(rng) for i in range(n)})


def small_set_cli(kwargs: dict) -> str:
    """Code for :func:`run_cli` that makes the command build the small set (its revision file)."""
    return (
        "import functools, pipeline.core.build_command as command\n"
        f"command.export_package = functools.partial(command.export_package, builder_kwargs={{{CONFIG!r}: {kwargs!r}}})\n"
    )


def temporaries(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def export(out, data_dir, cache_dir, verify=True, kwargs=None):
    from pipeline.core.export import export_package

    return export_package(PACKAGE, out, [CONFIG], data_dir=str(data_dir), cache_dir=str(cache_dir), verify=verify,
                          builder_kwargs={CONFIG: kwargs or {}}, num_proc=1)


# --- data loss: never replace what the command did not write -------------------------------------


def users_folder(path: Path) -> dict:
    (path / "data").mkdir(parents=True)
    (path / "README.md").write_text("# my project")
    (path / "notes.txt").write_text("notes")
    (path / "data" / "m.csv").write_text("a,b\n1,2\n")
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize("package", ["imagenetv2", "cifar10_1"])
def test_build_refuses_a_users_folder_with_readme_and_data(package, tmp_path, capsys, cifar10_1_data_dir, imagenetv2_archive_dir):
    """Issue 11: a folder with README.md, notes.txt and data/m.csv lost both files, exit 0."""
    out = tmp_path / "project"
    before = users_folder(out)
    data = cifar10_1_data_dir if package == "cifar10_1" else imagenetv2_archive_dir[0]
    pkg = cifar10_1.PACKAGE if package == "cifar10_1" else PACKAGE
    code = main(pkg, ["build", "--config", pkg.config_names[-1], "--data-dir", str(data), "--output", str(out),
                      "--cache-dir", str(tmp_path / "cache"), "--no-verify"])
    err = capsys.readouterr().err
    assert code == 1 and "refusing to replace" in err and str(out) in err and "another --output" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_build_replaces_its_own_folder_and_refuses_an_output_inside_the_data(tmp_path, capsys):
    kwargs, _ = small_set(tmp_path / "data")
    out = tmp_path / "out"
    export(out, tmp_path / "data", tmp_path / "cache", kwargs=kwargs)
    assert json.loads((out / MARKER).read_text())["command"] == "imagenetv2 build"
    export(out, tmp_path / "data", tmp_path / "cache", kwargs=kwargs)  # marked ours: replaced
    assert datasets.load_dataset(str(out), CONFIG, split="test").num_rows == 12
    with pytest.raises(ValueError, match="lies inside the input"):
        export(tmp_path / "data" / "hub", tmp_path / "data", tmp_path / "cache", kwargs=kwargs)


# --- outputs are one unit: full disk, Ctrl-C, stale temporaries, the umask ------------------------

FULL_DISK = """
import errno
import pipeline.core.parquet_shards as shards

class FullDisk:  # what a full file system does: every write past the first 2,000 bytes fails with ENOSPC
    def __init__(self, path):
        self.f, self.n = open(path, 'wb'), 0
    def write(self, data):
        self.n += len(data)
        if self.n > 2000:
            raise OSError(errno.ENOSPC, 'No space left on device')
        return self.f.write(data)
    def flush(self):
        self.f.flush()
    def close(self):
        self.f.close()

shards.open_shard = FullDisk
"""


def test_full_disk_during_the_parquet_export_is_a_clear_error_not_an_abort(tmp_path):
    """Issue 11: a full disk aborted the process (pyarrow Check failed, SIGABRT, exit 134) and left
    .NAME.tmp-*. Here every shard write past 2,000 bytes fails with ENOSPC, in a real process."""
    kwargs, _ = photo_set(tmp_path / "data")
    kwargs.pop("archive_checksum")
    out = tmp_path / "out"
    proc = run_cli("imagenetv2", "--config", CONFIG, "--data-dir", str(tmp_path / "data"), "--output", str(out),
                   "--cache-dir", str(tmp_path / "cache"), "--no-verify", env_code=FULL_DISK + small_set_cli(kwargs))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert err.strip().splitlines()[-1].startswith("error: no space left on the device while writing ")
    assert "free some space or pass another --output" in err and "Check failed" not in err
    assert not out.exists() and temporaries(tmp_path) == []


SHARD_WRITER_ON_A_FULL_DISK = FULL_DISK + """
import datasets, pyarrow as pa
from pipeline.core.parquet_shards import ShardWriter
# a binary column of 1,000 x 10 KB: the Parquet library aborts (SIGABRT) when its sink fails inside it
table = pa.table({"x": pa.array([bytes([i % 256]) * 10_000 for i in range(1000)])})
try:
    with ShardWriter(pathlib.Path(sys.argv[-1]), "test", datasets.Features({"x": datasets.Value("binary")})) as w:
        w.write(table)
except OSError as e:
    print("clean error:", e)
"""


def test_shard_writer_on_a_full_disk_raises_instead_of_aborting(tmp_path):
    code = "import pathlib, sys\n" + SHARD_WRITER_ON_A_FULL_DISK
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "shards")], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]  # -6 (SIGABRT) without the guarded file
    assert result.stdout.startswith("clean error: [Errno 28] No space left on device: ")
    assert ".test-00000.parquet.part" in result.stdout


def test_injected_enospc_in_the_writer(tmp_path, monkeypatch, capsys, imagenetv2_archive_dir):
    """The same with an OSError(ENOSPC) injected into the shard file after some bytes."""
    import pipeline.core.parquet_shards as shards

    class FillsUp:
        def __init__(self, path):
            self.f, self.n = open(path, "wb"), 0

        def write(self, data):
            self.n += len(data)
            if self.n > 2000:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(data)

        def flush(self):
            self.f.flush()

        def close(self):
            self.f.close()

    monkeypatch.setattr(shards, "open_shard", FillsUp)
    code = main(PACKAGE, ["build", "--config", CONFIG, "--data-dir", str(imagenetv2_archive_dir[0]), "--output",
                          str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--no-verify"])
    assert code == 1 and "error: no space left on the device" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and temporaries(tmp_path) == []


SLOW_PARQUET = """
import pathlib, time, pyarrow.parquet as pq
_write = pq.ParquetWriter.write_table
def write_table(self, table, *a, **k):
    pathlib.Path(sys.argv[-1] + '.ready').touch()   # the test sends SIGINT now, in the middle of the write
    time.sleep(1.5)
    return _write(self, table, *a, **k)
pq.ParquetWriter.write_table = write_table
"""


def test_ctrl_c_during_the_parquet_write_exits_cleanly(tmp_path, imagenetv2_archive_dir):
    """Issue 11: Ctrl-C during the export aborted 2 of 4 runs (SIGABRT). SIGINT arrives while pyarrow
    writes a shard; the run ends with a message, exit 130, and no temporary folder."""
    out = tmp_path / "out"
    ready = Path(str(out) + ".ready")
    proc = run_cli("imagenetv2", "--config", CONFIG, "--data-dir", str(imagenetv2_archive_dir[0]), "--cache-dir",
                   str(tmp_path / "cache"), "--no-verify", "--output", str(out), env_code=SLOW_PARQUET)
    deadline = time.monotonic() + 90
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err and "Check failed" not in err
    assert not out.exists() and temporaries(tmp_path) == []


def test_stale_temporaries_of_an_interrupted_run_are_removed(tmp_path):
    kwargs, _ = small_set(tmp_path / "data")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.tmp-{int(dead.stdout)}-abcd"
    (stale / "data").mkdir(parents=True)
    (stale / "data" / "half.parquet").write_bytes(b"PAR1")
    export(tmp_path / "out", tmp_path / "data", tmp_path / "cache", kwargs=kwargs)
    assert not stale.exists() and temporaries(tmp_path) == []


@pytest.mark.parametrize("umask, folder_mode, file_mode", [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640)])
def test_export_respects_the_umask(tmp_path, umask, folder_mode, file_mode):
    """Issue 11: folders were 0700 and files 0600 whatever the umask."""
    kwargs, _ = small_set(tmp_path / "data")
    previous = os.umask(umask)
    try:
        out = export(tmp_path / "out", tmp_path / "data", tmp_path / "cache", kwargs=kwargs)
    finally:
        os.umask(previous)
    paths = [out, *out.rglob("*")]
    assert {oct(p.stat().st_mode & 0o777) for p in paths if p.is_dir()} == {oct(folder_mode)}
    assert {oct(p.stat().st_mode & 0o777) for p in paths if p.is_file()} == {oct(file_mode)}
    assert {p.name for p in out.iterdir()} >= {"README.md", MARKER, "data", "revisions"}


@pytest.mark.parametrize("package", ["imagenetv2", "cifar10_1"])
def test_full_cache_dir_says_so(package, tmp_path, monkeypatch, cifar10_1_data_dir, cifar10_1_checksums):
    """Issue 11: a full --cache-dir gave DatasetGenerationError: An error occurred while generating the dataset."""
    from datasets.arrow_writer import ArrowWriter

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ArrowWriter, "write_table", full)
    monkeypatch.setattr(ArrowWriter, "write_row", full)
    cache = tmp_path / "cache"
    if package == "imagenetv2":
        kwargs, _ = small_set(tmp_path / "data")
        builder = ImageNetV2(config_name=CONFIG, data_dir=str(tmp_path / "data"), cache_dir=str(cache), **kwargs)
    else:
        builder = cifar10_1.Cifar10_1(config_name="v4", data_dir=str(cifar10_1_data_dir), cache_dir=str(cache),
                                      checksums=cifar10_1_checksums)
    with pytest.raises(CacheFullError, match=r"the datasets cache folder .* is full \(No space left on device\).*--cache-dir"):
        builder.download_and_prepare()
    assert not [p for p in cache.rglob("*") if p.name.endswith(".incomplete") or p.name == "dataset_info.json"]
