"""Framing of stored blobs: a header and a digest around every serialized payload.

Layout (30 bytes of header, then the payload)::

    offset  size  field
    0       4     magic b"TRDL": refuses data some other program wrote
    4       1     format version (1)
    5       1     algorithm: 1 = BLAKE2b-128, 2 = BLAKE2b-128 keyed with a secret
    6       8     payload length, big-endian: tells truncation from tampering
    14      16    digest of bytes 0-13 and the payload
    30      n     payload

With a key, the digest is a MAC: only holders of the key can write blobs that
verify. A reader given a key refuses unkeyed blobs, so a writer without the key
cannot downgrade the check.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from treadle._exceptions import CheckpointCorruptError

MAGIC = b"TRDL"
"""First four bytes of every blob treadle writes."""

FORMAT_VERSION = 1
"""Version of the layout above; readers refuse versions they do not know."""

_PLAIN = 1
_KEYED = 2
_HEADER = struct.Struct(">4sBBQ")
_DIGEST_SIZE = 16
_PREFIX_SIZE = _HEADER.size + _DIGEST_SIZE
_PERSON = b"treadle-blob"  # domain separation from other BLAKE2b uses of the same key
_MAX_KEY = 64


def seal(payload: bytes, *, key: bytes | None = None) -> bytes:
    """Frame ``payload`` with a header and a digest so corruption is detected on read.

    Args:
        payload: Serialized bytes to store.
        key: Optional secret (1 to 64 bytes, e.g. ``secrets.token_bytes(32)``).
            With it the digest is keyed, so the store cannot forge or alter
            blobs without being detected.

    Returns:
        The blob to store: header, digest, then ``payload``.

    Raises:
        ValueError: ``key`` is empty or longer than 64 bytes.
    """
    _check_key(key)
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, _PLAIN if key is None else _KEYED, len(payload))
    return header + _digest(header, payload, key) + payload


def unseal(blob: bytes, *, key: bytes | None = None, run_id: str, checkpoint_id: str) -> bytes:
    """Verify a blob written by :func:`seal` and return its payload.

    Args:
        blob: The stored bytes.
        key: The key the blob was sealed with, or ``None`` if it was sealed
            without one.
        run_id: Run the blob belongs to, named in any error.
        checkpoint_id: Checkpoint the blob belongs to, named in any error.

    Returns:
        The payload exactly as given to :func:`seal`.

    Raises:
        CheckpointCorruptError: The blob is foreign, of an unknown version,
            truncated, or fails its digest. Nothing else is raised for bad data.
        ValueError: ``key`` is empty or longer than 64 bytes.
    """
    _check_key(key)

    def corrupt(reason: str) -> CheckpointCorruptError:
        return CheckpointCorruptError(run_id, checkpoint_id, reason)

    if blob[:4] != MAGIC[: len(blob)]:
        raise corrupt("not a treadle blob (no TRDL header): foreign data")
    if len(blob) < _PREFIX_SIZE:
        raise corrupt(f"truncated: {len(blob)} bytes, shorter than the {_PREFIX_SIZE}-byte header")
    _, version, algorithm, length = _HEADER.unpack_from(blob)
    if version != FORMAT_VERSION:
        raise corrupt(f"unknown format version {version} (this treadle reads {FORMAT_VERSION})")
    if algorithm not in (_PLAIN, _KEYED):
        raise corrupt(f"unknown digest algorithm {algorithm}")
    payload = blob[_PREFIX_SIZE:]
    if len(payload) != length:
        found = "truncated" if len(payload) < length else "has trailing bytes"
        raise corrupt(f"{found}: header says {length} payload bytes, found {len(payload)}")
    if algorithm == _KEYED and key is None:
        raise corrupt("sealed with a key, but none was given to verify it")
    if algorithm == _PLAIN and key is not None:
        raise corrupt("sealed without a key, but a key was given: unkeyed blobs are refused")
    expected = _digest(blob[: _HEADER.size], payload, key)
    if not hmac.compare_digest(expected, blob[_HEADER.size : _PREFIX_SIZE]):
        if key is None:
            raise corrupt("digest mismatch: the data was altered")
        raise corrupt("digest mismatch: the data was altered, or the key is not the sealing key")
    return payload


def _digest(header: bytes, payload: bytes, key: bytes | None) -> bytes:
    h = hashlib.blake2b(header, digest_size=_DIGEST_SIZE, key=key or b"", person=_PERSON)
    h.update(payload)
    return h.digest()


def _check_key(key: bytes | None) -> None:
    if key is not None and not 0 < len(key) <= _MAX_KEY:
        raise ValueError(f"key must be 1 to {_MAX_KEY} bytes, not {len(key)}")
