"""The review stage: the final human review of a revision, in the browser, and near-duplicate confirmation.

Modules: ``session`` (load and check the pool, the revision and the review folder), ``state``
(one mark at a time, under a lock, written atomically), ``carry_over`` (start from an earlier
review), ``images`` (images by id only), ``neighbours`` (the near-duplicate search's output),
``server`` (the Starlette app), ``static/`` (the pages: plain HTML, CSS and JavaScript).
The review folder's format is :mod:`pipeline.rebuild.review_folder`, shared with ``sample``.
"""
