"""The task page: the MTurk layout with ``${...}`` placeholders, and filling it with one task's row.

The page (``templates/task.html``) is a whole HTML document with its own form, as MTurk's
``HTMLQuestion`` needs: it posts to ``<turkSubmitTo>/mturk/externalSubmit`` (the query parameter
MTurk adds; our local annotation page passes its own), one ``selected`` field per chosen image
(MTurk joins them with ``|``). Shared by ``tasks`` (writes the layout), ``mturk`` (fills it per HIT)
and ``annotate`` (serves it), so that all three show workers the same page.

>>> page = task_page(2)
>>> page.count('name="selected"'), "${image_2_url}" in page
(2, True)
>>> filled = fill_page(page, {"class_name": "tench", "image_1_url": "a.jpg", "image_2_url": ""}, strict=False)
>>> "${class_name}" in filled, 'value="a.jpg"' in filled
(False, True)
"""

from __future__ import annotations

import html
import re
from importlib import resources
from typing import Mapping

from pipeline.rebuild.task_key import TASK_PAGE

PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
TILES_MARK = "<!-- TILES -->"


def template(name: str) -> str:
    """The text of ``pipeline/rebuild/templates/<name>``."""
    return resources.files("pipeline.rebuild").joinpath("templates", name).read_text("utf-8")


def task_page(images_per_task: int) -> str:
    """The layout for grids of ``images_per_task`` images (placeholders ``image_1_url`` ...)."""
    tile = template("tile.html")
    tiles = "".join(tile.replace("${n}", str(k)) for k in range(1, images_per_task + 1))
    return template(TASK_PAGE).replace(TILES_MARK + "\n", tiles)


def placeholders(page: str) -> list[str]:
    """The placeholder names of ``page``, in order of first use."""
    return list(dict.fromkeys(PLACEHOLDER.findall(page)))


def fill_page(page: str, row: Mapping[str, str], *, strict: bool = True) -> str:
    """``page`` with every ``${name}`` replaced by ``row[name]``, HTML-escaped (as MTurk does for a batch).

    ``strict``: a placeholder the row lacks is an error (else it becomes empty).
    """
    missing = [name for name in placeholders(page) if name not in row]
    if strict and missing:
        raise ValueError(f"the task page needs {', '.join(missing[:5])}, which the row does not have")
    return PLACEHOLDER.sub(lambda m: html.escape(str(row.get(m.group(1)) or ""), quote=True), page)
