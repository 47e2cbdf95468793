"""The Hub-ready folder: Parquet shards per config plus a dataset card.

One exporter serves every set (ImageNetV2, CIFAR-10.1, rebuilt revisions). It takes, per
config, either a :class:`datasets.Dataset` (:class:`ConfigExport`) or a stream of Arrow tables
straight from a builder (:class:`ConfigStream`: the archive is read and the shards written in
one pass, no cache), and writes a folder that is a complete Hub dataset repository::

    README.md                                  the card: YAML (configs, dataset_info, ...) + prose
    data/<config>/test-00000-of-00001.parquet  one or more shards per config

so that ``load_dataset(folder, config, split="test")`` gives back the same rows and features.
The folder is written to a temporary sibling, marked as ours, and renamed at the end
(:mod:`pipeline.core.ownership`): an existing folder is replaced only if this project wrote it.
The ``python -m <dataset> build`` command is in :mod:`pipeline.core.build_command`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

import datasets
import pyarrow as pa
from huggingface_hub import DatasetCard, DatasetCardData

from pipeline.core.ownership import owned_directory
from pipeline.core.parquet_shards import DEFAULT_MAX_SHARD_SIZE, ShardWriter

logger = logging.getLogger(__name__)

CARD_FILENAME = "README.md"
ARROW_BATCH_BYTES = 64 << 20


@dataclass(frozen=True)
class ConfigExport:
    """One config of a Hub-ready folder: its name, its rows, and whether it is the default.

    ``verification`` says what the build of these rows verified (for the card), if known.
    """

    name: str
    dataset: datasets.Dataset
    default: bool = False
    split: str = "test"
    verification: Optional[str] = None

    @property
    def data_dir(self) -> str:
        return f"data/{self.name}"

    @property
    def features(self) -> datasets.Features:
        return self.dataset.features

    def tables(self) -> Iterable[pa.Table]:
        ds = self.dataset
        rows = max(1, int(ARROW_BATCH_BYTES * max(ds.num_rows, 1) / max(ds.data.nbytes, 1)))
        return ds.with_format("arrow").iter(batch_size=rows)

    def verified(self) -> Optional[str]:
        return self.verification


@dataclass(frozen=True)
class ConfigStream:
    """One config whose rows arrive as Arrow tables (e.g. ``builder.stream_tables()``).

    ``verification`` is called after the last table: what the stream verified, or None.
    """

    name: str
    features: datasets.Features
    stream: Iterable[pa.Table]
    default: bool = False
    split: str = "test"
    verification: Callable[[], Optional[str]] = field(default=lambda: None)

    @property
    def data_dir(self) -> str:
        return f"data/{self.name}"

    def tables(self) -> Iterable[pa.Table]:
        return self.stream

    def verified(self) -> Optional[str]:
        return self.verification()


AnyExport = Union[ConfigExport, ConfigStream]


@dataclass(frozen=True)
class WrittenConfig:
    """What was written for one config: counts for the card's ``dataset_info``, and its rows
    without the image columns (``rows``, a ``pyarrow.Table``) for the card's prose."""

    name: str
    split: str
    default: bool
    features: datasets.Features
    num_rows: int
    num_bytes: int
    download_size: int
    rows: pa.Table
    verification: Optional[str]


def _progress(name: str):
    from datasets.utils.tqdm import tqdm

    return tqdm(unit=" examples", desc=f"Generating test split of {name}", leave=False)


def write_config(export: AnyExport, root: Path, max_shard_size: int) -> WrittenConfig:
    """Write ``export``'s tables as ``root/data/<config>/<split>-0000i-of-0000n.parquet``."""
    import pyarrow.parquet as pq

    features = export.features
    with ShardWriter(root / export.data_dir, export.split, features, max_shard_size) as writer, _progress(export.name) as bar:
        for table in export.tables():
            writer.write(table)
            bar.update(table.num_rows)
    small = [name for name, f in features.items() if not isinstance(f, (datasets.Image, datasets.Audio))]
    rows = pa.concat_tables([pq.read_table(p, columns=small) for p in writer.paths])
    return WrittenConfig(
        export.name, export.split, export.default, features, writer.num_rows, writer.num_bytes,
        sum(p.stat().st_size for p in writer.paths), rows, export.verified(),
    )


def card_metadata(written: Sequence[WrittenConfig], extra: Mapping[str, object]) -> DatasetCardData:
    """The card's YAML: ``extra`` (license, pretty_name, ...) plus ``configs`` and ``dataset_info``."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs

    card_data = DatasetCardData(**dict(extra))
    configs, infos = {}, {}
    for w in written:
        entry: dict = {"data_files": [{"split": w.split, "path": f"data/{w.name}/{w.split}-*"}]}
        if w.default:
            entry["default"] = True
        configs[w.name] = entry
        infos[w.name] = datasets.DatasetInfo(
            config_name=w.name,
            features=w.features,
            splits=datasets.SplitDict({w.split: datasets.SplitInfo(name=w.split, num_bytes=w.num_bytes, num_examples=w.num_rows)}),
            download_size=w.download_size,
            dataset_size=w.num_bytes,
        )
    MetadataConfigs(configs).to_dataset_card_data(card_data)
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    return card_data


def verification_section(written: Sequence[WrittenConfig]) -> str:
    """The card's *Verification* section: what the build checked, per config ('' if unknown)."""
    known = [w for w in written if w.verification]
    if not known:
        return ""
    rows = [f"| `{w.name}` | {w.verification} |" for w in known]
    return "\n".join(["## Verification", "", "What the build of this folder checked, per config:", "",
                      "| config | verified |", "|---|---|", *rows])


def render_card(card_data: DatasetCardData, body: str) -> str:
    """A dataset card's text: YAML front matter then the markdown ``body``.

    The YAML is ``card_data.to_yaml()``'s, written by libyaml where available (a card with a
    1,000-name ClassLabel takes a second in the pure-Python writer).
    """
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(card_data.to_dict(), Dumper=dumper, sort_keys=False, allow_unicode=True).strip()
    return f"---\n{text}\n---\n\n{body.strip()}\n"


def read_card(folder: os.PathLike | str) -> DatasetCard:
    """Load the dataset card of a Hub-ready folder (``card.data`` is the YAML, ``card.text`` the prose)."""
    path = Path(folder) / CARD_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no {CARD_FILENAME}: it is not a Hub-ready dataset folder")
    return DatasetCard.load(path)


def _check_exports(exports: Sequence[AnyExport]) -> None:
    if not exports:
        raise ValueError("nothing to export: give at least one config")
    names = [e.name for e in exports]
    if len(set(names)) != len(names):
        raise ValueError(f"config names must be unique, got {names}")
    defaults = [e.name for e in exports if e.default]
    if len(defaults) > 1:
        raise ValueError(f"at most one config can be the default, got {defaults}")


def write_hub_folder(
    output: os.PathLike | str,
    exports: Sequence[AnyExport],
    card_body: str | Callable[[Mapping[str, pa.Table]], str],
    card_extra: Mapping[str, object],
    *,
    max_shard_size: int = DEFAULT_MAX_SHARD_SIZE,
    extra_files: Optional[Mapping[str, bytes]] = None,
    command: str = "export",
    inputs: Iterable[Optional[os.PathLike | str]] = (),
) -> Path:
    """Write a complete Hub dataset repository to ``output`` atomically and return its path.

    ``card_body`` is the card's prose, or a function of ``{config: rows}`` that writes it (the
    rows as a ``pyarrow.Table`` without the image column, read back from the shards);
    ``card_extra`` the YAML keys besides ``configs`` and ``dataset_info`` (``license``,
    ``pretty_name``, ``task_categories``, ...); ``extra_files`` more files by relative path
    (a citation, a revision file). ``output`` must be absent, empty, or a folder this project
    wrote; it must not be or contain one of ``inputs``.

    >>> import tempfile, pathlib, datasets
    >>> ds = datasets.Dataset.from_dict({"x": [1, 2, 3]})
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "toy"
    >>> _ = write_hub_folder(out, [ConfigExport("a", ds, default=True)], "# Toy", {"license": "mit"})
    >>> datasets.load_dataset(str(out), "a", split="test").to_dict()["x"]
    [1, 2, 3]
    """
    _check_exports(exports)
    output = Path(output)
    with owned_directory(output, command, inputs=inputs) as tmp:
        written = []
        for e in exports:
            logger.info("writing config %s as Parquet", e.name)
            written.append(write_config(e, tmp, max_shard_size))
        body = card_body({w.name: w.rows for w in written}) if callable(card_body) else card_body
        body = body.rstrip() + ("\n\n" + verification_section(written) if verification_section(written) else "")
        (tmp / CARD_FILENAME).write_text(render_card(card_metadata(written, card_extra), body), encoding="utf-8")
        for rel, data in (extra_files or {}).items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    logger.info("wrote %s", output)
    return output


# --- building a dataset package's configs --------------------------------------------------------


@dataclass(frozen=True)
class DatasetPackage:
    """What the shared ``build`` command needs to know about one dataset package."""

    prog: str  # "python -m imagenetv2"
    builder_cls: type  # a datasets builder with pipeline.core.builders.ClearErrors
    config_names: Sequence[str]  # in card order
    default_config: str
    default_output: str
    card_extra: Callable[[], Mapping[str, object]]
    card_body: Callable[[Mapping[str, pa.Table]], str]
    extra_files: Callable[[Sequence[str]], Mapping[str, bytes]] = lambda config_names: {}  # noqa: E731


def _statement(builder) -> Optional[str]:
    verification = getattr(builder, "verification", None)
    return verification.statement if verification is not None else None


def build_configs(
    package: DatasetPackage,
    configs: Sequence[str],
    *,
    data_dir: Optional[str] = None,
    cache_dir: Optional[str] = None,
    verify: bool = True,
    builder_kwargs: Optional[Mapping[str, Mapping[str, object]]] = None,
    num_proc: Optional[int] = None,
) -> list[ConfigExport]:
    """Run the builder (``download_and_prepare``, into the cache) for each config and return the
    exports, default config flagged. ``builder_kwargs`` maps a config name to more keyword
    arguments for its builder (for example a rebuilt revision's ``revision_file``)."""
    exports = []
    for name in configs:
        kwargs = dict((builder_kwargs or {}).get(name, {}))
        builder = package.builder_cls(config_name=name, data_dir=data_dir, cache_dir=cache_dir, **kwargs)
        builder.download_and_prepare(verification_mode="basic_checks" if verify else "no_checks", num_proc=num_proc)
        exports.append(ConfigExport(name, builder.as_dataset(split="test"), name == package.default_config,
                                    verification=_statement(builder)))
    return exports


def stream_configs(
    package: DatasetPackage,
    configs: Sequence[str],
    *,
    data_dir: Optional[str] = None,
    cache_dir: Optional[str] = None,
    verify: bool = True,
    builder_kwargs: Optional[Mapping[str, Mapping[str, object]]] = None,
    num_proc: Optional[int] = None,
) -> list[ConfigStream]:
    """Like :func:`build_configs`, but each config's rows stream from the builder's source into
    the export (nothing goes to the ``datasets`` cache but downloads)."""
    streams = []
    for name in configs:
        kwargs = dict((builder_kwargs or {}).get(name, {}))
        builder = package.builder_cls(config_name=name, data_dir=data_dir, cache_dir=cache_dir, **kwargs)
        tables = builder.stream_tables("basic_checks" if verify else "no_checks", num_proc=num_proc)
        streams.append(ConfigStream(name, builder.info.features, tables, name == package.default_config,
                                    verification=lambda b=builder: _statement(b)))
    return streams


def export_package(
    package: DatasetPackage,
    output: os.PathLike | str,
    configs: Optional[Sequence[str]] = None,
    *,
    data_dir: Optional[str] = None,
    cache_dir: Optional[str] = None,
    verify: bool = True,
    builder_kwargs: Optional[Mapping[str, Mapping[str, object]]] = None,
    card_body: Optional[Callable[[Mapping[str, pa.Table]], str]] = None,
    num_proc: Optional[int] = None,
) -> Path:
    """Build ``configs`` (default: all) and write the Hub-ready folder ``output`` in one pass.

    ``card_body`` replaces the package's card prose (a rebuilt revision describes itself).
    """
    configs = list(configs or package.config_names)
    streams = stream_configs(
        package, configs, data_dir=data_dir, cache_dir=cache_dir, verify=verify,
        builder_kwargs=builder_kwargs, num_proc=num_proc,
    )
    if not any(s.default for s in streams):
        logger.info("default config %s not built; no config is marked default", package.default_config)
    return write_hub_folder(
        output, streams, card_body or package.card_body, package.card_extra(),
        extra_files=package.extra_files(configs), command=f"{package.prog.split()[-1]} build",
        inputs=[data_dir, cache_dir],
    )
