"""Label spaces: does a model's output index i mean the dataset's class i?

A model is scored on a dataset only when the answer is known. The dataset's classes come from
its ``ClassLabel`` names; the model's from its label names where it carries them (transformers'
``config.id2label``, timm's ``pretrained_cfg["label_names"]``, or timm's ImageNet synsets for a
pretrained 1000-class model). Names are compared by identity, not by spelling: on ImageNet both
sides are resolved to WordNet ids (a wnid, our unique name such as ``crane (bird)``, the full
synset ``tench, Tinca tinca`` as transformers models write it, or a lemma), elsewhere by
case-insensitive name (CIFAR-10's ten names).

Outcomes, as a :class:`LabelMatch`:

* names agree position by position: scored as is (``how="names"``);
* names agree as sets but in another order: model outputs are reordered (``how="names-reordered"``);
* the model carries no names (a randomly initialised timm model, transformers' ``LABEL_0``...):
  accepted when the number of outputs equals the number of classes (``how="count"``, logged);
* an explicit label map (``--label-map``): model output → dataset class (``how="label-map"``);
* anything else (1001 outputs with a background class, a CIFAR-10 model on ImageNet, unmatched
  names) raises :class:`LabelSpaceError` saying what differs and how to give a label map.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from imagenetv2.classes import imagenet_classes

_DEFAULT_NAME = re.compile(r"^LABEL_\d+$")


class LabelSpaceError(ValueError):
    """The model's outputs and the dataset's classes do not correspond."""


def normalize(name: str) -> str:
    """Case-, underscore- and whitespace-insensitive form of a class name."""
    return " ".join(str(name).replace("_", " ").lower().split())


@lru_cache(maxsize=None)
def _imagenet_lookup() -> tuple[dict[str, frozenset[str]], ...]:
    """Normalised spelling -> wnids, in tiers from most to least specific: wnid, our unique
    name, the full synset as one string (transformers' ``id2label``), a single lemma."""
    tiers: list[dict[str, set[str]]] = [{}, {}, {}, {}]
    for c in imagenet_classes():
        for tier, spellings in zip(tiers, ([c.wnid], [c.name], [", ".join(c.synset)], c.synset)):
            for spelling in spellings:
                tier.setdefault(normalize(spelling), set()).add(c.wnid)
    return tuple({k: frozenset(v) for k, v in tier.items()} for tier in tiers)


def imagenet_candidates(name: str) -> frozenset[str]:
    """The ImageNet wnids a class name can denote, from its most specific reading (empty if none).

    >>> sorted(imagenet_candidates("tench, Tinca tinca")), sorted(imagenet_candidates("crane"))
    (['n01440764'], ['n02012849', 'n03126707'])
    >>> sorted(imagenet_candidates("missile")), sorted(imagenet_candidates("crane (bird)"))
    (['n03773504'], ['n02012849'])
    """
    key = normalize(name)
    for tier in _imagenet_lookup():
        if key in tier:
            return tier[key]
    return frozenset()


@dataclass(frozen=True)
class LabelSpace:
    """A dataset's classes: ``keys`` identify them (wnids on ImageNet, else normalised names)."""

    kind: str  # "imagenet-1k" or "names"
    names: tuple[str, ...]
    keys: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    def describe(self) -> str:
        what = "ImageNet-1k classes" if self.kind == "imagenet-1k" else "classes"
        preview = ", ".join(self.names[:3]) + (", ..." if len(self.names) > 3 else "")
        return f"{len(self.names)} {what} ({preview})"


def dataset_label_space(names: Sequence[str]) -> LabelSpace:
    """The label space of a dataset with ClassLabel ``names``; ImageNet-1k is recognised in any order.

    >>> from imagenetv2.classes import class_names
    >>> dataset_label_space(class_names()).kind, dataset_label_space(["cat", "dog"]).keys
    ('imagenet-1k', ('cat', 'dog'))
    """
    names = tuple(str(n) for n in names)
    classes = imagenet_classes()
    if len(names) == len(classes):
        standard = [c.wnid for c in classes]
        if all(w in imagenet_candidates(n) for n, w in zip(names, standard)):
            return LabelSpace("imagenet-1k", names, tuple(standard))
        resolved = [imagenet_candidates(n) for n in names]
        if all(len(r) == 1 for r in resolved):
            keys = tuple(next(iter(r)) for r in resolved)
            if len(set(keys)) == len(keys):
                return LabelSpace("imagenet-1k", names, keys)
    keys = tuple(normalize(n) for n in names)
    if len(set(keys)) != len(keys):
        raise LabelSpaceError(f"the dataset's class names are not unique after normalisation: {list(names)[:10]}")
    return LabelSpace("names", names, keys)


def model_names_are_informative(names: Optional[Sequence[str]]) -> bool:
    """False for no names or transformers' placeholder names ``LABEL_0``, ``LABEL_1``, ..."""
    return bool(names) and not all(_DEFAULT_NAME.match(str(n)) for n in names)


@dataclass(frozen=True)
class LabelMatch:
    """How model outputs map to dataset classes.

    ``dataset_to_model[d]`` is the model output that scores dataset class ``d``; None means the
    identity (output i is class i).
    """

    how: str  # "names", "names-reordered", "count", "label-map"
    dataset_to_model: Optional[tuple[int, ...]] = None
    note: str = ""


def _key_candidates(name: str, space: LabelSpace) -> frozenset[str]:
    if space.kind == "imagenet-1k":
        return imagenet_candidates(name)
    return frozenset([normalize(name)])


def _label_map_hint(num_outputs: int, space: LabelSpace) -> str:
    extra = ""
    if num_outputs == len(space) + 1:
        extra = (
            f" {num_outputs} outputs for {len(space)} classes usually means a background class at output 0 "
            f"(TensorFlow-slim checkpoints): the label map [null, 0, 1, ..., {len(space) - 1}] drops it."
        )
    return (
        f"{extra} To score it anyway, give --label-map FILE (or label_map in the model file): a JSON list with "
        f"one entry per model output, the dataset class (index or name) it means, or null to ignore the output."
    )


def match_labels(
    num_outputs: int,
    model_names: Optional[Sequence[str]],
    space: LabelSpace,
    label_map: Any = None,
    *,
    model: str = "the model",
    dataset: str = "the dataset",
) -> LabelMatch:
    """Check that ``model``'s outputs mean ``dataset``'s classes; return how to read them.

    >>> space = dataset_label_space(["cat", "dog"])
    >>> match_labels(2, ["Dog", "Cat"], space).dataset_to_model
    (1, 0)
    >>> match_labels(2, None, space).how
    'count'
    >>> match_labels(3, None, space, label_map=[None, "cat", 1]).dataset_to_model
    (1, 2)
    """
    if label_map is not None:
        return LabelMatch("label-map", read_label_map(label_map, num_outputs, space))
    if num_outputs != len(space):
        raise LabelSpaceError(
            f"label spaces differ: {model} has {num_outputs} outputs but {dataset} has {space.describe()}."
            + _label_map_hint(num_outputs, space)
        )
    if not model_names_are_informative(model_names):
        return LabelMatch(
            "count",
            None,
            f"{model} carries no label names; its {num_outputs} outputs are taken to be the classes of {dataset}, in order",
        )
    model_names = [str(n) for n in model_names]
    if len(model_names) != num_outputs:
        raise LabelSpaceError(f"{model} has {num_outputs} outputs but {len(model_names)} label names")
    candidates = [_key_candidates(n, space) for n in model_names]
    if all(key in c for key, c in zip(space.keys, candidates)):
        return LabelMatch("names")
    index = {key: d for d, key in enumerate(space.keys)}
    dataset_to_model: dict[int, int] = {}
    problems = []
    for i, (name, c) in enumerate(zip(model_names, candidates)):
        hits = [k for k in c if k in index]
        if len(hits) != 1:
            problems.append(f"output {i} {name!r} " + ("matches no class" if not hits else "is ambiguous"))
            continue
        dataset_to_model.setdefault(index[hits[0]], i)
    missing = [space.names[d] for d in range(len(space)) if d not in dataset_to_model]
    if problems or missing:
        detail = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        if missing:
            detail += ("; " if detail else "") + f"no output for {missing[:5]}"
        raise LabelSpaceError(
            f"label spaces differ: {model}'s label names do not match {dataset}'s {space.describe()}: {detail}."
            + _label_map_hint(num_outputs, space)
        )
    return LabelMatch("names-reordered", tuple(dataset_to_model[d] for d in range(len(space))))


def read_label_map(label_map: Any, num_outputs: int, space: LabelSpace) -> tuple[int, ...]:
    """``dataset_to_model`` from a label map: a list (one entry per output) or ``{output: class}``.

    Entries are dataset class indices or names, or null (output ignored). A path to a JSON file
    is read first. Every dataset class must be named by exactly one output.
    """
    if isinstance(label_map, (str, Path)):
        path = Path(label_map)
        try:
            label_map = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise LabelSpaceError(f"label map file {str(path)!r} does not exist") from None
        except json.JSONDecodeError as e:
            raise LabelSpaceError(f"label map file {str(path)!r} is not valid JSON: {e}") from None
    if isinstance(label_map, dict):
        try:
            pairs = [(int(k), v) for k, v in label_map.items()]
        except ValueError:
            raise LabelSpaceError("label map keys must be model output indices (integers as strings)") from None
    elif isinstance(label_map, (list, tuple)):
        if len(label_map) != num_outputs:
            raise LabelSpaceError(
                f"the label map lists {len(label_map)} entries but the model has {num_outputs} outputs; "
                f"give one entry per output (null to ignore one)"
            )
        pairs = list(enumerate(label_map))
    else:
        raise LabelSpaceError(f"a label map is a JSON list or object, got {type(label_map).__name__}")
    by_key = {key: d for d, key in enumerate(space.keys)}
    by_name = {name: d for d, name in enumerate(space.names)}
    dataset_to_model: dict[int, int] = {}
    for output, target in pairs:
        if not 0 <= output < num_outputs:
            raise LabelSpaceError(f"label map names output {output}, but the model has outputs 0..{num_outputs - 1}")
        if target is None:
            continue
        if isinstance(target, bool) or not isinstance(target, (int, str)):
            raise LabelSpaceError(f"label map entry for output {output} must be a class index, a name or null; got {target!r}")
        if isinstance(target, int):
            if not 0 <= target < len(space):
                raise LabelSpaceError(f"label map sends output {output} to class {target}, outside 0..{len(space) - 1}")
            d = target
        elif target in by_name:
            d = by_name[target]
        else:
            hits = [by_key[k] for k in _key_candidates(target, space) if k in by_key]
            if len(hits) != 1:
                raise LabelSpaceError(f"label map entry {target!r} (output {output}) is not one of the dataset's class names")
            d = hits[0]
        if d in dataset_to_model:
            raise LabelSpaceError(
                f"label map sends outputs {dataset_to_model[d]} and {output} both to class {space.names[d]!r}; "
                f"each class needs exactly one output"
            )
        dataset_to_model[d] = output
    missing = [space.names[d] for d in range(len(space)) if d not in dataset_to_model]
    if missing:
        raise LabelSpaceError(f"label map leaves {len(missing)} dataset classes without an output: {missing[:5]}")
    return tuple(dataset_to_model[d] for d in range(len(space)))
