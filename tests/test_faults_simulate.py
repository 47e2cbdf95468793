"""Issue 11, simulate: the --json path is checked before the simulation runs."""

import json

import pytest

import pipeline.toys.simulate as simulate_module
from pipeline.__main__ import main


@pytest.fixture
def never_simulate(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the simulation ran although its output cannot be written")

    monkeypatch.setattr(simulate_module, "simulate", fail)


def test_json_naming_a_folder_is_refused_before_the_simulation(tmp_path, capsys, never_simulate):
    assert main(["simulate", "--json", str(tmp_path), "--seeds", "1"]) == 1
    err = capsys.readouterr().err
    assert f"refusing to write the file {tmp_path}: it is a folder; pass a file name" in err


def test_json_naming_a_users_file_is_refused_and_kept(tmp_path, capsys, never_simulate):
    mine = tmp_path / "rows.json"
    mine.write_text("[1, 2, 3]")
    assert main(["simulate", "--json", str(mine), "--seeds", "1"]) == 1
    assert "it exists and was not written by this project" in capsys.readouterr().err
    assert mine.read_text() == "[1, 2, 3]"


def test_json_under_a_file_is_refused(tmp_path, capsys, never_simulate):
    (tmp_path / "notes").write_text("x")
    assert main(["simulate", "--json", str(tmp_path / "notes" / "rows.json"), "--seeds", "1"]) == 1
    assert "is a file, not a folder" in capsys.readouterr().err


def test_own_json_is_replaced(tmp_path, monkeypatch):
    rows = [{"strategy": "TopImages", "annotators": 10} | {k: 0.5 for k in simulate_module.JSON_KEYS[2:]}]
    monkeypatch.setattr(simulate_module, "simulate", lambda seeds, progress=None: rows)
    monkeypatch.setattr(simulate_module, "format_table", lambda table: "table")
    path = tmp_path / "rows.json"
    assert main(["simulate", "--json", str(path), "--seeds", "1"]) == 0
    assert main(["simulate", "--json", str(path), "--seeds", "1"]) == 0
    assert json.loads(path.read_text())[0]["strategy"] == "TopImages"
