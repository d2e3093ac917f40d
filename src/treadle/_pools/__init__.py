"""Executor pools: where chosen handlers run when not in the run's own process."""
