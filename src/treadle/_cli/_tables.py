"""Long listings (tables, lines) written as rich writes them, without going through rich.

rich measures, wraps and renders every cell of a table through its segment
machinery: about a millisecond a row here, so ``treadle runs --limit 10000``
took 11.6 s where ``--json`` took 1.9 s. A table whose rows each fit one
line needs none of that: each column is as wide as its widest cell, each
cell padded by a space on either side, as rich's ``box=None`` table does.
So a table that fits the console, all of its cells printable text, is
written here, line by line, the same characters rich would write; any
other (too wide, a cell rich would fold, wrap or strip) still goes to rich.
Lines of text alike (``treadle audit``): rich took 0.4 ms to print each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.table import Column, Table
from rich.text import Text

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from rich.console import Console


def print_table(
    console: Console, columns: Sequence[Column | str], rows: Sequence[Sequence[str]]
) -> None:
    """Print ``rows`` (plain text, not markup) under ``columns``, as a ``box=None`` table.

    The header is bold on a terminal, as rich's is; a table that does not
    fit, or holds text that is not printable, is rich's to lay out.
    """
    headers = [column.header if isinstance(column, Column) else column for column in columns]
    lines = plain_lines([str(header) for header in headers], rows, console.width)
    if lines is None:
        table = Table(*columns, box=None)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
        return
    header, *body = lines
    if console.is_terminal:
        console.print(header, style="bold", markup=False, highlight=False)
    else:
        body.insert(0, header)
    _write(console, body)


def plain_lines(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int
) -> list[str] | None:
    """The table's lines, header first, each cell padded to its column; ``None``: rich's to do.

    ``None`` when a line would be wider than ``width``, or a cell is not
    printable on one line (a newline, a tab, an escape code): rich folds,
    wraps or strips those.
    """
    widths = [cell_len(header) for header in headers]
    for row in rows:
        if len(row) != len(widths):
            msg = f"a row of {len(row)} cells under {len(widths)} columns"
            raise ValueError(msg)
        for index, cell in enumerate(row):
            if not cell.isprintable():
                return None
            widths[index] = max(widths[index], cell_len(cell))
    if sum(widths) + 2 * len(widths) > width:
        return None
    return [_line(headers, widths), *(_line(row, widths) for row in rows)]


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    # ljust counts characters; a wide character takes two cells, hence the padding by hand.
    padded = zip(cells, widths, strict=True)
    return "".join(f" {cell}{' ' * (width - cell_len(cell))} " for cell, width in padded)


def print_lines(console: Console, lines: Iterable[str]) -> None:
    """Print each of ``lines`` (plain text, not markup) on a line of its own, unwrapped.

    A printable line is written as it is, which is what rich writes for it
    with ``soft_wrap``; any other is rich's to print.
    """
    plain: list[str] = []
    for line in lines:
        if line.isprintable():
            plain.append(line)
            continue
        _write(console, plain)
        plain = []
        console.print(Text(line), soft_wrap=True)
    _write(console, plain)


def _write(console: Console, lines: list[str]) -> None:
    if lines:
        console.file.write("\n".join(lines) + "\n")
        console.file.flush()
