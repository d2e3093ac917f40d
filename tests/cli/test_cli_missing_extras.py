"""A missing extra is named in one line, with the command that installs it.

Each extra's library is made unimportable the way a user meets it (not
installed): a directory ahead of site-packages on ``PYTHONPATH`` holds a stub
package of that name whose import raises ``ImportError``. The ``treadle``
command then refuses in one line (exit 2, no traceback) naming the extra and
how to install it, from a release and from a clone; ``import treadle.otel``
(and the other extra modules) raises an ``ImportError`` that says the same.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from treadle_cli import HERE, Cli

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

# extra -> the top-level packages it installs that treadle imports
EXTRAS = {
    "postgres": ["psycopg", "psycopg_pool"],
    "server": ["starlette", "sse_starlette", "uvicorn"],
    "otel": ["opentelemetry"],
    "agents": ["pydantic_ai"],
    "dask": ["distributed"],
    "declarative": ["yaml", "celpy"],
}


def without(tmp_path: Path, extra: str) -> Cli:
    """The CLI in ``tmp_path`` with ``extra``'s packages unimportable."""
    hidden = tmp_path / "hidden"
    for package in EXTRAS[extra]:
        (hidden / package).mkdir(parents=True)
        (hidden / package / "__init__.py").write_text(
            f'raise ImportError("No module named {package!r} (hidden by the test)")\n'
        )
    cli = Cli(tmp_path, process=True)  # a process of its own: the extra was never imported
    cli.env["PYTHONPATH"] = f"{hidden}:{HERE}"
    return cli


def assert_names_the_extra(done: subprocess.CompletedProcess[str], extra: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"the {extra} extra" in line
    assert f"pip install 'treadle[{extra}]'" in line
    assert f"pip install -e '.[{extra}]'" in line


def test_a_postgresql_store_without_psycopg(tmp_path):
    cli = without(tmp_path, "postgres")
    assert_names_the_extra(cli("runs", "--store", "postgresql://127.0.0.1:5432/test"), "postgres")
    assert_names_the_extra(
        cli("worker", "--app", "cli_app", "--store", "postgresql://127.0.0.1:5432/test"),
        "postgres",
    )


def test_serve_without_the_server_extra(tmp_path):
    cli = without(tmp_path, "server")
    assert_names_the_extra(cli("serve", "--app", "cli_app"), "server")


def test_definitions_without_the_declarative_extra(tmp_path):
    cli = without(tmp_path, "declarative")
    (tmp_path / "flow.yaml").write_text("name: flow\n")
    assert_names_the_extra(cli("validate", "flow.yaml"), "declarative")
    assert_names_the_extra(cli("run", "flow.yaml", "--input", "1"), "declarative")
    assert_names_the_extra(cli("graph", "flow.yaml"), "declarative")


@pytest.mark.parametrize(
    ("extra", "module"),
    [
        ("otel", "treadle.otel"),
        ("agents", "treadle.agents"),
        ("dask", "treadle.dask"),
        ("declarative", "treadle.declarative"),
    ],
)
def test_an_app_importing_an_extra_module_without_its_extra(tmp_path, extra, module):
    cli = without(tmp_path, extra)
    (tmp_path / "uses_extra.py").write_text(f"import {module}\n")
    assert_names_the_extra(cli("run", "uses_extra.py", "--input", "1"), extra)
    imported = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert imported.returncode == 1
    last = imported.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ")
    assert f"{module} needs the {extra} extra" in last
    assert f"pip install -e '.[{extra}]'" in last


def test_postgres_store_by_name_without_psycopg(tmp_path):
    cli = without(tmp_path, "postgres")
    imported = subprocess.run(
        [sys.executable, "-c", "from treadle.stores import PostgresStore"],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert imported.returncode == 1
    last = imported.stderr.strip().splitlines()[-1]
    assert "treadle.stores.PostgresStore needs the postgres extra" in last
