"""No decision is taken by a default on the page (issue 29): buttons per value, and a confirmation.

The ``approval`` workflow asks for ``Approval(approved: bool, note: str)``:
a decision (no default) and a required text. One click on an untouched form
sends nothing; a decision is taken by pressing its button, and what is sent
is shown, decision named, to be confirmed first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from test_page_browser import _started, _wait, expect, page, pytestmark, server

if TYPE_CHECKING:
    from page_server import Server

__all__ = ["page", "pytestmark", "server"]  # the fixtures this module reuses


def _open_card(page, server: Server) -> tuple[str, object]:
    run_id = _started(server, "approval", {"title": "Desk", "amount": 1200})
    _wait(server, run_id, "awaiting_input")
    page.goto(f"{server.base}/#/runs/{run_id}")
    card = page.locator("#requests form.request")
    expect(card).to_be_visible()
    return run_id, card


def _unchanged(server: Server, run_id: str, before: dict) -> None:
    with server.api() as api:
        after = api.get(f"/api/runs/{run_id}").json()
    assert after["run"]["status"] == "awaiting_input"
    assert after["run"]["checkpoint_id"] == before["run"]["checkpoint_id"]
    assert after["run"]["updated_at"] == before["run"]["updated_at"]


def test_one_click_on_an_untouched_form_answers_nothing(page, server: Server):
    run_id, card = _open_card(page, server)
    with server.api() as api:
        before = api.get(f"/api/runs/{run_id}").json()
    decision = card.get_by_role("group", name="Approved")
    for value in ("Yes", "No"):
        expect(decision.get_by_role("button", name=value)).to_have_attribute(
            "aria-pressed", "false"
        )

    card.get_by_role("button", name="Send answer").click()
    approved = card.locator('.field[data-path="approved"] .field-error')
    expect(approved).to_have_text("choose one: Yes or No")
    expect(card.locator('.field[data-path="note"] .field-error')).to_have_text(
        "required: write something"
    )
    expect(card.get_by_role("button", name="Confirm and send")).to_have_count(0)
    _unchanged(server, run_id, before)

    # Blank text is no text either.
    decision.get_by_role("button", name="No").click()
    expect(approved).to_be_hidden()  # choosing clears the field's complaint
    card.get_by_label("Note").fill("   ")
    card.get_by_role("button", name="Send answer").click()
    expect(card.locator('.field[data-path="note"] .field-error')).to_be_visible()
    expect(card.get_by_role("button", name="Confirm and send")).to_have_count(0)
    _unchanged(server, run_id, before)


def test_a_decision_is_a_button_per_value_and_is_sent_once_confirmed(page, server: Server):
    run_id, card = _open_card(page, server)
    with server.api() as api:
        before = api.get(f"/api/runs/{run_id}").json()
    decision = card.get_by_role("group", name="Approved")
    no, yes = decision.get_by_role("button", name="No"), decision.get_by_role("button", name="Yes")
    no.click()
    expect(no).to_have_attribute("aria-pressed", "true")
    card.get_by_label("Note").fill("over budget")
    card.get_by_role("button", name="Send answer").click()
    confirmation = card.locator(".confirmation")
    expect(confirmation).to_contain_text("You decide Approved: No.")
    _unchanged(server, run_id, before)  # shown, not sent

    # Back, another choice: the confirmation names the new one.
    card.get_by_role("button", name="Back").click()
    expect(confirmation).to_be_hidden()
    yes.click()
    expect(yes).to_have_attribute("aria-pressed", "true")
    expect(no).to_have_attribute("aria-pressed", "false")
    card.get_by_role("button", name="Send answer").click()
    expect(confirmation).to_contain_text("You decide Approved: Yes.")
    _unchanged(server, run_id, before)
    card.get_by_role("button", name="Confirm and send").click()
    expect(page.locator(".run-header .badge")).to_have_text("completed")
    with server.api() as api:
        outputs = api.get(f"/api/runs/{run_id}").json()["outputs"]
    assert outputs[0]["approved"] is True
    assert outputs[0]["note"] == "over budget"
