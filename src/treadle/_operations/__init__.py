"""What the command line and the HTTP server do to runs, over any store.

One layer below both front ends, so ``treadle show`` and ``GET /runs/{id}``
cannot disagree: opening a store from its URL, loading an app, parsing and
checking input, and each operation on a run.
"""
