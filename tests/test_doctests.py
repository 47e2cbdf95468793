"""Run the examples in the docstrings of the library modules as tests."""

import doctest
import importlib

import pytest

MODULES = [
    "pipeline.core.atomic",
    "pipeline.core.integrity",
    "pipeline.core.export",
    "imagenetv2.classes",
    "imagenetv2.variants",
    "imagenetv2.revisions",
    "imagenetv2",
    "pipeline.toys.synthetic",
    "pipeline.rebuild.tasks",
    "pipeline.rebuild.task_key",
    "pipeline.rebuild.task_grid",
    "pipeline.rebuild.task_page",
    "pipeline.rebuild.task_upload",
    "pipeline.rebuild.batch_results",
    "pipeline.toys.annotators",
    "pipeline.core.ownership",
    "pipeline.core.lazy",
    "pipeline.commands._errors",
    "pipeline.rebuild.image_store",
    "pipeline.rebuild.sample_inputs",
    "pipeline.rebuild.ingest",
    "pipeline.rebuild.near_duplicate_rules",
    "pipeline.rebuild.near_duplicates.collections",
    "pipeline.rebuild.near_duplicates.ssim",
    "pipeline.rebuild.near_duplicates.search",
    "pipeline.rebuild.near_duplicates.review_status",
    "pipeline.toys.planted_duplicates",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
