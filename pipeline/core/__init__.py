"""The floor: what the dataset packages and every part of the pipeline share, and nothing else.

Integrity (sizes, sha256, known releases, the hashing reader), atomic writes and output
ownership (the marker every command leaves in what it writes), the Hub-ready folder export, and
the builders' error mixin.

May import: the standard library, numpy, pyarrow, ``datasets``, ``huggingface_hub``. Never the
dataset packages (``imagenetv2``, ``cifar10_1``) nor any other part of ``pipeline``.
"""
