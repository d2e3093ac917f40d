"""Long listings (`treadle runs`, `treadle history`) are written without rich's layout,
character for character as rich writes them.

rich lays a table out at about a millisecond a row: `treadle runs --limit 10000` took
11.6 s, `--json` 1.9 s. A table that fits is now written line by line
(``treadle._cli._tables``); these tests hold its output to rich's own.
"""

from __future__ import annotations

import asyncio
import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text
from treadle_cli import Cli

from treadle._cli._tables import plain_lines, print_table
from treadle._operations import _audit as audits
from treadle._operations._audit import audit_json, audit_line
from treadle.stores import SqliteStore

# Printable text and not: wide characters, combining marks, markup-like brackets,
# tabs, newlines and escape codes (which rich folds, wraps or strips itself).
_TEXT = st.text(
    alphabet=st.sampled_from([*"ab Z09-:.()[]/\\", "全", "角", "é", "\u0301", "\t", "\n", "\x1b"]),
    max_size=12,
)


def _console(width: int) -> tuple[Console, io.StringIO]:
    written = io.StringIO()
    return Console(file=written, width=width, highlight=False, soft_wrap=True), written


def _by_rich(headers: list[str], rows: list[list[str]], width: int) -> str:
    console, written = _console(width)
    table = Table(*headers, box=None)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)
    return written.getvalue()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=9), min_size=n, max_size=n),
            st.lists(st.lists(_TEXT, min_size=n, max_size=n), max_size=6),
        )
    ),
    st.integers(10, 120),
)
def test_any_table_is_written_as_rich_writes_it(table, width):
    headers, rows = table
    console, written = _console(width)
    print_table(console, headers, rows)
    assert written.getvalue() == _by_rich(headers, rows, width)


def test_only_a_table_that_fits_on_printable_lines_is_laid_out_here():
    assert plain_lines(["a", "b"], [["x", "全角"]], 11) == [" a  b    ", " x  全角 "]
    assert plain_lines(["a", "b"], [["x", "全角"]], 8) is None  # rich shrinks and folds it
    assert plain_lines(["a"], [["x\ty"]], 80) is None  # rich expands the tab
    assert plain_lines(["a"], [["\x1b[31mred"]], 80) is None  # not printable
    assert plain_lines(["a"], [["[bold]x"]], 80) == [" a       ", " [bold]x "]  # text, not markup


def test_a_table_too_wide_goes_to_rich_with_its_columns_as_given():
    console, written = _console(12)
    print_table(console, [Column("id", overflow="fold"), "b"], [["0123456789abcdef", "x"]])
    rich_console, by_rich = _console(12)
    table = Table(Column("id", overflow="fold"), "b", box=None)
    table.add_row("0123456789abcdef", "x")
    rich_console.print(table)
    assert written.getvalue() == by_rich.getvalue()
    folded = [line.split()[0] for line in written.getvalue().splitlines()[1:]]
    assert "".join(folded) == "0123456789abcdef"  # folded onto the next lines, not cut


def test_treadle_runs_and_history_list_many_runs_aligned(tmp_path):
    cli = Cli(tmp_path)
    for n in range(30):
        done = cli("run", "cli_app:long_job", "--input", "0", "--run-id", f"job-{n:0{n % 3 + 1}}")
        assert done.returncode == 0, done.stderr
    listed = cli("runs", "--limit", "30")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == [
        "run",
        "workflow",
        "status",
        "outcome",
        "superstep",
        "owner",
        "updated",
    ]
    assert {line.split()[0] for line in lines[1:]} == {f"job-{n:0{n % 3 + 1}}" for n in range(30)}
    assert len({len(line) for line in lines}) == 1  # every line padded to the same columns
    history = cli("history", "job-07")
    assert history.returncode == 0, history.stderr
    assert history.stdout.splitlines()[0].split() == [
        "checkpoint",
        "superstep",
        "status",
        "created",
        "parent",
    ]
    on_a_terminal = cli.on_a_terminal("runs", "--limit", "30", columns=200)
    assert "\x1b[1m" in on_a_terminal  # the header bold, as rich makes it
    assert all(f"job-{n:0{n % 3 + 1}} " in on_a_terminal for n in range(30)), on_a_terminal


def test_treadle_audit_prints_the_log_page_by_page_as_it_printed_it_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(audits, "_PAGE", 2)  # five entries: three pages
    cli = Cli(tmp_path)
    for n in range(5):
        done = cli("run", "cli_app:long_job", "--input", "0", "--run-id", f"job-{n}")
        assert done.returncode == 0, done.stderr
    whole = asyncio.run(_whole_log(cli.db))
    assert len(whole) == 5
    listed = cli("audit")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [audit_line(entry) for entry in whole]
    as_json = cli("audit", "--json")
    assert as_json.returncode == 0, as_json.stderr
    entries = [audit_json(entry) for entry in whole]
    assert as_json.stdout == json.dumps({"entries": entries}, indent=2) + "\n"
    one = cli("audit", "job-3", "--json")
    assert json.loads(one.stdout) == {"entries": [entries[3]]}
    empty = tmp_path / "empty.sqlite"
    assert asyncio.run(_whole_log(empty)) == []  # made, with no entry
    nothing = cli("audit", "--json", "--store", str(empty))
    assert nothing.stdout == json.dumps({"entries": []}, indent=2) + "\n"


async def _whole_log(path):
    store = SqliteStore(path)
    try:
        return await audits.entries(store)
    finally:
        await store.close()
