"""The Hub-ready folder: Parquet shards per config plus a dataset card.

One exporter serves every set (ImageNetV2, CIFAR-10.1, rebuilt revisions): it takes one
:class:`datasets.Dataset` per config and writes a folder that is a complete Hub dataset
repository::

    README.md                                  the card: YAML (configs, dataset_info, ...) + prose
    data/<config>/test-00000-of-00001.parquet  one or more shards per config

so that ``load_dataset(folder, config, split="test")`` gives back the same rows and features.
The folder is written to a temporary sibling and renamed at the end (:mod:`pipeline.core.atomic`).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import datasets
from huggingface_hub import DatasetCard, DatasetCardData

from pipeline.core.atomic import atomic_directory

logger = logging.getLogger(__name__)

DEFAULT_MAX_SHARD_SIZE = 500_000_000  # bytes of Arrow data per Parquet shard, as push_to_hub
CARD_FILENAME = "README.md"


@dataclass(frozen=True)
class ConfigExport:
    """One config of a Hub-ready folder: its name, its rows, and whether it is the default."""

    name: str
    dataset: datasets.Dataset
    default: bool = False
    split: str = "test"

    @property
    def data_dir(self) -> str:
        return f"data/{self.name}"


def shard_count(dataset: datasets.Dataset, max_shard_size: int = DEFAULT_MAX_SHARD_SIZE) -> int:
    """Number of Parquet shards so that none holds more than ``max_shard_size`` bytes of Arrow data."""
    return max(1, math.ceil((dataset.data.nbytes or 0) / max_shard_size))


def write_parquet_shards(export: ConfigExport, root: Path, max_shard_size: int) -> list[Path]:
    """Write ``export.dataset`` as ``root/data/<config>/<split>-0000i-of-0000n.parquet``."""
    folder = root / export.data_dir
    folder.mkdir(parents=True, exist_ok=True)
    n = shard_count(export.dataset, max_shard_size)
    paths = []
    for i in range(n):
        path = folder / f"{export.split}-{i:05d}-of-{n:05d}.parquet"
        export.dataset.shard(num_shards=n, index=i, contiguous=True).to_parquet(str(path))
        paths.append(path)
    return paths


def card_metadata(
    exports: Sequence[ConfigExport],
    shard_sizes: Mapping[str, int],
    extra: Mapping[str, object],
) -> DatasetCardData:
    """The card's YAML: ``extra`` (license, pretty_name, ...) plus ``configs`` and ``dataset_info``."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs

    defaults = [e.name for e in exports if e.default]
    if len(defaults) > 1:
        raise ValueError(f"at most one config can be the default, got {defaults}")
    card_data = DatasetCardData(**dict(extra))
    configs = {}
    infos = {}
    for e in exports:
        entry: dict = {"data_files": [{"split": e.split, "path": f"{e.data_dir}/{e.split}-*"}]}
        if e.default:
            entry["default"] = True
        configs[e.name] = entry
        num_bytes = e.dataset.data.nbytes
        infos[e.name] = datasets.DatasetInfo(
            config_name=e.name,
            features=e.dataset.features,
            splits=datasets.SplitDict(
                {e.split: datasets.SplitInfo(name=e.split, num_bytes=num_bytes, num_examples=e.dataset.num_rows)}
            ),
            download_size=shard_sizes[e.name],
            dataset_size=num_bytes,
        )
    MetadataConfigs(configs).to_dataset_card_data(card_data)
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    return card_data


def render_card(card_data: DatasetCardData, body: str) -> str:
    """A dataset card's text: YAML front matter then the markdown ``body``."""
    return f"---\n{card_data.to_yaml()}\n---\n\n{body.strip()}\n"


def read_card(folder: os.PathLike | str) -> DatasetCard:
    """Load the dataset card of a Hub-ready folder (``card.data`` is the YAML, ``card.text`` the prose)."""
    path = Path(folder) / CARD_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no {CARD_FILENAME}: it is not a Hub-ready dataset folder")
    return DatasetCard.load(path)


def check_replaceable(output: Path) -> None:
    """Refuse to replace anything but nothing, an empty folder, or a folder this module wrote."""
    if not output.exists():
        return
    if not output.is_dir():
        raise ValueError(f"refusing to write the dataset folder {output}: a file of that name exists")
    if not any(output.iterdir()):
        return
    if (output / CARD_FILENAME).is_file() and (output / "data").is_dir() and not any(output.rglob("*.py")):
        return
    raise ValueError(
        f"refusing to replace {output}: it is not empty and does not look like a Hub-ready dataset folder "
        f"(README.md and data/, no Python files). Choose another --output, or remove it first."
    )


def write_hub_folder(
    output: os.PathLike | str,
    exports: Sequence[ConfigExport],
    card_body: str | Callable[[Mapping[str, datasets.Dataset]], str],
    card_extra: Mapping[str, object],
    *,
    max_shard_size: int = DEFAULT_MAX_SHARD_SIZE,
    extra_files: Optional[Mapping[str, bytes]] = None,
) -> Path:
    """Write a complete Hub dataset repository to ``output`` atomically and return its path.

    ``card_body`` is the card's prose, or a function of ``{config: dataset}`` that writes it;
    ``card_extra`` the YAML keys besides ``configs`` and ``dataset_info`` (``license``,
    ``pretty_name``, ``task_categories``, ...); ``extra_files`` more files by relative path
    (a citation, a revision file).

    >>> import tempfile, pathlib, datasets
    >>> ds = datasets.Dataset.from_dict({"x": [1, 2, 3]})
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "toy"
    >>> _ = write_hub_folder(out, [ConfigExport("a", ds, default=True)], "# Toy", {"license": "mit"})
    >>> datasets.load_dataset(str(out), "a", split="test").to_dict()["x"]
    [1, 2, 3]
    """
    if not exports:
        raise ValueError("nothing to export: give at least one config")
    names = [e.name for e in exports]
    if len(set(names)) != len(names):
        raise ValueError(f"config names must be unique, got {names}")
    output = Path(output)
    check_replaceable(output)
    with atomic_directory(output) as tmp:
        shard_sizes = {}
        for e in exports:
            logger.info("writing config %s (%d rows) as Parquet", e.name, e.dataset.num_rows)
            paths = write_parquet_shards(e, tmp, max_shard_size)
            shard_sizes[e.name] = sum(p.stat().st_size for p in paths)
        body = card_body({e.name: e.dataset for e in exports}) if callable(card_body) else card_body
        card = render_card(card_metadata(exports, shard_sizes, card_extra), body)
        (tmp / CARD_FILENAME).write_text(card, encoding="utf-8")
        for rel, data in (extra_files or {}).items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    logger.info("wrote %s", output)
    return output


# --- the `python -m <dataset> build` command, shared by the dataset packages -------------------


@dataclass(frozen=True)
class DatasetPackage:
    """What the shared ``build`` command needs to know about one dataset package."""

    prog: str  # "python -m imagenetv2"
    builder_cls: type  # a datasets.GeneratorBasedBuilder subclass
    config_names: Sequence[str]  # in card order
    default_config: str
    default_output: str
    card_extra: Callable[[], Mapping[str, object]]
    card_body: Callable[[Mapping[str, datasets.Dataset]], str]
    extra_files: Callable[[Sequence[str]], Mapping[str, bytes]] = lambda config_names: {}  # noqa: E731


def build_parser(package: DatasetPackage) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=package.prog, description=f"Build and export {package.prog.split()[-1]}.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build configs and write a Hub-ready folder (Parquet + dataset card)")
    build.add_argument(
        "--config",
        action="append",
        dest="configs",
        metavar="NAME",
        help=f"config to build (repeatable; default: all of {', '.join(package.config_names)})",
    )
    build.add_argument("--data-dir", help="folder holding the released files (default: download them)")
    build.add_argument("--output", default=package.default_output, help="folder to write (default: %(default)s)")
    build.add_argument("--cache-dir", help="datasets cache folder (default: the datasets default)")
    build.add_argument("--no-verify", action="store_true", help="skip size and sha256 checks of the released files")
    build.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    return parser


def build_configs(
    package: DatasetPackage,
    configs: Sequence[str],
    *,
    data_dir: Optional[str] = None,
    cache_dir: Optional[str] = None,
    verify: bool = True,
    builder_kwargs: Optional[Mapping[str, Mapping[str, object]]] = None,
) -> list[ConfigExport]:
    """Run the builder for each config and return the exports, default config flagged.

    ``builder_kwargs`` maps a config name to more keyword arguments for its builder (for example
    a rebuilt revision's ``revision_file``).
    """
    exports = []
    for name in configs:
        kwargs = dict((builder_kwargs or {}).get(name, {}))
        builder = package.builder_cls(config_name=name, data_dir=data_dir, cache_dir=cache_dir, **kwargs)
        builder.download_and_prepare(verification_mode="basic_checks" if verify else "no_checks")
        exports.append(ConfigExport(name, builder.as_dataset(split="test"), default=name == package.default_config))
    return exports


def export_package(
    package: DatasetPackage,
    output: os.PathLike | str,
    configs: Optional[Sequence[str]] = None,
    *,
    data_dir: Optional[str] = None,
    cache_dir: Optional[str] = None,
    verify: bool = True,
    builder_kwargs: Optional[Mapping[str, Mapping[str, object]]] = None,
    card_body: Optional[Callable[[Mapping[str, datasets.Dataset]], str]] = None,
) -> Path:
    """Build ``configs`` (default: all) and write the Hub-ready folder ``output``.

    ``card_body`` replaces the package's card prose (a rebuilt revision describes itself).
    """
    configs = list(configs or package.config_names)
    exports = build_configs(
        package, configs, data_dir=data_dir, cache_dir=cache_dir, verify=verify, builder_kwargs=builder_kwargs
    )
    if not any(e.default for e in exports) and len(exports) > 0:
        logger.info("default config %s not built; no config is marked default", package.default_config)
    return write_hub_folder(
        output,
        exports,
        card_body or package.card_body,
        package.card_extra(),
        extra_files=package.extra_files(configs),
    )


def main(package: DatasetPackage, argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m <dataset>``."""
    args = build_parser(package).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        path = export_package(
            package,
            args.output,
            args.configs,
            data_dir=args.data_dir,
            cache_dir=args.cache_dir,
            verify=not args.no_verify,
        )
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"wrote {path}")
    return 0
