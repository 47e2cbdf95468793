"""Each model's own preprocessing, done fast, and what decides that two models see the same pixels.

The work is split so that the DataLoader workers do as little as possible and the device does
the rest:

* workers decode the JPEG (libjpeg-turbo, at reduced size in draft mode when the model's input
  is at most half the image: :mod:`.decode`), resize and crop, and hand over uint8 HWC arrays
  (4× less to copy between processes than float32);
* the main process stacks a batch, moves it to the device, and there converts to float,
  normalises and lays it out channels-last (:meth:`Preprocessing.finish`).

For timm models with the usual center-crop eval transform (``crop_mode="center"``, square
input, ``crop_pct <= 1``) :class:`TimmCenterCrop` reproduces timm's transform
(``Resize(floor(img_size / crop_pct))``, ``CenterCrop(img_size)``, ``ToTensor``, ``Normalize``)
to within one grey level. Other timm transforms run timm's own transform (:class:`TimmTransform`);
transformers models run their image processor (:class:`ProcessorTransform`).

:meth:`Preprocessing.key` names the pixels a preprocessing hands over (uint8, before
normalisation, so models that differ only in mean and std share them): models with equal keys
share one decoding pass (:mod:`.shared`).

Draft mode changes pixels. A JPEG decoded at 1/2, 1/4 or 1/8 scale is downsampled inside the
IDCT, not by the antialiased filter of the full-size path, so the model sees slightly different
pixels (typically a few grey levels, mostly at edges). Draft mode is only used when the decoded
image is still at least as large as the resize target in both dimensions (so the final resize
still downsamples), and ``draft=False`` (``--no-draft``) turns it off for bit-exact comparisons
with the reference preprocessing. Every result row records whether it was on.

With ``decode_on="device"`` (the GPU path) the workers hand over the JPEG bytes and
:meth:`TimmCenterCrop.finish` decodes the batch on the device (nvJPEG), resizes, crops and
normalises there.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional

from .decode import (  # noqa: F401 - re-exported: the names of the input path
    INTERPOLATIONS,
    TORCH_INTERPOLATIONS,
    center_crop_offset,
    decode_jpeg_batch,
    decode_rgb,
    draft_decode,
    draft_scale,
    jpeg_header,
    open_image,
    pil_to_tensor,
    resize_then_crop,
    shorter_side_size,
    source_bytes,
    to_rgb,
)
from .loaders import FileFetch, ImageRows, TableFetch, collate, make_loader  # noqa: F401 - re-exported

DECODE_ON = ("workers", "device")


def normalise(batch, mean, std, channels_last: bool):
    """``(x / 255 - mean) / std`` of a uint8 NHWC batch as one multiply and one subtract: float NCHW."""
    import torch

    batch = batch.permute(0, 3, 1, 2)  # NCHW (with channels-last strides unless collated planar)
    scale = torch.tensor([1 / (255 * s) for s in std], device=batch.device).view(1, -1, 1, 1)
    shift = torch.tensor([m / s for m, s in zip(mean, std)], device=batch.device).view(1, -1, 1, 1)
    batch = batch.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)  # in uint8
    threads = torch.get_num_threads()
    if batch.device.type == "cpu" and threads > 1:  # two memory-bound passes: extra threads only spin beside the workers
        torch.set_num_threads(1)
    try:
        return torch.mul(batch, scale).sub_(shift)  # uint8 * float32: converted and scaled in one pass
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


class Preprocessing:
    """One model's preprocessing: ``__call__`` runs in a worker, ``finish`` on the batch on device."""

    output = "uint8-hwc"  # what __call__ returns: "uint8-hwc" arrays or "float-chw" tensors

    def __call__(self, source: Any):  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self, batch, device, channels_last: bool = False):
        """A float NCHW batch on ``device`` from the stacked worker outputs."""
        import torch

        batch = batch.to(device, non_blocking=True)
        if self.output == "uint8-hwc":
            return normalise(batch, self.mean, self.std, channels_last)
        if channels_last:
            return batch.contiguous(memory_format=torch.channels_last)
        return batch.contiguous()

    def key(self) -> str:
        """What decides the pixels ``__call__`` hands over: equal keys, bit-identical outputs."""
        return type(self).__name__

    def output_kind(self) -> str:
        """``pixels`` (arrays of one shape, which a store can keep) or ``encoded`` (JPEG bytes)."""
        return "pixels"

    def describe(self) -> str:
        """A short record of the preprocessing, stored with every result."""
        return type(self).__name__


@dataclass
class TimmCenterCrop(Preprocessing):
    """timm's center-crop eval transform, done in one resize call (optionally from a draft decode).

    >>> import numpy as np
    >>> from pipeline.toys.synthetic import photo_like_jpeg
    >>> t = TimmCenterCrop(img_size=224, crop_pct=0.875, interpolation="bilinear",
    ...                    mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    >>> t(photo_like_jpeg(np.random.default_rng(0))).shape
    torch.Size([224, 224, 3])
    >>> t.key()
    'timm-center-crop 224 from 256 bilinear draft=True decode_on=workers'
    """

    img_size: int
    crop_pct: float
    interpolation: str
    mean: tuple
    std: tuple
    draft: bool = True
    decode_on: str = "workers"

    def __post_init__(self):
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"unknown interpolation {self.interpolation!r}; known: {sorted(INTERPOLATIONS)}")
        if self.decode_on not in DECODE_ON:
            raise ValueError(f"decode_on must be one of {DECODE_ON}, got {self.decode_on!r}")
        self.scale_size = math.floor(self.img_size / self.crop_pct)
        if self.scale_size < self.img_size:
            raise ValueError(f"crop_pct must be <= 1 for a center crop, got {self.crop_pct}")
        self.resample = INTERPOLATIONS[self.interpolation]

    def geometry(self, width: int, height: int) -> tuple[tuple[int, int], tuple[int, int, int]]:
        """``((resized w, h), (left, top, side))`` for an image of ``width`` × ``height``."""
        resized = shorter_side_size(width, height, self.scale_size)
        left, top = center_crop_offset(*resized, self.img_size)
        return resized, (left, top, self.img_size)

    def __call__(self, source: Any):
        data = source_bytes(source)
        header = jpeg_header(data) if data is not None and self.interpolation in TORCH_INTERPOLATIONS else None
        if header is None:
            return self._with_pillow(open_image(source))
        resized, crop = self.geometry(*header)
        scale = draft_scale(header, resized) if self.draft else 1
        if self.decode_on == "device" and scale == 1:
            import torch

            return torch.frombuffer(bytearray(data), dtype=torch.uint8)  # decoded in finish()
        return resize_then_crop(decode_rgb(data, header, scale), resized, crop, self.interpolation)

    def _with_pillow(self, image):
        """Not a YCbCr/grey JPEG (or a Pillow-only filter): Pillow decodes (and resizes)."""
        resized, (left, top, side) = self.geometry(*image.size)
        if self.draft:
            image, _ = draft_decode(image, resized)
        image = to_rgb(image)
        if self.interpolation in TORCH_INTERPOLATIONS:
            return resize_then_crop(image, resized, (left, top, side), self.interpolation)
        # Pillow-only filters: resize the whole image, then crop (exactly timm's steps)
        image = image.resize(resized, self.resample)
        return pil_to_tensor(image.crop((left, top, left + side, top + side)))

    def finish(self, batch, device, channels_last: bool = False):
        if isinstance(batch, (list, tuple)):  # decode_on="device": JPEG bytes and/or pixels
            batch = self.decode_batch(batch, device)
        return super().finish(batch, device, channels_last)

    def decode_batch(self, items, device):
        """Decode the encoded items of a batch in one call on ``device``, resize and crop each: uint8 NHWC."""
        import torch

        encoded = [i for i, item in enumerate(items) if item.dim() == 1]
        decoded = iter(decode_jpeg_batch([items[i].to(device, non_blocking=True) for i in encoded], device) if encoded else [])
        out = []
        for item in items:
            if item.dim() == 1:
                chw = next(decoded)
                resized, crop = self.geometry(chw.shape[2], chw.shape[1])
                out.append(resize_then_crop(chw, resized, crop, self.interpolation, layout="chw"))
            else:
                out.append(item.to(device, non_blocking=True))
        return torch.stack(out)

    def output_kind(self) -> str:
        return "encoded" if self.decode_on == "device" else "pixels"

    def key(self) -> str:
        return (
            f"timm-center-crop {self.img_size} from {self.scale_size} {self.interpolation} "
            f"draft={self.draft} decode_on={self.decode_on}"
        )

    def describe(self) -> str:
        where = ", decoded on the device" if self.decode_on == "device" else ""
        return (
            f"timm center crop {self.img_size} from shorter side {self.scale_size} "
            f"(crop_pct {self.crop_pct}, {self.interpolation}), draft={self.draft}{where}"
        )


class TimmTransform(Preprocessing):
    """Any other timm eval transform, run as timm builds it (uint8 out, normalised on device)."""

    def __init__(self, data_config: dict):
        from timm.data import create_transform

        self.data_config = dict(data_config)
        self.mean, self.std = tuple(data_config["mean"]), tuple(data_config["std"])
        self.transform = create_transform(**self.data_config, is_training=False, use_prefetcher=True)

    def __call__(self, source: Any):
        tensor = self.transform(to_rgb(open_image(source)))  # uint8 CHW
        return tensor.permute(1, 2, 0).contiguous()

    def key(self) -> str:
        config = {k: v for k, v in self.data_config.items() if k not in ("mean", "std")}  # applied in finish()
        return "timm-transform " + json.dumps(config, sort_keys=True, default=str)

    def describe(self) -> str:
        cfg = self.data_config
        return f"timm transform {cfg.get('input_size')} crop_mode={cfg.get('crop_mode')} crop_pct={cfg.get('crop_pct')}"


def _size_field(size, key: str):
    """A field of an image processor's ``size`` (a dict, or transformers' ``SizeDict``)."""
    value = size.get(key) if isinstance(size, dict) else getattr(size, key, None)
    return int(value) if value else None


def processor_target_size(processor) -> Optional[tuple[str, int, int]]:
    """What an image processor resizes to: ``("exact", w, h)`` or ``("shortest", n, n)``; None if unknown."""
    size = getattr(processor, "size", None)
    if not size or not getattr(processor, "do_resize", True):
        return None
    height, width, shortest = (_size_field(size, k) for k in ("height", "width", "shortest_edge"))
    if height and width:
        return "exact", width, height
    if shortest:
        crop_pct = getattr(processor, "crop_pct", None)
        if crop_pct and shortest < 384:  # ConvNext-style: resize to n / crop_pct, then crop n
            shortest = int(shortest / crop_pct)
        return "shortest", shortest, shortest
    return None


class ProcessorTransform(Preprocessing):
    """A transformers image processor, run per image in the workers (float CHW out)."""

    output = "float-chw"

    def __init__(self, processor, draft: bool = True):
        self.processor = processor
        self.draft = draft
        self.target = processor_target_size(processor)

    def __call__(self, source: Any):
        image = open_image(source)
        if self.draft and self.target is not None:
            kind, w, h = self.target
            if kind == "shortest":
                scale = w / min(image.size)
                w, h = math.ceil(image.size[0] * scale), math.ceil(image.size[1] * scale)
            image, _ = draft_decode(image, (w, h))
        return self.processor(images=to_rgb(image), return_tensors="pt")["pixel_values"][0]

    def key(self) -> str:
        """The processor's class and every parameter it saves (normalisation included: it outputs floats)."""
        params = self.processor.to_dict()
        params.pop("processor_class", None)
        return f"processor {type(self.processor).__name__} {json.dumps(params, sort_keys=True, default=str)} draft={self.draft}"

    def describe(self) -> str:
        target = self.target and f"{self.target[0]} {self.target[1]}x{self.target[2]}"
        return f"{type(self.processor).__name__} (resize {target}), draft={self.draft}"


def timm_preprocessing(data_config: dict, draft: bool = True, decode_on: str = "workers") -> Preprocessing:
    """The fast center-crop path where timm's config allows it, else timm's own transform."""
    _, height, width = data_config["input_size"]
    crop_pct = data_config.get("crop_pct") or 0.875
    if (
        data_config.get("crop_mode", "center") == "center"
        and height == width
        and crop_pct <= 1
        and not data_config.get("crop_border_pixels")
        and data_config.get("interpolation", "bilinear") in INTERPOLATIONS
    ):
        return TimmCenterCrop(
            img_size=height,
            crop_pct=crop_pct,
            interpolation=data_config.get("interpolation", "bilinear"),
            mean=tuple(data_config["mean"]),
            std=tuple(data_config["std"]),
            draft=draft,
            decode_on=decode_on,
        )
    return TimmTransform(data_config)
