"""The store conformance suite's part on named API tokens: every backend alike.

Only a token's hash is kept; a revoked or expired token is still found by
its hash (so the server can say why it refuses it), and its last use is
noted at most once a minute.
"""

from __future__ import annotations

import time

import pytest

from treadle._exceptions import CommandError
from treadle._stores._tokens import EndedSessions, TokenKeeper, token_hash


async def test_a_token_is_kept_by_name_and_hash_only(store, tmp_path):
    assert isinstance(store, TokenKeeper)
    secret = "tdl_the-secret-itself-0123456789"  # noqa: S105 - a test token, never a real one
    made = await store.add_token(
        "deploy-bot", "operator", token_hash(secret), created_by="cli:ann@box", expires_at=None
    )
    assert (made.name, made.role, made.created_by) == ("deploy-bot", "operator", "cli:ann@box")
    found = await store.find_token(token_hash(secret))
    assert found is not None
    assert found.name == "deploy-bot"
    assert found.refusal(time.time()) is None
    assert await store.find_token(token_hash("tdl_another")) is None
    assert [t.name for t in await store.list_tokens()] == ["deploy-bot"]
    await store.close()
    for file in tmp_path.iterdir():  # the SQLite file (and its journal) never hold the secret
        assert secret.encode() not in file.read_bytes()


async def test_a_name_is_one_tokens(store):
    await store.add_token("bot", "viewer", token_hash("tdl_one"), created_by="cli:a@b")
    with pytest.raises(CommandError, match="a token named 'bot' exists already"):
        await store.add_token("bot", "admin", token_hash("tdl_two"), created_by="cli:a@b")
    assert [(t.name, t.role) for t in await store.list_tokens()] == [("bot", "viewer")]


async def test_revoked_and_expired_tokens_say_why_they_are_refused(store):
    await store.add_token("gone", "admin", token_hash("tdl_gone"), created_by="cli:a@b")
    past = time.time() - 1
    await store.add_token(
        "old", "admin", token_hash("tdl_old"), created_by="cli:a@b", expires_at=past
    )
    revoked = await store.revoke_token("gone")
    assert revoked.revoked_at is not None
    again = await store.revoke_token("gone")
    assert again.revoked_at == revoked.revoked_at
    now = time.time()
    gone = await store.find_token(token_hash("tdl_gone"))
    old = await store.find_token(token_hash("tdl_old"))
    assert gone is not None
    assert gone.refusal(now) == "the token 'gone' was revoked"
    assert old is not None
    assert old.refusal(now) == "the token 'old' has expired"
    with pytest.raises(CommandError, match="no token is named 'nobody'"):
        await store.revoke_token("nobody")


async def test_a_tokens_last_use_is_noted(store):
    await store.add_token("bot", "viewer", token_hash("tdl_bot"), created_by="cli:a@b")
    assert (await store.list_tokens())[0].last_used_at is None
    before = time.time()
    await store.note_token_use("bot")
    first = (await store.list_tokens())[0].last_used_at
    assert first is not None
    assert first >= before - 1
    await store.note_token_use("bot")  # within the minute: not written again
    assert (await store.list_tokens())[0].last_used_at == first


async def test_a_session_signed_out_is_kept_by_digest_and_run_out_ones_are_swept(store):
    # Sign-out was kept in the serving process only: another process on the store took
    # the session for live for the rest of its hours.
    assert isinstance(store, EndedSessions)
    now = time.time()
    assert not await store.session_ended("d-live")
    await store.end_session("d-run-out", now - 1)  # its time has passed
    await store.end_session("d-live", now + 3600)
    assert await store.session_ended("d-live")
    assert not await store.session_ended("d-run-out"), "a sign-out sweeps the rows run out"
    await store.end_session("d-live", now + 7200)  # signed out twice: one row, no error
    assert await store.session_ended("d-live")
