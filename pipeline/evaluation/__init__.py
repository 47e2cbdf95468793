"""Scoring image classifiers on an original test set and its replication (``python -m pipeline evaluate``).

Modules: :mod:`.models` (model records, loading timm and transformers models),
:mod:`.labels` (label-space checks), :mod:`.datasets_spec` (``PATH_OR_HUB_ID[:CONFIG][@SPLIT]``),
:mod:`.inputs` (fast decoding and preprocessing), :mod:`.runner` (scoring, resume, OOM retry),
:mod:`.results` (the declared result columns, files, fits), :mod:`.plot` (fit.png),
:mod:`.distributed` (Ray). Nothing here imports torch at import time of the package.
"""
