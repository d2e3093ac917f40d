"""Fixtures every test folder shares: PostgreSQL schemas and the store backends."""

pytest_plugins = ["postgres", "store_backends"]
