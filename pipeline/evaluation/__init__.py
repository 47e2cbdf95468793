"""Scoring image classifiers on an original test set and its replication (``python -m pipeline evaluate``).

Modules: :mod:`.models` (model records, loading timm and transformers models),
:mod:`.labels` (label-space checks), :mod:`.datasets_spec` (``PATH_OR_HUB_ID[:CONFIG][@SPLIT]``),
:mod:`.sampling` (``--limit``: a seeded sample spread over the classes), :mod:`.decode` (JPEG
decoders, resize kernels), :mod:`.inputs` (each model's preprocessing and its key),
:mod:`.loaders` (rows, DataLoader, batch sources), :mod:`.shared` (one decoding pass for the
models that share preprocessing), :mod:`.predict` (device, precision, top-k, OOM retry),
:mod:`.jobs` (one (model, dataset) job: options, scoring, rows; used by both runners),
:mod:`.runner` (planning, resume, the local run, aggregation), :mod:`.distributed` (Ray),
:mod:`.output` (the output folder), :mod:`.extra` (the eval extra check), :mod:`.results`
(the declared result columns, files, fits), :mod:`.plot` (fit.png). Nothing here imports torch
at import time of the package.
"""
