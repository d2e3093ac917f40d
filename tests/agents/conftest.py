"""Every agent test runs offline: pydantic-ai refuses any request to a real model.

The scripted models of these tests (``FunctionModel``) are local functions,
which pydantic-ai allows; a test that reached for a provider would fail
with pydantic-ai's own error instead of calling out. Subprocess apps set
the same flag themselves (see ``scripted.py``).
"""

from __future__ import annotations

import pydantic_ai.models
import pytest


@pytest.fixture(autouse=True)
def _no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", False)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "TREADLE_MODEL"):
        monkeypatch.delenv(key, raising=False)
