"""Finding ``{{...}}`` in a definition's strings: the regex's spans, in one linear scan.

Work is counted (characters ``str.find`` scans), never timed.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from hypothesis import given
from hypothesis import strategies as st

from treadle import declarative
from treadle._declarative._templates import (
    Lookup,
    Text,
    compile_value,
    parse_lookup,
    template_spans,
)

REGEX = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)  # what found templates before


PIECES = ["{", "}", "{{", "}}", "a", ".", " ", "\n", "x-1", "state.a", "inputs.b.0", "nodes"]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def old_compile(text: str, problems: list[str]) -> object:
    """``_compile_string`` as it was with the regex: the reference the scan must match."""
    pieces: list[str | Lookup] = []
    end = 0
    for match in REGEX.finditer(text):
        if match.start() > end:
            pieces.append(text[end : match.start()])
        try:
            pieces.append(parse_lookup(match.group(1)))
        except ValueError as error:
            problems.append(str(error))
            pieces.append(match.group(0))
        end = match.end()
    if end < len(text):
        pieces.append(text[end:])
    if not any(isinstance(piece, Lookup) for piece in pieces):
        return text
    return pieces[0] if len(pieces) == 1 else Text(tuple(pieces))


@given(texts)
def test_the_scan_finds_exactly_the_spans_the_regex_found(text):
    assert template_spans(text) == [m.span() for m in REGEX.finditer(text)]


@given(texts)
def test_compiled_strings_and_their_problems_are_as_the_regex_made_them(text):
    problems: list[str] = []
    expected: list[str] = []
    assert compile_value(text, problems) == old_compile(text, expected)
    assert problems == expected


class Counted(str):
    """A string counting the characters each ``find`` on it scans."""

    __slots__ = ()
    scanned: ClassVar[list[int]] = [0]

    def find(self, sub: str, start: int = 0, *args: int) -> int:  # type: ignore[override]
        found = super().find(sub, start, *args)
        Counted.scanned[0] += (len(self) if found < 0 else found + len(sub)) - start
        return found


def test_a_run_of_unclosed_braces_is_scanned_once_not_once_per_brace():
    for text in ("{{" * 20_000, "{{ inputs.a }}" + "{{" * 20_000, "{{}}" * 5_000 + "{" * 20_000):
        Counted.scanned[0] = 0
        compile_value(Counted(text), [])
        assert len(text) // 2 <= Counted.scanned[0] <= 2 * len(text) + 4


def test_a_megabyte_of_unclosed_braces_loads_as_the_literal_text_it_is():
    """The regex rescanned to the end for every ``{{``: 40 KB took 32 s, this would take hours."""
    text = "{{" * 500_000
    definition = {"name": "t", "start": "a", "nodes": {"a": {"step": "output", "input": text}}}
    workflow = declarative.loads(json.dumps(definition))
    assert workflow.name == "t"
