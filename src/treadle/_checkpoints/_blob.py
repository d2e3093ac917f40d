"""Framing of stored blobs: a header and a digest around every serialized payload.

Layout of version 1 (30 bytes of header, then the payload), which pieces use::

    offset  size  field
    0       4     magic b"TRDL": refuses data some other program wrote
    4       1     format version (1)
    5       1     algorithm: 1 = BLAKE2b-128, 2 = BLAKE2b-128 keyed with a secret
    6       8     payload length, big-endian: tells truncation from tampering
    14      16    digest of bytes 0-13 and the payload
    30      n     payload

Version 2 (22 bytes of header), which checkpoint frames use, is *bound* to
the run it belongs to: the digest covers the run's id, which the blob does
not hold (the row beside it does), so a frame read as another run's fails
its check. It drops the length, which a digest already checks::

    0       4     magic b"TRDL"
    4       1     format version (2)
    5       1     algorithm, as in version 1
    6       16    digest of bytes 0-5, the run id (UTF-8, its length first) and the payload
    22      n     payload

A parked run keeps two frames, so these bytes are a good share of what it
costs to store (``idle_runs`` in ``benchmarks/``).

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

BOUND_VERSION = 2
"""Version of the layout bound to a run (checkpoint frames)."""

_PLAIN = 1
_KEYED = 2
_HEADER = struct.Struct(">4sBBQ")
_BOUND_HEADER = struct.Struct(">4sBB")
_DIGEST_SIZE = 16
_PREFIX_SIZE = _HEADER.size + _DIGEST_SIZE
_BOUND_PREFIX_SIZE = _BOUND_HEADER.size + _DIGEST_SIZE
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


def seal_bound(payload: bytes, run_id: str, *, key: bytes | None = None) -> bytes:
    """Frame ``payload`` as :func:`seal` does, bound to ``run_id`` (version 2, see above).

    Raises:
        ValueError: ``key`` is empty or longer than 64 bytes.
    """
    _check_key(key)
    header = _BOUND_HEADER.pack(MAGIC, BOUND_VERSION, _PLAIN if key is None else _KEYED)
    return header + _digest(header + _bound_to(run_id), payload, key) + payload


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
    version = blob[4] if len(blob) > 4 else FORMAT_VERSION  # noqa: PLR2004 - the magic's length
    bound = version == BOUND_VERSION
    prefix = _BOUND_PREFIX_SIZE if bound else _PREFIX_SIZE
    if len(blob) < prefix:
        raise corrupt(f"truncated: {len(blob)} bytes, shorter than the {prefix}-byte header")
    if version not in (FORMAT_VERSION, BOUND_VERSION):
        raise corrupt(
            f"unknown format version {version} "
            f"(this treadle reads {FORMAT_VERSION} and {BOUND_VERSION})"
        )
    algorithm = blob[5]
    if algorithm not in (_PLAIN, _KEYED):
        raise corrupt(f"unknown digest algorithm {algorithm}")
    payload = blob[prefix:]
    if bound:
        header = blob[: _BOUND_HEADER.size]
        signed = header + _bound_to(run_id)
    else:
        header = signed = blob[: _HEADER.size]
        (length,) = _LENGTH.unpack_from(blob, 6)
        if len(payload) != length:
            found = "truncated" if len(payload) < length else "has trailing bytes"
            raise corrupt(f"{found}: header says {length} payload bytes, found {len(payload)}")
    if algorithm == _KEYED and key is None:
        raise corrupt("sealed with a key, but none was given to verify it")
    if algorithm == _PLAIN and key is not None:
        raise corrupt("sealed without a key, but a key was given: unkeyed blobs are refused")
    expected = _digest(signed, payload, key)
    if not hmac.compare_digest(expected, blob[len(header) : prefix]):
        altered = "the data was altered"
        if bound:  # its run's id is part of what is checked
            altered += f" or belongs to another run than {run_id!r}"
        if key is None:
            raise corrupt(f"digest mismatch: {altered}")
        raise corrupt(f"digest mismatch: {altered}, or the key is not the sealing key")
    return payload


_LENGTH = struct.Struct(">Q")


def _bound_to(run_id: str) -> bytes:
    """What binds a version 2 blob to its run: the id, its length first (no id is a prefix)."""
    encoded = run_id.encode()
    return len(encoded).to_bytes(4, "big") + encoded


def _digest(header: bytes, payload: bytes, key: bytes | None) -> bytes:
    h = hashlib.blake2b(header, digest_size=_DIGEST_SIZE, key=key or b"", person=_PERSON)
    h.update(payload)
    return h.digest()


def _check_key(key: bytes | None) -> None:
    if key is not None and not 0 < len(key) <= _MAX_KEY:
        raise ValueError(f"key must be 1 to {_MAX_KEY} bytes, not {len(key)}")
