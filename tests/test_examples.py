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


async def test_support_desk_hands_customers_over_and_refunds_once_after_approval(
    capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch: pytest.MonkeyPatch
):
    import pydantic_ai.models  # noqa: PLC0415 - the agents extra, for this example only

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", False)  # offline: scripted
    monkeypatch.delenv("TREADLE_MODEL", raising=False)
    outcome = await load("support_desk").main(str(tmp_path / "desk.sqlite"))
    status, replies, usage = outcome["ann"]
    assert status is RunStatus.COMPLETED
    assert replies[0] == "Sorry about that! refund R-0001 of 1999 cents. Anything else?"
    assert len(replies) == 2
    assert outcome["refunds"] == [("A-1042", 1999)]  # once, after the supervisor approved
    assert outcome["handed"] == ["handoff_to_billing", "handoff_to_billing"]
    assert (usage["requests"], usage["tool_calls"]) == (4, 1)
    assert outcome["bob"][0] is RunStatus.COMPLETED
    assert "version 2.4.1" in outcome["bob"][1][0]
    assert "waits: ToolApproval(agent='billing', tool='refund'" in capsys.readouterr().out
