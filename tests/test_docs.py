"""Every Python block of docs/quickstart.md runs as written.

Each fenced ```python block is a complete script: it runs alone, as a fresh
module, with nothing from the blocks before it. When a ```text block follows
it directly (blank lines only in between), that text is what the script must
print. Tracebacks point at the line of quickstart.md that failed.
"""

import re
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "quickstart.md"

FENCE = re.compile(
    r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE
)


def fenced_blocks(text: str) -> list[tuple[int, str, str, int, int]]:
    """(line of the opening fence, language, body, start, end) of every block."""
    return [
        (text.count("\n", 0, m.start()) + 1, m["lang"], m["body"], m.start(), m.end())
        for m in FENCE.finditer(text)
    ]


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, expected output or None) of every python block."""
    text = path.read_text(encoding="utf-8")
    blocks = fenced_blocks(text)
    found = []
    for index, (line, lang, body, _, end) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if index + 1 < len(blocks):
            _, next_lang, next_body, next_start, _ = blocks[index + 1]
            if next_lang == "text" and not text[end:next_start].strip():
                expected = next_body
        found.append((line, body, expected))
    return found


BLOCKS = python_blocks(DOC)


def test_the_quickstart_is_all_runnable_python_or_shell():
    langs = {lang for _, lang, _, _, _ in fenced_blocks(DOC.read_text(encoding="utf-8"))}
    assert langs <= {"python", "sh", "text"}, "an untested kind of block crept in"
    assert len(BLOCKS) >= 15


@pytest.mark.parametrize(
    ("line", "code", "expected"),
    [pytest.param(line, code, expected, id=f"line-{line}") for line, code, expected in BLOCKS],
)
def test_quickstart_block_runs(
    line: int,
    code: str,
    expected: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    name = f"quickstart_line_{line}"
    module = types.ModuleType(name)
    module.__file__ = str(DOC)
    # Dataclasses and typing look a class's module up in sys.modules.
    monkeypatch.setitem(sys.modules, name, module)
    # Pad with newlines so line numbers in tracebacks are those of the doc.
    compiled = compile("\n" * line + code, str(DOC), "exec")
    exec(compiled, module.__dict__)  # noqa: S102 - running the docs is the point
    printed = capsys.readouterr().out
    if expected is not None:
        assert printed.rstrip() == expected.rstrip()
