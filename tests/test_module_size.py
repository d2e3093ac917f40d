"""Every module of ``src`` stays under 500 lines (STYLE.md, rule 3).

A module that reaches the cap is split by concern (what it is about), not
cut into base classes or mixins that share one object's state from several
files: the cap is there to keep a module one thing a reader can hold.
"""

from __future__ import annotations

from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "src"
CAP = 500


def test_every_module_is_under_the_cap():
    sizes = {
        str(path.relative_to(SOURCE)): len(path.read_text().splitlines())
        for path in sorted(SOURCE.rglob("*.py"))
    }
    assert len(sizes) > 100  # the tree was found
    over = {path: lines for path, lines in sizes.items() if lines >= CAP}
    assert over == {}, f"split by concern before {CAP} lines: {over}"
