"""Running a model over batches: device, precision, top-k predictions, out-of-memory retry."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

logger = logging.getLogger(__name__)

TOP_K = 5
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda`` where torch sees a GPU, else ``cpu``; a missing GPU is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device} asked for, but torch sees no CUDA device; use --device cpu")
    return device


def resolve_precision(precision: str, device: str) -> str:
    """The autocast dtype: fp32 off CUDA; ``auto`` is bf16 where supported, else fp16."""
    import torch

    if not device.startswith("cuda"):
        if precision in ("bf16", "fp16"):
            logger.warning("precision %s is for CUDA; running fp32 on %s", precision, device)
        return "fp32"
    if precision == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return precision


def autocast(device: str, precision: str):
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def is_out_of_memory(error: BaseException) -> bool:
    """CUDA (or other) out-of-memory errors, whatever their class."""
    import torch

    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


@dataclass
class Predictions:
    index: np.ndarray  # row index in the split
    label: np.ndarray
    topk: np.ndarray  # (n, k) dataset class ids, best first
    topk_logits: np.ndarray  # (n, k) float32
    batch_size: int  # that finished
    seconds: float

    def arrays(self) -> dict[str, np.ndarray]:
        return {"index": self.index, "label": self.label, "topk": self.topk, "topk_logits": self.topk_logits}


@dataclass
class Pass:
    """How one model runs over its batches."""

    forward: Callable
    preprocessing: object
    device: str
    precision: str = "fp32"
    reorder: Optional[object] = None  # tensor: dataset class -> model output
    k: int = TOP_K
    channels_last: bool = False

    def step(self, images, labels, index) -> tuple:
        """One batch: normalise on the device, forward under autocast, top-k in dataset classes."""
        import torch

        x = self.preprocessing.finish(images, self.device, self.channels_last)
        with torch.inference_mode(), autocast(self.device, self.precision):
            logits = self.forward(x)
        logits = logits.float()
        if self.reorder is not None:
            logits = logits.index_select(1, self.reorder)
        top = logits.topk(min(self.k, logits.shape[1]), dim=1)
        return index.numpy(), labels.numpy(), top.indices, top.values  # left on the device: no sync per batch


def predict(
    forward: Callable,
    source,
    *,
    preprocessing,
    batch_size: int,
    device: str,
    precision: str = "fp32",
    dataset_to_model: Optional[Sequence[int]] = None,
    k: int = TOP_K,
    channels_last: bool = False,
    desc: str = "",
    progress: bool = True,
) -> Predictions:
    """Top-k predictions for every row of a batch source (:mod:`.loaders`, :mod:`.shared`).

    On out of memory the pass goes on from where it stopped with half the batch size (down to 1).
    """
    import torch
    from tqdm.auto import tqdm

    reorder = None if dataset_to_model is None else torch.as_tensor(list(dataset_to_model), device=device)
    run = Pass(forward, preprocessing, device, precision, reorder, k, channels_last)
    chunks: list[tuple] = []
    start = time.perf_counter()
    bar = tqdm(total=len(source), desc=desc, unit="img", disable=not progress, mininterval=1.0, leave=False)
    try:
        while True:
            done = sum(len(c[0]) for c in chunks)
            try:
                for batch in source.batches(done, batch_size):
                    chunks.append(run.step(*batch))
                    bar.update(len(chunks[-1][0]))
                break
            except Exception as e:
                if not is_out_of_memory(e) or batch_size == 1:
                    raise
            # outside the except block, so the failed batch's tensors are released
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            logger.warning("%s: out of memory at batch size %d; retrying with %d", desc, batch_size, batch_size // 2)
            batch_size //= 2
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    if not chunks:
        raise ValueError("no images to score")
    index, label = (np.concatenate(parts) for parts in list(zip(*chunks))[:2])
    topk, values = (torch.cat(parts).cpu().numpy() for parts in list(zip(*chunks))[2:])
    return Predictions(index.astype(np.int64), label.astype(np.int64), topk.astype(np.int32), values.astype(np.float32), batch_size, seconds)
