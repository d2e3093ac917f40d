"""docs/semantics.md names a test for each guarantee: each must exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_test_named_in_semantics_md_exists():
    text = (ROOT / "docs" / "semantics.md").read_text()
    references = REFERENCE.findall(text)
    assert len(references) >= 30
    # A def, or a property test made at a budget of examples (``name = factory(n)``).
    missing = [
        f"{path}::{name}"
        for path, name in references
        if not re.search(
            rf"^((async )?def {name}\(|{name} = )", (ROOT / path).read_text(), re.MULTILINE
        )
    ]
    assert missing == []
