"""What the command line gives, made into what commands work on: a store, a workflow, values.

A store URL (``--store``, ``TREADLE_STORE``) becomes a store, never
created by a command that only reads; an app path (``pkg.module:workflow``,
``pkg.module``, ``path/app.py``) becomes a workflow; JSON (an input, an
answer, a message, a state patch; inline or ``@file``) becomes a value.
That JSON is bounded: at most :data:`MAX_JSON_BYTES` and
:data:`MAX_JSON_DEPTH` levels of nested arrays and objects. Beyond either it
is refused as bad input before anything is stored. Errors are
:class:`CommandError`, naming what is at fault.
"""

from __future__ import annotations

import math
import os
import re
from itertools import chain, compress, repeat
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._exceptions import AppLoadError, CommandError, DefinitionError
from treadle._extras import needs_extra
from treadle._scaleout import _apps as apps
from treadle._stores._store import DEFAULT_LEASE
from treadle._values import _strict_json as strict_json
from treadle._workflow._inputs import coerce_input as plain_input

if TYPE_CHECKING:
    from collections.abc import Callable

    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow

_N = TypeVar("_N", int, float)

DEFAULT_STORE = "treadle.sqlite"
"""The store used when neither ``--store`` nor ``TREADLE_STORE`` says otherwise."""

MAX_JSON_BYTES = 16 * 1024 * 1024
"""The largest JSON document (input, answer, message, state patch) a command accepts: 16 MiB."""

MAX_JSON_DEPTH = 256
"""How many levels deep arrays and objects may nest in JSON a command accepts."""

# Which argument of its command each kind of JSON comes from, for the error message.
_ARGUMENT = MappingProxyType(
    {"input": "--input", "answer": "VALUE", "message": "MESSAGE", "state patch": "--patch"}
)


# libpq's key=value connection string (``host=db password=... dbname=x``): one of its
# keywords first, then '='. A path is rarely written so; one that is gets ``./`` before it.
_CONNINFO = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|options)\s*="
)


def open_store(
    url: str | None,
    *,
    lease: float | None = None,
    create: bool = True,
    connections: int | None = None,
) -> Store:
    """The store a URL names: a SQLite path (default) or ``postgresql://...``.

    ``create=False`` (every command that reads or acts on runs already
    stored) refuses a SQLite file that does not exist, naming it, rather
    than creating an empty store in whatever directory the command ran in.

    For PostgreSQL, ``TREADLE_SCHEMA`` names the schema holding the tables,
    and ``connections`` (else ``TREADLE_CONNECTIONS``, else 10) how many
    connections the process's pool may open: what an operator sizes
    against the server's ``max_connections`` when many workers share it.
    On SQLite, ``lease`` (else ``TREADLE_LEASE``, else 30) is how many
    seconds this process's lease on a run lasts without a heartbeat: how
    soon a run whose process died counts as orphaned. (PostgreSQL workers
    take theirs from ``treadle worker --lease``.)

    Raises:
        CommandError: ``TREADLE_LEASE`` is not a positive number, or
            ``TREADLE_CONNECTIONS`` not a whole number of at least 1;
            ``connections`` given for a SQLite store (it has no pool); a
            ``postgresql://`` URL libpq cannot read; with
            ``create=False``, the SQLite file does not exist.
    """
    url = resolved_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        if connections is None:
            connections = connections_from_environment()
        try:
            # psycopg only when asked for; and from its own module, not treadle.stores,
            # which imports the SQLite and in-memory stores too (a worker's start-up).
            from treadle._stores._postgres import PostgresStore  # noqa: PLC0415
        except ImportError as error:
            msg = needs_extra("a postgresql:// store", "postgres", error)
            raise CommandError(msg) from None
        sizes = {} if connections is None else {"max_size": connections}
        try:
            return PostgresStore(url, schema=os.environ.get("TREADLE_SCHEMA") or None, **sizes)
        except ValueError as error:  # libpq cannot read it; the message hides the password
            raise CommandError(f"--store (or TREADLE_STORE): {error}") from None
    if connections is not None:
        msg = "--connections sizes a PostgreSQL store's pool; a SQLite store has none"
        raise CommandError(msg)
    from treadle._stores._sqlite import SqliteStore  # noqa: PLC0415 - a light import

    if _CONNINFO.match(url):  # a file named after it would hold its password in its name
        msg = (
            "--store (or TREADLE_STORE) reads as a PostgreSQL connection string "
            "(key=value ...), which treadle takes only as a postgresql:// URL; "
            "a SQLite store is a file's path"
        )
        raise CommandError(msg)
    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    if not create and not Path(path).exists():
        msg = (
            f"no store at {str(Path(path).resolve())!r}: give --store (or set TREADLE_STORE) "
            f"to the file your runs are in; only `treadle run`, `start` and `worker` create one"
        )
        raise CommandError(msg)
    return SqliteStore(path, lease=lease if lease is not None else lease_from_environment())


async def opened_store(
    url: str | None,
    *,
    lease: float | None = None,
    create: bool = True,
    connections: int | None = None,
) -> Store:
    """:func:`open_store`, and with ``create=False`` a PostgreSQL schema checked to hold a store.

    A PostgreSQL store creates its schema and tables when first used, as a
    SQLite store creates its file: a command that only reads or acts on
    runs stored (``create=False``) refuses a schema without treadle's
    tables (a misspelt ``TREADLE_SCHEMA``) before it is used, rather than
    creating an empty store and finding nothing in it.

    Raises:
        CommandError: as :func:`open_store`; with ``create=False``, the
            PostgreSQL schema holds no treadle store.
    """
    store = open_store(url, lease=lease, create=create, connections=connections)
    if create or not resolved_url(url).startswith(("postgresql://", "postgres://")):
        return store
    import psycopg  # noqa: PLC0415 - the postgres extra, which opening the store needed

    from treadle._stores._postgres import PostgresStore  # noqa: PLC0415

    assert isinstance(store, PostgresStore)  # noqa: S101 - open_store made it from the URL
    schema = store.schema
    quoted = "" if schema is None else '"' + schema.replace('"', '""') + '".'
    try:
        async with await psycopg.AsyncConnection.connect(resolved_url(url)) as connection:
            query = await connection.execute("SELECT to_regclass(%s)", (f"{quoted}treadle_schema",))
            found = await query.fetchone()
    except psycopg.Error:
        return store  # unreachable, refused, ...: the store says so, its password hidden
    if found is None or found[0] is None:
        where = "its search_path" if schema is None else f"schema {schema!r}"
        msg = (
            f"no treadle store in {where} of {store!r}: set TREADLE_SCHEMA to the schema your "
            "runs are in; only `treadle run`, `start`, `worker` and `serve` create one"
        )
        await store.close()
        raise CommandError(msg)
    return store


def resolved_url(url: str | None) -> str:
    """The store URL a command uses: ``--store``, else ``TREADLE_STORE``, else the default."""
    return url or os.environ.get("TREADLE_STORE") or DEFAULT_STORE


def lease_from_environment() -> float:
    """``TREADLE_LEASE`` in seconds, or 30.

    Raises:
        CommandError: It is not a positive number.
    """
    lease = _number_from_environment(
        "TREADLE_LEASE", float, lambda lease: 0 < lease < math.inf, "a positive number of seconds"
    )
    return DEFAULT_LEASE if lease is None else lease


def connections_from_environment() -> int | None:
    """``TREADLE_CONNECTIONS``, or ``None`` (the store's own default, 10).

    Raises:
        CommandError: It is not a whole number of at least 1.
    """
    return _number_from_environment(
        "TREADLE_CONNECTIONS",
        int,
        lambda count: count >= 1,
        "a whole number of connections, at least 1",
    )


def _number_from_environment(
    name: str, parse: Callable[[str], _N], valid: Callable[[_N], bool], expected: str
) -> _N | None:
    """The environment variable ``name`` read as a number, or ``None`` when unset or empty."""
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        number = parse(raw)
    except ValueError:
        number = None
    if number is None or not valid(number):
        msg = f"{name} must be {expected}, got {raw!r}"
        raise CommandError(msg)
    return number


def load_workflow(spec: str) -> Workflow:
    """The workflow an app path names, its path kept as the workflow's origin.

    ``pkg.module:workflow``; ``pkg.module`` when the module holds workflows
    of one name (the newest version of it: older ones kept beside it are for
    the runs they started); a file, ``path/to/app.py[:workflow]``, the same
    way; or a definition file, ``path/to/flow.yaml`` (or ``.yml``,
    ``.json``). Every command picks its workflow here
    (:func:`treadle._scaleout._apps.choose_workflow`), as workers, the
    server and ``Runtime.start`` pick a version. Later commands find a run's
    workflow by the origin it was started with.

    Raises:
        CommandError: It does not import, or names no single workflow; the
            message says what it holds and which name was perhaps meant.
    """
    if spec.endswith(DEFINITION_SUFFIXES):
        return load_definition(spec)
    try:
        return apps.choose_workflow(spec)
    except AppLoadError as error:
        raise CommandError(str(error)) from error


def versions_beside(spec: str, workflow: Workflow) -> list[Workflow]:
    """The other versions of ``workflow`` in the module ``spec`` names, newest first.

    A definition file holds one version: none is beside it.

    Raises:
        CommandError: the module does not load.
    """
    if spec.endswith(DEFINITION_SUFFIXES):
        return []
    try:
        held = apps.load_app(spec.partition(":")[0])
    except AppLoadError as error:
        raise CommandError(str(error)) from error
    others = [w for w in held if w.name == workflow.name and w.version != workflow.version]
    return sorted(others, key=lambda w: w.version, reverse=True)


def load_version(spec: str, name: str, version: int) -> Workflow:
    """Version ``version`` of workflow ``name``: the one ``spec`` names, or one beside it.

    A run records the app path it was started from; after a deploy that
    path may name a newer version, with the run's own kept beside it in the
    same module (``review_v1 = ...``), which is then the one returned. When
    none matches, the workflow ``spec`` names is returned, and resuming with
    it names the mismatch.

    Raises:
        CommandError: ``spec`` does not load.
    """
    try:
        named: Workflow | None = load_workflow(spec)
    except CommandError:
        if ":" in spec or spec.endswith(DEFINITION_SUFFIXES):
            raise
        named = None  # a module holding several: one of them may be it
    if named is not None and (named.name, named.version) == (name, version):
        return named
    if not spec.endswith(DEFINITION_SUFFIXES):
        try:
            beside = apps.load_app(spec.partition(":")[0])
        except AppLoadError as error:
            raise CommandError(str(error)) from error
        for held in beside:
            if (held.name, held.version) == (name, version):
                return held
    if named is None:
        msg = f"{spec!r} holds no version {version} of workflow {name!r}"
        raise CommandError(msg)
    return named


DEFINITION_SUFFIXES = (".yaml", ".yml", ".json")
"""An app path ending so is a declarative definition file (``docs/declarative.md``)."""


def load_definition(path: str) -> Workflow:
    """The workflow a definition file describes (its absolute path is its origin).

    Raises:
        CommandError: The declarative extra is missing, or the definition has
            problems (the message lists every one, ``file:line:column: message``).
    """
    try:
        from treadle._declarative._loader import load_path  # noqa: PLC0415 - yaml and CEL on demand
    except ImportError as error:
        raise CommandError(needs_extra("a definition file", "declarative", error)) from None
    try:
        return load_path(path)
    except DefinitionError as error:
        raise CommandError(str(error)) from error


def parse_json(text: str, what: str, argument: str | None = None) -> Any:
    """JSON from the command line; ``@path`` reads it from a file.

    ``what`` is ``"input"``, ``"answer"``, ``"message"`` or ``"state patch"``;
    ``argument`` is where it was given, when not that command's usual place
    (``--answer`` of a bulk ``respond``).

    Raises:
        CommandError: The file cannot be read, the text is not JSON, or it
            is larger than :data:`MAX_JSON_BYTES` or nests deeper than
            :data:`MAX_JSON_DEPTH`.
    """
    argument = argument or _ARGUMENT.get(what, what)
    document: str | bytes = text
    if text.startswith("@"):
        document = _read_json_file(text[1:], what, argument)
    elif len(text) > MAX_JSON_BYTES or len(text.encode(errors="replace")) > MAX_JSON_BYTES:
        raise _too_large(what, argument)
    try:
        value = strict_json.loads(document)
    except RecursionError:  # deeper than the parser's own stack allows
        raise _too_deep(what, argument) from None
    except ValueError as error:
        head = document[:60]
        shown = head if isinstance(head, str) else head.decode(errors="replace")
        msg = f"the {what} is not valid JSON ({error}): {shown!r}"
        raise CommandError(msg) from error
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise _too_deep(what, argument)
    return value


def _read_json_file(path: str, what: str, argument: str) -> bytes:
    try:
        with open(path, "rb") as source:  # noqa: PTH123 - one bounded read
            data = source.read(MAX_JSON_BYTES + 1)
    except OSError as error:
        msg = f"cannot read the {what} file {path!r}: {error.strerror}"
        raise CommandError(msg) from error
    if len(data) > MAX_JSON_BYTES:
        raise _too_large(what, argument)
    return data


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels deep in ``value``.

    Walked a level at a time (no recursion, whatever the depth); ``[]`` is
    one level. A level's items are gathered and sorted by C iterators, with
    no Python code run per item: a 16 MiB document of five million arrays
    took three times as long as reading it, item by item, before its answer
    was even looked at.
    """
    arrays = [value] if isinstance(value, list) else []
    objects = [value] if isinstance(value, dict) else []
    depth = 0
    while arrays or objects:
        depth += 1
        if depth > limit:
            return True
        items = [*chain.from_iterable(arrays), *chain.from_iterable(map(dict.values, objects))]
        arrays = list(compress(items, map(isinstance, items, repeat(list))))
        objects = list(compress(items, map(isinstance, items, repeat(dict))))
    return False


def _too_large(what: str, argument: str) -> CommandError:
    return CommandError(
        f"the {what} ({argument}) is larger than {MAX_JSON_BYTES // 2**20} MiB, "
        f"the most a command accepts"
    )


def _too_deep(what: str, argument: str) -> CommandError:
    return CommandError(
        f"the {what} ({argument}) nests arrays and objects more than {MAX_JSON_DEPTH} "
        f"levels deep, the most a command accepts"
    )


def coerce_input(workflow: Workflow, value: Any) -> Any:
    """Turn JSON into the type the start executor accepts (a dataclass, a model...)."""
    try:
        return plain_input(workflow, value)
    except AppLoadError as error:
        raise CommandError(str(error)) from None
