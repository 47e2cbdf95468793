"""The dataset packages' floor (issue 10): cheap imports, one table for the rules, card templates beside
each package, small modules and functions, and the docstring examples of the dataset-side modules."""

from __future__ import annotations

import ast
import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from imagenetv2.variants import CONFIG_NAMES, VARIANTS

ROOT = Path(__file__).resolve().parents[1]
DATASET_SIDE = [
    *sorted((ROOT / "imagenetv2").glob("*.py")),
    *sorted((ROOT / "cifar10_1").glob("*.py")),
    *(ROOT / "pipeline" / "core" / name for name in ("export.py", "builders.py", "integrity.py", "parquet_shards.py", "build_command.py")),
    ROOT / "benchmarks" / "bench_build.py",
]


def test_importing_the_packages_does_not_import_datasets():
    code = (
        "import sys\n"
        "import imagenetv2, imagenetv2.classes, imagenetv2.variants, cifar10_1, cifar10_1.variants\n"
        "print(sorted(m for m in ('datasets', 'pyarrow', 'PIL') if m in sys.modules))\n"
        "from imagenetv2 import ImageNetV2\n"
        "print('datasets' in sys.modules, ImageNetV2.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.splitlines()
    assert out == ["[]", "True ImageNetV2"]


def test_the_variant_table_holds_each_rule_and_its_revision_file_name():
    """Rule names from the paper and function names from the released revision files themselves."""
    assert [(v.config_name, v.sampling_rule) for v in VARIANTS] == [
        ("matched-frequency", "MatchedFrequency"), ("threshold-0.7", "Threshold0.7"), ("top-images", "TopImages"),
    ]
    for v in VARIANTS:
        released = json.loads((ROOT / "imagenetv2" / "data" / v.revision_file).read_text())
        assert released["sampling_function"] == v.sampling_function


def test_the_pipeline_derives_the_rules_from_the_table():
    import argparse

    from pipeline.commands import sample
    from pipeline.rebuild import revision
    from pipeline.toys import demo

    assert revision.RULES == {v.config_name: v.sampling_function for v in VARIANTS}
    assert revision.RELEASED == {v.config_name: v.revision for v in VARIANTS}
    assert tuple(demo.RULES) == CONFIG_NAMES
    parser = argparse.ArgumentParser()
    sample.add_arguments(parser)
    rule = next(a for a in parser._actions if a.dest == "rule")
    assert tuple(rule.choices) == CONFIG_NAMES


@pytest.mark.parametrize("package", ["imagenetv2", "cifar10_1"])
def test_card_prose_and_citations_are_package_files(package):
    folder = ROOT / package
    template = (folder / "card_template.md").read_text()
    assert template.startswith("# ") and "${" in template and "@" not in template  # citations come from the .bib
    assert (folder / "CITATIONS.bib").read_text().count("@") >= 1
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'{package} = ["data/*.json"' in pyproject and '"*.md", "*.bib"' in pyproject


def test_dataset_side_modules_and_functions_are_small():
    """No module over 400 lines and no function over 60 (issue 10's rule)."""
    problems = []
    for path in DATASET_SIDE:
        source = path.read_text()
        if source.count("\n") > 400:
            problems.append(f"{path.relative_to(ROOT)}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                problems.append(f"{path.relative_to(ROOT)}: {node.name} has {node.end_lineno - node.lineno + 1} lines")
    assert problems == []


@pytest.mark.parametrize(
    "module",
    ["imagenetv2", "imagenetv2.variants", "imagenetv2.images", "imagenetv2.rows", "imagenetv2.card", "imagenetv2.revisions",
     "pipeline.core.builders", "pipeline.core.integrity", "pipeline.core.parquet_shards", "pipeline.core.export"],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_build_is_quiet_by_default_and_takes_v_before_or_after_the_subcommand():
    from imagenetv2 import PACKAGE
    from pipeline.core.build_command import build_parser

    parser = build_parser(PACKAGE)
    assert parser.parse_args(["build"]).verbose is False
    assert parser.parse_args(["-v", "build"]).verbose is True
    assert parser.parse_args(["build", "-v"]).verbose is True
    assert parser.parse_args(["build"]).num_proc >= 1
