"""Verification that did not happen is never claimed, JPEG markers in every mode, and unreachable
downloads (issue 11), for ImageNetV2 and CIFAR-10.1; small sets as in test_dataset_faults.py."""

from __future__ import annotations

import dataclasses
import socket

import datasets
import pytest

import cifar10_1
from fixtures_cifar10_1 import cifar10_1_checksums, cifar10_1_data_dir  # noqa: F401 (fixtures)
from fixtures_imagenetv2 import synthetic_jpeg
from imagenetv2 import PACKAGE, ImageNetV2, get_variant
from imagenetv2.archive import ArchiveError
from pipeline.core.build_command import main
from pipeline.core.builders import DownloadError
from pipeline.core.integrity import ChecksumError
from test_dataset_faults import CONFIG, PNG, build, export, small_set


# --- verification that did not happen is never claimed -------------------------------------------


def test_imagenetv2_verified_build_after_an_unverified_one_verifies(tmp_path):
    """Issue 11: after a --no-verify build, the same build without it exited 0 from the unverified cache."""
    kwargs, checksum = small_set(tmp_path / "data")
    wrong = {**kwargs, "archive_checksum": dataclasses.replace(checksum, sha256="0" * 64)}
    unverified = build(tmp_path / "data", tmp_path / "cache", "no_checks", **wrong)
    assert "Verified: checksum not verified: built with verification_mode='no_checks'" in unverified.info.description
    with pytest.raises(ChecksumError, match="expected sha256 0{64}"):
        build(tmp_path / "data", tmp_path / "cache", **wrong)
    verified = build(tmp_path / "data", tmp_path / "cache", **kwargs)  # the right checksum: regenerated, verified
    assert "matched the rebuilt set's own size and sha256" in verified.info.description
    assert verified.verification.verified
    # a verified cache is reused as long as the archive is unchanged ...
    arrow = sorted((tmp_path / "cache").rglob("*.arrow"))
    mtimes = [p.stat().st_mtime_ns for p in arrow]
    build(tmp_path / "data", tmp_path / "cache", **kwargs)
    assert [p.stat().st_mtime_ns for p in arrow] == mtimes
    # ... and a replaced archive is checked again: a verified build of a wrong archive always fails
    small_set(tmp_path / "data", replace={3: synthetic_jpeg(3, 1)})
    with pytest.raises(ChecksumError, match=f"expected sha256 {checksum.sha256}"):
        build(tmp_path / "data", tmp_path / "cache", **kwargs)


def test_cifar10_1_verified_build_after_an_unverified_one_verifies(tmp_path, cifar10_1_data_dir):
    builder = cifar10_1.Cifar10_1(config_name="v4", data_dir=str(cifar10_1_data_dir), cache_dir=str(tmp_path / "cache"))
    builder.download_and_prepare(verification_mode="no_checks")
    assert "checksums not verified" in builder.info.description
    again = cifar10_1.Cifar10_1(config_name="v4", data_dir=str(cifar10_1_data_dir), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ChecksumError, match="checksum mismatch.*cifar10.1_v4_data.npy"):
        again.download_and_prepare()  # the synthetic images are not the pinned release


@pytest.mark.parametrize("package", ["imagenetv2", "cifar10_1"])
def test_cli_verified_build_after_no_verify_checks_the_checksum(package, tmp_path, capsys, cifar10_1_data_dir, imagenetv2_archive_dir):
    data = cifar10_1_data_dir if package == "cifar10_1" else imagenetv2_archive_dir[0]
    pkg = cifar10_1.PACKAGE if package == "cifar10_1" else PACKAGE
    args = ["build", "--config", pkg.config_names[-1], "--data-dir", str(data), "--output", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache"), "--num-proc", "1"]
    assert main(pkg, [*args, "--no-verify"]) == 0
    card = (tmp_path / "out" / "README.md").read_text()
    assert "| `%s` | checksum" % pkg.config_names[-1] in card and "not verified: built with verification_mode='no_checks'" in card
    assert main(pkg, args) == 1
    assert "checksum mismatch" in capsys.readouterr().err


def test_card_states_what_was_verified_per_config(tmp_path, imagenetv2_hub_folder):
    text = (imagenetv2_hub_folder / "README.md").read_text()
    assert "after checking each archive's size and sha256" not in text
    assert text.count("matched the rebuilt set's own size and sha256") == 3  # the fixtures' own checksums
    kwargs, checksum = small_set(tmp_path / "data")
    pinned = {"revision_file": kwargs["revision_file"], "variant": dataclasses.replace(get_variant(CONFIG), archive=checksum)}
    out = export(tmp_path / "pinned", tmp_path / "data", tmp_path / "cache", kwargs=pinned)
    assert f"matched the pinned release's size and sha256 ({checksum.sha256})" in (out / "README.md").read_text()
    small_set(tmp_path / "folder", as_folder=True)
    out = export(tmp_path / "from-folder", tmp_path / "folder", tmp_path / "cache", kwargs={"revision_file": kwargs["revision_file"]})
    assert "checksum not verified: built from the extracted folder" in (out / "README.md").read_text()


# --- input checks where the data comes in: JPEG markers in every mode ----------------------------


@pytest.mark.parametrize("mode", ["no_checks", "folder", "pinned", "own checksum, 2 processes"])
def test_png_bytes_named_jpeg_are_refused_in_every_mode(tmp_path, mode):
    """Issue 11: a <id>.jpeg holding PNG bytes was accepted under --no-verify and in folder mode."""
    kwargs, checksum = small_set(tmp_path / "data", replace={5: PNG}, as_folder=mode == "folder")
    if mode == "pinned":
        kwargs = {"revision_file": kwargs["revision_file"], "variant": dataclasses.replace(get_variant(CONFIG), archive=checksum)}
    builder = ImageNetV2(config_name=CONFIG, data_dir=str(tmp_path / "data"), cache_dir=str(tmp_path / "cache"), **kwargs)
    with pytest.raises(ArchiveError, match=r"5/0{39}5\.jpeg holds PNG bytes, not a JPEG"):
        builder.download_and_prepare(verification_mode="no_checks" if mode == "no_checks" else "basic_checks",
                                     num_proc=2 if "2 processes" in mode else 1)


@pytest.mark.parametrize("num_proc", [1, 2])
def test_a_jpeg_with_markers_but_broken_scans_is_caught_by_the_decoders(tmp_path, num_proc):
    markers_only = b"\xff\xd8\xff" + b"\x00" * 300 + b"\xff\xd9"  # start and end markers, nothing decodable
    kwargs, _ = small_set(tmp_path / "data", replace={7: markers_only})
    builder = ImageNetV2(config_name=CONFIG, data_dir=str(tmp_path / "data"), cache_dir=str(tmp_path / "cache"), **kwargs)
    with pytest.raises(ArchiveError, match=r"7/0{39}7\.jpeg does not decode as an image"):
        builder.download_and_prepare(num_proc=num_proc)


# --- offline or unreachable downloads ------------------------------------------------------------


@pytest.fixture
def unreachable():
    """A loopback URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_imagenetv2_unreachable_download_is_one_sentence(tmp_path, monkeypatch, capsys, unreachable):
    """Issue 11: `python -m imagenetv2 build` without --data-dir printed a 120-line httpx traceback."""
    import imagenetv2.metadata as metadata
    import imagenetv2.variants as variants

    monkeypatch.setattr(variants, "HUB_URL", unreachable + "/{archive}")
    monkeypatch.setattr(metadata, "TREE_URL", unreachable + "/tree")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    code = main(PACKAGE, ["build", "--config", CONFIG, "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len([line for line in err if line.startswith("error:")]) == 1 and "Traceback" not in "\n".join(err)
    line = err[-1]
    assert "could not download the ImageNetV2 top-images archive imagenetv2-top-images.tar.gz from " + unreachable in line
    assert "--data-dir" in line and not (tmp_path / "out").exists()
    with pytest.raises(DownloadError, match="could not download"):
        ImageNetV2(config_name=CONFIG, cache_dir=str(tmp_path / "cache")).download_and_prepare()


def test_cifar10_1_unreachable_download_is_one_sentence(tmp_path, monkeypatch, capsys, unreachable):
    """Issue 11: `python -m cifar10_1 build` printed only the URL."""
    monkeypatch.setattr(cifar10_1.variants, "RAW_BASE_URL", unreachable + "/datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    code = main(cifar10_1.PACKAGE, ["build", "--config", "v6", "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("error: could not download the CIFAR-10.1 v6 files cifar10.1_v6_data.npy and cifar10.1_v6_labels.npy from " + unreachable)
    assert "--data-dir" in err[-1]


def test_num_proc_must_be_a_positive_count(capsys):
    with pytest.raises(SystemExit) as info:
        main(PACKAGE, ["build", "--num-proc", "0"])
    assert info.value.code == 2 and "--num-proc must be a whole number of processes >= 1, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("package", ["imagenetv2", "cifar10_1"])
def test_a_full_cache_while_downloading_says_so(package, tmp_path, monkeypatch, capsys):
    import errno

    from datasets import DownloadManager

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(DownloadManager, "download", full)
    pkg = cifar10_1.PACKAGE if package == "cifar10_1" else PACKAGE
    code = main(pkg, ["build", "--config", pkg.config_names[-1], "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and err.startswith(f"error: the datasets cache folder {tmp_path / 'cache'}") and "is full" in err
    assert "while downloading" in err and "--cache-dir" in err
