"""Every SQL statement that writes lives in the SQL modules.

*The SQL modules* are the files of ``src/treadle/_stores`` named
``_sql_*.py`` (``_sql_statements``, ``_sql_ownership``, ``_sql_pausing``,
``_sql_schema``...): the statement templates, written once in the neutral
dialect for both backends. Everywhere else in ``src/`` (the stores'
drivers, the orchestration of writes, the other packages) executes them but
writes none, so that a change to a table is a change to those files only.
A *write statement* is a string literal (not a docstring) holding
``INSERT INTO``, ``UPDATE <table> SET``, ``DELETE FROM``, ``CREATE``,
``ALTER``, ``DROP`` or ``TRUNCATE`` followed by what it acts on; transaction
control (``BEGIN``, ``SAVEPOINT``, ``COMMIT``) and settings (``PRAGMA``,
``SET search_path``) are not writes of data.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import treadle

SOURCE = Path(treadle.__file__).parent
WRITE = re.compile(
    r"\b(INSERT\s+INTO|UPDATE\s+\w+(\s+AS\s+\w+)?\s+SET|UPDATE\s+\w+(\s+AS\s+\w+)?\s*$|DELETE\s+FROM"
    r"|CREATE\s+(TABLE|(UNIQUE\s+)?INDEX|SCHEMA|TRIGGER|FUNCTION|OR\s+REPLACE)"
    r"|ALTER\s+TABLE|DROP\s+(TABLE|INDEX|SCHEMA|TRIGGER|FUNCTION)|TRUNCATE\s+\w)",
    re.MULTILINE,
)


def is_sql_module(path: Path) -> bool:
    """Whether ``path`` is one of the SQL modules, where write statements belong."""
    return path.parent == SOURCE / "_stores" and path.name.startswith("_sql_")


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def write_statements(path: Path) -> list[str]:
    """The write statements among the string literals of one file, as ``line: text``."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and WRITE.search(node.value)
        ):
            found.append(f"{path.relative_to(SOURCE)}:{node.lineno}: {node.value.strip()[:60]}")
    return found


def test_no_sql_write_statement_outside_the_sql_modules() -> None:
    misplaced = [
        found
        for path in sorted(SOURCE.rglob("*.py"))
        if not is_sql_module(path)
        for found in write_statements(path)
    ]
    assert misplaced == []


def test_the_check_finds_the_statements_in_the_sql_modules() -> None:
    """The pattern does find writes (else the test above could never fail)."""
    statements = SOURCE / "_stores" / "_sql_statements.py"
    found = write_statements(statements)
    assert any("INSERT INTO treadle_runs" in line for line in found)
    assert any("UPDATE treadle_runs" in line for line in found)
    assert any("DELETE FROM treadle_checkpoints" in line for line in found)
