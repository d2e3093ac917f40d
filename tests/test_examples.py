"""Every example under examples/ runs and does what its docstring says."""

import importlib.util
import sys
from pathlib import Path

import pytest

from treadle import RunStatus

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


async def test_document_review_demo_completes_after_revisions(
    capsys: pytest.CaptureFixture[str], tmp_path
):
    demo = load("document_review")
    assert await demo.main(str(tmp_path / "demo.sqlite")) == 0
    printed = capsys.readouterr().out
    assert "── superstep 2: readability, facts, tone" in printed
    assert "approved after 2 revision(s)" in printed
    assert "checkpoints: 10 (supersteps 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)" in printed
    result = await demo.workflow.run(
        demo.Document("t", "Plain text with 3 figures."), state={"text": "x"}
    )
    assert result.status is RunStatus.COMPLETED
