"""Fixtures every test folder shares: the store backends and the PostgreSQL helpers."""

pytest_plugins = ["store_backends"]
