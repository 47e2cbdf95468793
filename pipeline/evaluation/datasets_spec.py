"""Datasets to score on, written ``PATH_OR_HUB_ID[:CONFIG][@SPLIT]``.

Examples: ``./imagenetv2:matched-frequency`` (an exported folder, default split),
``ILSVRC/imagenet-1k@validation``, ``uoft-cs/cifar10@test``, ``hub/cifar10_1:v4@test``.

Parsing rules (decided once, here):

* a spec naming an existing local path as a whole is that path, with no config or split (so a
  folder whose name contains ``:`` or ``@`` still works as long as it exists);
* otherwise the last ``@`` starts the split and the last ``:`` before it starts the config;
  config and split names cannot contain ``/``, ``:`` or ``@`` (Hub ids never contain ``:`` or
  ``@``). To give a config or split for a path that itself contains ``:``, write the config
  explicitly: ``./a:b:CONFIG``.
* the split defaults to ``test``, or to the only split there is; anything else is an error that
  lists the splits.

The image column is ``image`` or ``img`` (or the only ``Image`` feature); the label column is
``label`` (or ``labels``, or the only ``ClassLabel``) and must be a ``ClassLabel``, whose names
define the label space (:mod:`.labels`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[^/:@]+$")


@dataclass(frozen=True)
class DatasetSpec:
    """A parsed ``PATH_OR_HUB_ID[:CONFIG][@SPLIT]``."""

    text: str  # as given
    path: str
    config: Optional[str] = None
    split: Optional[str] = None

    @property
    def is_local(self) -> bool:
        return Path(self.path).exists()

    def name(self, split: str) -> str:
        """A short name for tables and file names: folder (or Hub id), config, split.

        >>> parse_dataset_spec("uoft-cs/cifar10").name("test")
        'uoft-cs/cifar10@test'
        """
        base = Path(self.path.rstrip("/")).name if self.is_local or not _looks_like_hub_id(self.path) else self.path
        return base + (f":{self.config}" if self.config else "") + f"@{split}"


def looks_like_local_path(path: str) -> bool:
    """Whether ``path`` means a local folder: it starts with ``.``, ``/`` or ``~``, or its parent folder exists.

    >>> looks_like_local_path("./imagenetv2"), looks_like_local_path("~/sets/v2"), looks_like_local_path("ILSVRC/imagenet-1k")
    (True, True, False)
    """
    if path.startswith((".", "/", "~")):
        return True
    parent = Path(path).parent
    return parent != Path(".") and parent.is_dir()


def check_local_path(path: str, what: str) -> None:
    """Refuse a local-looking ``path`` that does not exist (instead of asking the Hub for it)."""
    if looks_like_local_path(path) and not Path(path).expanduser().exists():
        raise ValueError(
            f"{what}: no such folder {path!r} (a path starting with '.', '/' or '~', or inside an existing folder, "
            "is read from disk, not the Hub); check the path"
        )


def _looks_like_hub_id(path: str) -> bool:
    return re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", path) is not None and not path.startswith(".")


def parse_dataset_spec(text: str) -> DatasetSpec:
    """Parse ``PATH_OR_HUB_ID[:CONFIG][@SPLIT]`` (see the module docs for the rules).

    >>> parse_dataset_spec("ILSVRC/imagenet-1k@validation")
    DatasetSpec(text='ILSVRC/imagenet-1k@validation', path='ILSVRC/imagenet-1k', config=None, split='validation')
    >>> parse_dataset_spec("./imagenetv2:matched-frequency")
    DatasetSpec(text='./imagenetv2:matched-frequency', path='./imagenetv2', config='matched-frequency', split=None)
    >>> parse_dataset_spec("uoft-cs/cifar10:plain_text@test").config
    'plain_text'
    >>> parse_dataset_spec("x:@test")
    Traceback (most recent call last):
    ...
    ValueError: dataset spec 'x:@test' has an empty config after ':'; write PATH_OR_HUB_ID[:CONFIG][@SPLIT]
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty dataset spec {text!r}; write PATH_OR_HUB_ID[:CONFIG][@SPLIT]")
    text = text.strip()
    if Path(text).exists():
        return DatasetSpec(text, text)
    rest, split = text, None
    head, sep, tail = rest.rpartition("@")
    if sep and "/" not in tail and ":" not in tail:
        rest, split = head, tail
        if not split:
            raise ValueError(f"dataset spec {text!r} has an empty split after '@'; write PATH_OR_HUB_ID[:CONFIG][@SPLIT]")
    config = None
    head, sep, tail = rest.rpartition(":")
    if sep and "/" not in tail:
        rest, config = head, tail
        if not config:
            raise ValueError(f"dataset spec {text!r} has an empty config after ':'; write PATH_OR_HUB_ID[:CONFIG][@SPLIT]")
    if not rest:
        raise ValueError(f"dataset spec {text!r} has no path or Hub id; write PATH_OR_HUB_ID[:CONFIG][@SPLIT]")
    for name, value in (("config", config), ("split", split)):
        if value is not None and not _NAME.match(value):
            raise ValueError(f"{name} {value!r} in dataset spec {text!r} may not contain '/', ':' or '@'")
    if rest.startswith("~"):
        rest = str(Path(rest).expanduser())
    return DatasetSpec(text, rest, config, split)


def resolve_split(spec: DatasetSpec, cache_dir: Optional[str] = None) -> str:
    """The split to use: the one given (if it exists), else ``test``, else the only one."""
    import datasets

    check_local_path(spec.path, f"dataset {spec.text!r}")

    try:
        splits = list(datasets.get_dataset_split_names(spec.path, spec.config, cache_dir=cache_dir))
    except Exception as e:  # noqa: BLE001 - re-raised with the spec named
        raise ValueError(f"cannot open dataset {spec.text!r}: {e}") from e
    where = spec.path + (f":{spec.config}" if spec.config else "")
    if spec.split:
        if spec.split not in splits:
            raise ValueError(f"dataset {spec.text!r} has no split {spec.split!r}; its splits are {splits} (write {where}@SPLIT)")
        return spec.split
    if "test" in splits:
        return "test"
    if len(splits) == 1:
        return splits[0]
    raise ValueError(f"dataset {spec.text!r} has splits {splits} and none is 'test'; name one, e.g. {where}@{splits[0]}")


@dataclass
class LoadedDataset:
    """A dataset ready to score: its rows, which columns hold the image and label, and class names."""

    spec: DatasetSpec
    split: str
    table: object  # datasets.Dataset
    image_column: str
    label_column: str
    class_names: list[str]
    num_rows_total: int  # before --limit
    rows: Optional[list] = None  # the split rows scored (--limit: a sample spread over the classes); None: all

    def __post_init__(self):
        if self.rows is None:
            self.rows = list(range(self.num_rows_total))

    @property
    def fingerprint(self) -> str:
        """What identifies the loaded table (datasets' fingerprint of its files)."""
        return str(getattr(self.table, "_fingerprint", ""))

    @property
    def name(self) -> str:
        """``folder[:config]@split`` as shown in tables and file names."""
        return self.spec.name(self.split)


def find_columns(features, spec_text: str = "the dataset") -> tuple[str, str, list[str]]:
    """``(image column, label column, class names)`` from a datasets ``Features``."""
    import datasets

    images = [k for k, f in features.items() if isinstance(f, datasets.Image)]
    image = next((k for k in ("image", "img") if k in images), images[0] if len(images) == 1 else None)
    if image is None:
        raise ValueError(
            f"{spec_text} has no image column: expected an Image feature named 'image' or 'img', "
            f"found columns {dict((k, type(f).__name__) for k, f in features.items())}"
        )
    class_labels = [k for k, f in features.items() if isinstance(f, datasets.ClassLabel)]
    label = next((k for k in ("label", "labels") if k in features), class_labels[0] if len(class_labels) == 1 else None)
    if label is None:
        raise ValueError(f"{spec_text} has no label column: expected 'label' or a single ClassLabel, found {list(features)}")
    if not isinstance(features[label], datasets.ClassLabel):
        raise ValueError(
            f"{spec_text}'s label column {label!r} is {features[label]!r}, not a ClassLabel, so its classes are "
            f"unknown; cast it first (dataset.cast_column({label!r}, ClassLabel(names=[...]))) and save the "
            f"dataset, or use a copy whose card declares the class names"
        )
    return image, label, list(features[label].names)


def load_for_scoring(
    spec: DatasetSpec, split: str, limit: Optional[int] = None, cache_dir: Optional[str] = None
) -> LoadedDataset:
    """Open ``spec``'s ``split`` with ``datasets.load_dataset``; with ``limit``, score a sample of that
    many rows spread over the classes (:func:`.sampling.limit_sample`)."""
    import datasets

    from .sampling import limit_sample

    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be a positive number of images, got {limit}")
    try:
        table = datasets.load_dataset(spec.path, spec.config, split=split, cache_dir=cache_dir)
    except Exception as e:  # noqa: BLE001 - re-raised with the spec named
        raise ValueError(f"cannot load dataset {spec.text!r} (split {split!r}): {e}") from e
    image, label, names = find_columns(table.features, repr(spec.text))
    total = table.num_rows
    rows = list(range(total))
    if limit is not None and limit < total:
        rows = limit_sample(table.with_format("arrow")[label].to_numpy(), limit).tolist()
    logger.info("dataset %s: %d of %d rows, %d classes", spec.text, len(rows), total, len(names))
    return LoadedDataset(spec, split, table, image, label, names, total, rows)

