"""The stages of a rebuild, in the order a maintainer runs them.

Data models shared by the stages live in their own modules (``pool``, ``tables``, ``revision``,
``classes``); every stage (``search``, ``download``, ``tasks``, ``ingest``,
``selection_frequency``, ``near_duplicates``, ``sample``, ``review``, ``build_set``) imports those
and ``pipeline.core``, never another stage. The sampling rules (``sampling_rules``) are pure
functions on arrays that the ``sample`` stage and the toys' simulation call.

May import: ``pipeline.core``, ``imagenetv2`` (its class list and variant table), ``metrics``.
"""
