"""Publishing: a Hub-ready folder as a tagged *release* of a Hub dataset repository, and the metric Space.

``check`` (is the folder loadable and does its card tell the truth), ``plan`` (what a push would
upload, delete and change, compared with the previous release), ``push`` (one commit, then the
tag), ``hub`` (credentials, redaction, names), ``metric_space`` (the metric as a Gradio Space).
A published Hub tag is a *release*; "revision" means a sampling output of the rebuild.

May import: ``pipeline.core``, ``huggingface_hub``, ``datasets``. Not the rebuild stages.
"""
