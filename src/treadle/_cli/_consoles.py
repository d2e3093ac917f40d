"""The command line's consoles: rich's, never writing a control character it was given.

:data:`treadle._cli._views.out` and ``err`` are made of these. Kept apart so
that what a view prints and how it reaches the terminal change apart.
"""

from __future__ import annotations

import json as _json
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.segment import Segment

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

# Control characters shown as ``\x1b``, never written: text from outside (an error's
# message, a key of an input, a label, a name) must not move the cursor, clear the
# screen or retitle the window of whoever reads it. Line feeds and tabs are text.
_UNSHOWN = MappingProxyType(
    {code: f"\\x{code:02x}" for code in (*range(9), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))}
)


class Shown(Console):
    """rich's console, writing no control character of the text it is given.

    rich drops a few (a bell, a carriage return) but writes an escape
    character through, and with it any terminal sequence the text holds.
    Its own styling and cursor moves are control segments, written as
    they are.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment
            if segment.control or segment.text.isprintable()
            else Segment(segment.text.translate(_UNSHOWN), segment.style, segment.control)
            for segment in buffer
        )


class Out(Shown):
    """rich's console for what commands print, with ``--json`` written as plain text.

    rich's ``print_json`` lays a whole document out through its highlighter:
    100 to 200 times the output's size in memory, 4 GB and a minute for
    ``treadle runs --limit 100000 --json`` (30 MB of JSON). The standard
    library's encoder writes the same document at once.
    """

    def print_json(
        self,
        json: str | None = None,
        *,
        data: Any = None,
        indent: int | str | None = 2,
        highlight: bool = True,  # noqa: ARG002 - plain text has nothing to highlight
        skip_keys: bool = False,
        ensure_ascii: bool = False,
        check_circular: bool = True,
        allow_nan: bool = True,
        default: Callable[[Any], Any] | None = None,
        sort_keys: bool = False,
    ) -> None:
        """Write a JSON document (``json`` as given, else ``data`` encoded) and a newline."""
        text = json
        if text is None:
            text = _json.dumps(
                data,
                indent=indent,
                skipkeys=skip_keys,
                ensure_ascii=ensure_ascii,
                check_circular=check_circular,
                allow_nan=allow_nan,
                default=default,
                sort_keys=sort_keys,
            )
        self.file.write(text + "\n")
        self.file.flush()
