"""The command line, ``python -m pipeline <command>``: one module per command.

Each module provides ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int`` and
imports its heavy dependencies inside ``run``, so that ``--help`` starts fast. The registry, in
the order a rebuild runs, is ``COMMANDS`` in ``pipeline/__main__.py``.

May import: every other part of ``pipeline`` and the dataset packages; nothing imports it.
"""
