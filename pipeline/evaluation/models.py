"""Models to score, declared as uniform data records, and loading them with their preprocessing.

A model is a :class:`ModelRecord`: a name, a source (``timm:<name>`` or ``hf:<repo or local
folder>``), an optional batch size, an optional label map, and for timm the keyword arguments of
``timm.create_model``. Records come from ``--model SPEC`` on the command line or from a model
file (JSON or YAML, a list of records or ``{"models": [...]}``)::

    [
      {"name": "resnet50", "source": "timm:resnet50.a1_in1k", "batch_size": 256},
      {"source": "hf:google/vit-base-patch16-224"},
      {"name": "inception-bg", "source": "timm:some_model", "label_map": "maps/background_first.json"}
    ]

Each model uses its own preprocessing: timm's resolved data config (``resolve_data_config``)
with the eval transform semantics, or the transformers ``AutoImageProcessor`` saved with it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .datasets_spec import check_local_path

logger = logging.getLogger(__name__)

SOURCES = ("timm", "hf")


@dataclass
class ModelRecord:
    """One model to score (the fields of a model file's records)."""

    source: str  # "timm:<model name>" or "hf:<Hub repo or local folder>"
    name: str = ""  # shown in tables and file names; default: the source without its prefix
    batch_size: Optional[int] = None  # default: --batch-size
    label_map: Any = None  # a JSON file, or an inline list / {output: class} (see labels.read_label_map)
    pretrained: Optional[bool] = None  # timm: load pretrained weights (default: not --no-pretrained)
    kwargs: dict = field(default_factory=dict)  # timm: more create_model arguments, e.g. {"num_classes": 10}
    checkpoint: Optional[str] = None  # timm: a checkpoint file to load (create_model checkpoint_path)
    seed: int = 0  # torch seed set before building the model (random weights are reproducible)
    baseline: Optional[bool] = None  # `report`: fit the lines to this model (a "standard" model); None: not said

    def __post_init__(self):
        if not isinstance(self.source, str) or ":" not in self.source:
            raise ValueError(f"model source {self.source!r} must be 'timm:<name>' or 'hf:<repo or folder>'")
        kind, target = self.source.split(":", 1)
        if kind not in SOURCES or not target:
            raise ValueError(f"model source {self.source!r} must start with 'timm:' or 'hf:' and name a model")
        if not self.name:
            self.name = Path(target.rstrip("/")).name if kind == "hf" and Path(target).exists() else target
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise ValueError(f"batch_size of model {self.name!r} must be a positive integer, got {self.batch_size!r}")
        if not isinstance(self.kwargs, dict):
            raise ValueError(f"kwargs of model {self.name!r} must be a mapping, got {self.kwargs!r}")
        if kind == "hf" and (self.kwargs or self.checkpoint):
            raise ValueError(f"model {self.name!r}: kwargs and checkpoint apply to timm models only")
        if kind == "hf":
            check_local_path(target, f"model source {self.source!r}")

    @property
    def kind(self) -> str:
        return self.source.split(":", 1)[0]

    @property
    def target(self) -> str:
        return self.source.split(":", 1)[1]

    def to_dict(self) -> dict:
        return asdict(self)


RECORD_FIELDS = tuple(f.name for f in fields(ModelRecord))


def parse_model_spec(spec: str) -> ModelRecord:
    """A record from a command-line ``--model`` spec.

    >>> parse_model_spec("timm:resnet50.a1_in1k").name
    'resnet50.a1_in1k'
    >>> parse_model_spec("resnet50")
    Traceback (most recent call last):
    ...
    ValueError: model source 'resnet50' must be 'timm:<name>' or 'hf:<repo or folder>'
    """
    return ModelRecord(source=spec.strip())


def record_from_dict(entry: Any, where: str) -> ModelRecord:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a model record is a mapping with at least 'source', got {entry!r}")
    unknown = sorted(set(entry) - set(RECORD_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; a model record has {list(RECORD_FIELDS)}")
    if "source" not in entry:
        raise ValueError(f"{where}: a model record needs 'source' ('timm:<name>' or 'hf:<repo or folder>')")
    try:
        return ModelRecord(**entry)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def load_model_file(path: str | Path) -> list[ModelRecord]:
    """Records from a JSON or YAML model file; label-map paths are resolved against the file's folder."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"model file {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ValueError(f"reading {path.name} needs PyYAML (pip install pyyaml), or write the model file as JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValueError(f"model file {str(path)!r} is not valid YAML: {e}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"model file {str(path)!r} is not valid JSON: {e}") from None
    if isinstance(data, dict) and "models" in data:
        data = data["models"]
    if not isinstance(data, list) or not data:
        raise ValueError(f"model file {str(path)!r} must hold a non-empty list of model records (or {{'models': [...]}})")
    records = []
    for i, entry in enumerate(data):
        record = record_from_dict(entry, f"{path.name}, record {i}")
        if isinstance(record.label_map, str) and not Path(record.label_map).is_absolute():
            record.label_map = str((path.parent / record.label_map).resolve())
        records.append(record)
    return records


def check_unique_names(records: Sequence[ModelRecord]) -> None:
    seen: dict[str, str] = {}
    for r in records:
        if r.name in seen:
            raise ValueError(f"two models are named {r.name!r} ({seen[r.name]} and {r.source}); give one a different name")
        seen[r.name] = r.source


# --- loading ---------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """A model ready to score: the module, how to call it, its outputs and its preprocessing."""

    record: ModelRecord
    module: Any  # torch.nn.Module
    forward: Callable  # float NCHW batch -> logits
    num_outputs: int
    label_names: Optional[list[str]]
    label_source: str  # where the names came from ("" when there are none)
    preprocessing: Any  # inputs.Preprocessing
    pretrained: bool


def load_model(record: ModelRecord, *, pretrained: bool = True, draft: bool = True, decode_on: str = "workers") -> LoadedModel:
    """Build ``record``'s model on the CPU in eval mode, with its preprocessing and label names."""
    if record.kind == "timm":
        return _load_timm(record, pretrained if record.pretrained is None else record.pretrained, draft, decode_on)
    return _load_hf(record, draft)


def preprocessing_for(record: ModelRecord, *, draft: bool = True, decode_on: str = "workers"):
    """``record``'s preprocessing without loading its weights.

    timm models are built on torch's ``meta`` device (no memory, no weights) for their resolved
    data config; transformers models read their saved image processor.
    """
    if record.kind == "timm":
        import timm
        import torch
        from timm.data import resolve_data_config

        from .inputs import timm_preprocessing

        kwargs = {k: v for k, v in record.kwargs.items() if k != "checkpoint_path"}
        with torch.device("meta"):
            module = timm.create_model(record.target, pretrained=False, **kwargs)
        return timm_preprocessing(resolve_data_config({}, model=module), draft=draft, decode_on=decode_on)
    from transformers import AutoImageProcessor

    from .inputs import ProcessorTransform

    return ProcessorTransform(AutoImageProcessor.from_pretrained(_hf_target(record)), draft=draft)


def preprocessing_key(record: ModelRecord, *, draft: bool = True, decode_on: str = "workers") -> Optional[str]:
    """The key of ``record``'s preprocessing (:func:`preprocessing_for`), None if it cannot be told."""
    try:
        return preprocessing_for(record, draft=draft, decode_on=decode_on).key()
    except Exception as e:  # noqa: BLE001 - the model then decodes for itself (and fails when loaded, if it must)
        logger.debug("no preprocessing key for %s: %s: %s", record.name, type(e).__name__, e)
        return None


def _hf_target(record: ModelRecord) -> str:
    return str(Path(record.target).expanduser()) if record.target.startswith("~") else record.target


def _load_timm(record: ModelRecord, pretrained: bool, draft: bool, decode_on: str = "workers") -> LoadedModel:
    import timm
    import torch
    from timm.data import ImageNetInfo, infer_imagenet_subset, resolve_data_config

    from .inputs import timm_preprocessing

    torch.manual_seed(record.seed)
    kwargs = dict(record.kwargs)
    if record.checkpoint:
        kwargs["checkpoint_path"] = record.checkpoint
    try:
        module = timm.create_model(record.target, pretrained=pretrained, **kwargs)
    except Exception as e:
        hint = ""
        if pretrained and ("offline" in str(e).lower() or "connect" in str(e).lower() or "hub" in str(e).lower()):
            hint = " (no network? --no-pretrained builds the model with random weights)"
        raise RuntimeError(f"timm could not build {record.target!r}: {e}{hint}") from e
    module.eval()
    num_outputs = int(module.num_classes)
    names = module.pretrained_cfg.get("label_names")
    source = "timm pretrained_cfg label_names" if names else ""
    if not names and (pretrained or record.checkpoint):
        subset = infer_imagenet_subset(module)
        if subset and num_outputs == 1000:
            names, source = list(ImageNetInfo(subset).label_names()), f"timm {subset} synsets"
    data_config = resolve_data_config({}, model=module)
    return LoadedModel(
        record, module, module, num_outputs, list(names) if names else None, source,
        timm_preprocessing(data_config, draft=draft, decode_on=decode_on), pretrained,
    )


def _load_hf(record: ModelRecord, draft: bool) -> LoadedModel:
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    from .inputs import ProcessorTransform

    try:
        module = AutoModelForImageClassification.from_pretrained(_hf_target(record))
        processor = AutoImageProcessor.from_pretrained(_hf_target(record))
    except Exception as e:
        raise RuntimeError(
            f"transformers could not load {record.target!r} as AutoModelForImageClassification with an "
            f"AutoImageProcessor: {e}"
        ) from e
    module.eval()
    num_outputs = int(module.config.num_labels)
    id2label = getattr(module.config, "id2label", None) or {}
    names = [str(id2label.get(i, id2label.get(str(i), ""))) for i in range(num_outputs)] if id2label else None

    def forward(x):
        return module(pixel_values=x).logits

    return LoadedModel(
        record, module, forward, num_outputs, names, "config.id2label" if names else "",
        ProcessorTransform(processor, draft=draft), True,
    )
