"""Graphs of executors and the builder that validates them."""
