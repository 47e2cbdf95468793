"""Exact top-k search under squared Euclidean distance, in chunks, with memory bounded by a budget.

The queries and the references are lists of :class:`~.features.Segment` (rows of memory-mapped
shards on disk). A block of queries and a chunk of references are read at a time, converted to
float32 (minus ``center``, which leaves distances unchanged and keeps float32 sums accurate on
pixel values), and searched exhaustively: with FAISS's exact ``knn`` on the CPU, or with torch on
a GPU. Per-chunk results are merged into the running top-k exactly (FAISS's ``ResultHeap``), so
the answer is the exact top-k whatever the chunking, and memory depends on the budget and the
dimension only, never on the number of references. :func:`search_with_ray` splits the
references into shards searched as Ray tasks and merges their top-k the same way.

>>> import numpy as np, tempfile, pathlib
>>> from .features import RowReader, Segment
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> np.save(root / "q.npy", np.array([[0, 0], [5, 5]], np.float32))
>>> np.save(root / "r.npy", np.array([[1, 0], [4, 4], [9, 9]], np.float32))
>>> D, I = search_top_k([Segment(str(root / "q.npy"))], [Segment(str(root / "r.npy"))], 2)
>>> D.tolist(), I.tolist()
([[1.0, 32.0], [2.0, 32.0]], [[0, 1], [1, 2]])
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator, Sequence

import numpy as np

from .features import RowReader, Segment

logger = logging.getLogger(__name__)

DEFAULT_MEMORY_MB = 1024
MARGIN = 2  # extra neighbours FAISS keeps per chunk, for ties its float32 sums cannot tell apart


def total_rows(segments: Sequence[Segment]) -> int:
    return sum(len(s) for s in segments)


def iter_chunks(segments: Sequence[Segment], rows: int, center: float = 0.0) -> Iterator[tuple[int, np.ndarray]]:
    """``(global start, float32 rows - center)`` over the concatenated segments, ``rows`` at a time.

    The rows are read from the memory-mapped shards straight into one reused float32 buffer (the
    block yielded is overwritten by the next one).
    """
    total = total_rows(segments)
    buffer = np.empty((min(rows, total), segments[0].dim() if segments else 0), np.float32)
    start, filled = 0, 0
    for segment in segments:
        n, at = len(segment), 0
        while at < n:
            take = min(rows - filled, n - at)
            segment.read_into(at, at + take, buffer[filled : filled + take])
            filled += take
            at += take
            if filled == len(buffer) or start + filled == total:
                block = buffer[:filled]
                if center:
                    block -= np.float32(center)
                yield start, block
                start += filled
                filled = 0


def chunk_rows(dim: int, memory_bytes: int) -> tuple[int, int]:
    """Query rows and reference rows per block for ``memory_bytes`` (a quarter and a half of it)."""
    per_row = dim * 6  # the float32 copy plus the stored rows it is made from (uint8 or float16)
    return max(1, memory_bytes // 4 // per_row), max(1, memory_bytes // 2 // per_row)


def _knn_cpu(q: np.ndarray, r: np.ndarray, k: int):
    import faiss

    return faiss.knn(q, r, min(k, len(r)))


def _knn_torch(q: np.ndarray, r: np.ndarray, k: int, device: str):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # exact float32 products
    qt, rt = torch.from_numpy(q).to(device), torch.from_numpy(r).to(device)
    d = (qt * qt).sum(1, keepdim=True) + (rt * rt).sum(1)[None] - 2.0 * (qt @ rt.T)
    d.clamp_(min=0)
    values, index = torch.topk(d, min(k, len(r)), dim=1, largest=False)
    return values.cpu().numpy(), index.cpu().numpy().astype(np.int64)


def _sum_of_squares(diff: np.ndarray) -> np.ndarray:
    """Row sums of squares: float32 over blocks of 256 (exact for pixel differences: each block
    stays below 2**24), the blocks summed in float64."""
    if diff.shape[1] % 256:
        return np.einsum("ij,ij->i", diff, diff, dtype=np.float64)
    blocks = diff.reshape(len(diff), -1, 256)
    return np.einsum("ijk,ijk->ij", blocks, blocks).sum(axis=1, dtype=np.float64)


def _rerank(q: np.ndarray, I: np.ndarray, references, offset: int, center: float, memory_bytes: int):
    """Exact float64 squared distances of the pairs ``(query row, I[row, j])``, each row sorted.

    FAISS sums 196,608 float32 values, which drifts by up to a percent; the pairs it kept are
    re-measured here from the stored rows: float32 differences (exact for pixels, which are
    integers) squared and summed in float64.
    """
    D = np.full(I.shape, np.inf)
    reader = RowReader(references)
    shifted = np.empty(q.shape[1], np.float32)
    buffer = np.empty((I.shape[1], q.shape[1]), np.float32)
    try:
        for row in range(len(q)):
            chosen = np.flatnonzero(I[row] >= 0)
            if not len(chosen):
                continue
            np.add(q[row], np.float32(center), out=shifted)
            diff = buffer[: len(chosen)]
            np.subtract(reader.rows(I[row, chosen] - offset), shifted, out=diff, casting="unsafe")
            D[row, chosen] = _sum_of_squares(diff)
    finally:
        reader.close()
    order = np.argsort(D, axis=1, kind="stable")
    D, I = np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)
    I[~np.isfinite(D)] = -1
    return D, I


def _merge(heap, D: np.ndarray, I: np.ndarray, offset: int, k: int, exclude: np.ndarray | None) -> None:
    I = I.astype(np.int64)
    valid = I >= 0
    I = np.where(valid, I + offset, -1)
    D = np.where(valid, D, np.inf).astype(np.float32)
    if exclude is not None:
        own = I == exclude[:, None]
        D = np.where(own, np.float32(np.inf), D)
        I = np.where(own, -1, I)
    D, I = D[:, :k], I[:, :k]
    if D.shape[1] < k:
        D = np.pad(D, ((0, 0), (0, k - D.shape[1])), constant_values=np.inf)
        I = np.pad(I, ((0, 0), (0, k - I.shape[1])), constant_values=-1)
    heap.add_result(np.ascontiguousarray(D), np.ascontiguousarray(I))


def search_top_k(
    queries: Sequence[Segment],
    references: Sequence[Segment],
    k: int,
    *,
    exclude: np.ndarray | None = None,
    memory_bytes: int = DEFAULT_MEMORY_MB << 20,
    center: float = 0.0,
    device: str = "cpu",
    reference_offset: int = 0,
    progress=None,
    timings: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``k`` nearest references of every query: ``(squared distances, global indices)``.

    ``exclude[q]`` is a global reference index that query ``q`` must not get (itself), or -1.
    Indices are ``reference_offset`` plus the position in ``references``; -1 (distance inf)
    pads rows when there are fewer than ``k`` references.
    """
    import faiss

    if k < 1:
        raise ValueError(f"--top-k must be at least 1, got {k}")
    n_queries, n_refs = total_rows(queries), total_rows(references)
    D_all = np.full((n_queries, k), np.inf)
    I_all = np.full((n_queries, k), -1, np.int64)
    if n_queries == 0 or n_refs == 0:
        return D_all, I_all
    dim = int(np.load(queries[0].path, mmap_mode="r").shape[1])
    q_rows, r_rows = chunk_rows(dim, memory_bytes)
    bar = progress(total=-(-n_queries // q_rows) * -(-n_refs // r_rows), desc="search", unit="chunk") if progress else None
    wanted = k + MARGIN + (1 if exclude is not None else 0)  # FAISS ranks in float32; the kept ones are re-measured exactly
    for q_start, q in iter_chunks(queries, q_rows, center):
        q = q.copy()  # the reference chunks reuse their own buffer; this block stays
        own = None if exclude is None else exclude[q_start : q_start + len(q)]
        heap = faiss.ResultHeap(len(q), wanted)
        for r_start, r in iter_chunks(references, r_rows, center):
            D, I = _knn_cpu(q, r, wanted) if device == "cpu" else _knn_torch(q, r, wanted, device)
            _merge(heap, D, I, reference_offset + r_start, wanted, own)
            if bar is not None:
                bar.update(1)
        heap.finalize()
        I = heap.I[:, : k + MARGIN].copy()  # the own row was left out in the merge: k + MARGIN are enough
        I[heap.D[:, : k + MARGIN] >= np.finfo(np.float32).max] = -1
        started = time.perf_counter()
        D, I = _rerank(q, I, references, reference_offset, center, memory_bytes)
        if timings is not None:
            timings["remeasure"] = timings.get("remeasure", 0.0) + time.perf_counter() - started
        D_all[q_start : q_start + len(q)] = D[:, :k]
        I_all[q_start : q_start + len(q)] = I[:, :k]
    if bar is not None:
        bar.close()
    D_all[I_all < 0] = np.inf
    return D_all, I_all


def split_segments(segments: Sequence[Segment], parts: int) -> list[tuple[int, list[Segment]]]:
    """``parts`` contiguous shards of the rows: ``(offset, segments)`` each."""
    n = total_rows(segments)
    bounds = np.linspace(0, n, max(1, min(parts, n)) + 1).astype(int)
    shards = []
    flat = [(s, len(s)) for s in segments]
    for lo, hi in itertools.pairwise(bounds):
        pieces, position = [], 0
        for segment, rows in flat:
            a, b = max(lo, position), min(hi, position + rows)
            if a < b:
                index = segment.rows if segment.rows is not None else np.arange(rows)
                pieces.append(Segment(segment.path, index[a - position : b - position]))
            position += rows
        shards.append((int(lo), pieces))
    return shards


def search_with_ray(address: str, queries, references, k: int, *, shards: int = 0, **options) -> tuple[np.ndarray, np.ndarray]:
    """:func:`search_top_k` with the references split into shards searched as Ray tasks, merged exactly.

    ``address`` is a Ray cluster address (``ray://host:10001``, ``auto``) or ``local`` for a
    Ray instance started here. Every node must see the feature cache at the same path (a shared
    file system). ``shards`` defaults to the cluster's CPU count.
    """
    import ray

    started = not ray.is_initialized()
    if started:
        if address == "local":
            ray.init(num_cpus=options.pop("num_cpus", None), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    options.pop("num_cpus", None)
    options.pop("progress", None)
    try:
        parts = shards or max(1, int(ray.cluster_resources().get("CPU", 1)))
        task = ray.remote(_shard_task)
        pieces = split_segments(references, parts)
        futures = [task.remote(queries, piece, k, offset, options) for offset, piece in pieces]
        results = ray.get(futures)
        D = np.concatenate([d for d, _ in results], axis=1)
        I = np.concatenate([i for _, i in results], axis=1)
        order = np.argsort(D, axis=1, kind="stable")[:, :k]  # shards are in reference order: ties as in one pass
        D, I = np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)
        I[~np.isfinite(D)] = -1
        logger.info("ray: %d reference shards merged", len(pieces))
        return D, I
    finally:
        if started:
            ray.shutdown()


def _shard_task(queries, references, k, offset, options):
    return search_top_k(queries, references, k, reference_offset=offset, **options)
