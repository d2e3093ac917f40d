from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treadle._checkpoints._blob import (
    BOUND_VERSION,
    FORMAT_VERSION,
    MAGIC,
    seal,
    seal_bound,
    unseal,
)
from treadle._exceptions import CheckpointCorruptError

RUN, CHECKPOINT = "run-7", "ckpt-3"
KEY = b"k" * 32
keys = st.none() | st.binary(min_size=1, max_size=64)


def _unseal(blob: bytes, key: bytes | None = None) -> bytes:
    return unseal(blob, key=key, run_id=RUN, checkpoint_id=CHECKPOINT)


def _refused(
    blob: bytes, key: bytes | None = None, match: str | None = None
) -> CheckpointCorruptError:
    with pytest.raises(CheckpointCorruptError, match=match) as raised:
        _unseal(blob, key)
    error = raised.value
    assert (error.run_id, error.checkpoint_id) == (RUN, CHECKPOINT)
    assert repr(RUN) in str(error)
    assert repr(CHECKPOINT) in str(error)
    return error


@given(payload=st.binary(), key=keys)
def test_round_trip_with_and_without_a_key(payload, key):
    blob = seal(payload, key=key)
    assert blob.startswith(MAGIC + bytes([FORMAT_VERSION]))
    assert blob.endswith(payload)
    assert _unseal(blob, key) == payload


@given(payload=st.binary(max_size=64), key=keys, data=st.data())
def test_flipping_any_byte_is_detected(payload, key, data):
    blob = bytearray(seal(payload, key=key))
    position = data.draw(st.integers(0, len(blob) - 1), label="position")
    blob[position] ^= data.draw(st.integers(1, 255), label="xor")
    _refused(bytes(blob), key)


@given(payload=st.binary(max_size=64), key=keys)
def test_truncating_at_any_length_is_detected(payload, key):
    blob = seal(payload, key=key)
    for length in range(len(blob)):
        _refused(blob[:length], key)


def test_truncation_and_trailing_bytes_are_named():
    blob = seal(b"payload")
    _refused(blob[:-1], match="truncated: header says 7 payload bytes, found 6")
    _refused(blob[:10], match="truncated: 10 bytes")
    _refused(blob + b"x", match="trailing bytes")


def test_altered_payload_is_a_digest_mismatch():
    blob = seal(b"payload")
    _refused(blob[:-1] + b"X", match="digest mismatch: the data was altered$")


def test_a_wrong_key_is_detected_and_suggested():
    blob = seal(b"payload", key=KEY)
    _refused(blob, b"x" * 32, match="or the key is not the sealing key")


def test_a_keyed_blob_needs_its_key_and_a_key_refuses_unkeyed_blobs():
    _refused(seal(b"payload", key=KEY), None, match="sealed with a key, but none was given")
    _refused(seal(b"payload"), KEY, match="sealed without a key")


@pytest.mark.parametrize(
    "blob",
    [b"", b"T", b"{}", b'{"__t":"tuple","v":[]}', pickle.dumps({"a": 1}), b"\x00" * 40],
)
def test_foreign_or_empty_data_is_refused(blob):
    _refused(blob, match="foreign data" if blob[:1] not in (b"", b"T") else "truncated")


def test_an_unknown_version_is_named():
    blob = bytearray(seal(b"payload"))
    blob[4] = 9
    _refused(bytes(blob), match="unknown format version 9")


@given(blob=st.binary(max_size=100), key=keys)
def test_arbitrary_bytes_raise_only_checkpoint_corrupt_error(blob, key):
    _refused(blob, key)


@given(tail=st.binary(max_size=100), key=keys)
def test_arbitrary_bytes_after_the_magic_raise_only_checkpoint_corrupt_error(tail, key):
    _refused(MAGIC + tail, key)


@pytest.mark.parametrize("key", [b"", b"k" * 65])
def test_keys_must_be_1_to_64_bytes(key):
    with pytest.raises(ValueError, match="key must be 1 to 64 bytes"):
        seal(b"x", key=key)
    with pytest.raises(ValueError, match="key must be 1 to 64 bytes"):
        _unseal(seal(b"x"), key)


@given(payload=st.binary(), key=keys)
def test_a_bound_blob_round_trips_for_its_run_only(payload, key):
    blob = seal_bound(payload, RUN, key=key)
    assert blob.startswith(MAGIC + bytes([BOUND_VERSION]))
    assert len(blob) == 22 + len(payload)  # no length: the digest checks it
    assert _unseal(blob, key) == payload
    with pytest.raises(CheckpointCorruptError, match="belongs to another run than 'run-77'"):
        unseal(blob, key=key, run_id="run-77", checkpoint_id=CHECKPOINT)


@given(payload=st.binary(max_size=64), key=keys, data=st.data())
def test_flipping_or_cutting_any_byte_of_a_bound_blob_is_detected(payload, key, data):
    blob = bytearray(seal_bound(payload, RUN, key=key))
    position = data.draw(st.integers(0, len(blob) - 1), label="position")
    if data.draw(st.booleans(), label="cut"):
        _refused(bytes(blob[:position]), key)
    else:
        blob[position] ^= data.draw(st.integers(1, 255), label="xor")
        _refused(bytes(blob), key)


def test_a_bound_blob_keeps_the_key_rules():
    _refused(seal_bound(b"payload", RUN, key=KEY), None, match="sealed with a key, but none")
    _refused(seal_bound(b"payload", RUN), KEY, match="sealed without a key")
    _refused(seal_bound(b"payload", RUN, key=KEY), b"x" * 32, match="not the sealing key")
