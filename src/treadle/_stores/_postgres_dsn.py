"""Showing a PostgreSQL DSN without its passwords, in reprs and error messages."""

from __future__ import annotations

import re

import psycopg
from psycopg.conninfo import conninfo_to_dict

# What hides a password in a DSN: in a URI's user info or query, or as a keyword.
_URI_USER_INFO = re.compile(r"^(?P<head>[a-z][a-z0-9+.-]*://[^:@/]*):[^@/]*@", re.IGNORECASE)
_URI_SECRET = re.compile(r"(?P<head>[?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
_KEYWORD_SECRET = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)")
HIDDEN = "***"


def redact(dsn: str) -> tuple[str, tuple[str, ...]]:
    """``dsn`` with its passwords hidden, and the passwords, to hide them anywhere.

    Raises:
        ValueError: ``dsn`` is not a libpq connection string.
    """
    try:
        parameters = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        # libpq's complaint quotes the DSN, and so possibly its password.
        raise ValueError(
            "dsn is not a PostgreSQL connection string (a URI such as "
            "postgresql://user@host/db, or key=value pairs); it is not repeated "
            "here as it may hold a password"
        ) from None
    secrets = tuple(
        str(parameters[key]) for key in ("password", "sslpassword") if parameters.get(key)
    )
    if "://" in dsn:
        shown = _URI_SECRET.sub(
            rf"\g<head>{HIDDEN}", _URI_USER_INFO.sub(rf"\g<head>:{HIDDEN}@", dsn)
        )
    else:
        shown = _KEYWORD_SECRET.sub(rf"\g<head>{HIDDEN}", dsn)
    for secret in secrets:  # whatever spelling the patterns missed
        shown = shown.replace(secret, HIDDEN)
    return shown, secrets
