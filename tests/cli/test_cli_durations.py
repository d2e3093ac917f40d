"""Durations a person gives are finite and at most a hundred years, where they are given.

A token, a link or a webhook's links given ``--expires 999999999999d`` were
stored, then every command that showed the expiry failed turning it into a
date: the token's secret was never printed, its name was taken, and
``treadle tokens list`` failed for good. Such a duration is refused before
anything is stored; a time stored that way before is shown as the last date
there is.
"""

from __future__ import annotations

import asyncio

import pytest
from treadle_cli import Cli

from treadle.stores import SqliteStore

pytestmark = pytest.mark.integration


def test_a_token_lasting_longer_than_a_hundred_years_is_refused_and_nothing_is_stored(tmp_path):
    cli = Cli(tmp_path)
    done = cli("tokens", "create", "ops", "--role", "operator", "--expires", "999999999999d")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "more than the hundred years a duration may be" in done.stderr
    assert "Traceback" not in done.stderr
    made = cli("tokens", "create", "ops", "--role", "operator", "--expires", "30d")
    assert made.returncode == 0, made.stderr  # the name was not taken


def test_an_expiry_stored_past_any_date_is_listed_as_the_last_date(tmp_path):
    cli = Cli(tmp_path)
    assert cli("tokens", "create", "ops", "--role", "operator").returncode == 0

    async def stored_by_an_earlier_treadle() -> None:
        store = SqliteStore(cli.db)
        try:
            await store.add_token("old", "viewer", "0" * 64, created_by="test", expires_at=1e20)
        finally:
            await store.close()

    asyncio.run(stored_by_an_earlier_treadle())
    listed = cli("tokens", "list")
    assert listed.returncode == 0, listed.stderr
    assert "9999-12-31" in listed.stdout
