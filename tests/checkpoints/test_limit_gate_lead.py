"""A limit's line in one process always has an asker while calls wait in it.

A stored run's calls share one asker per line and process
(``_checkpoints/_limit_gate.py``). When the asker's own call is granted it
hands the lead on to another waiting call. If the call handed the lead finds
its slot granted (as it enters the line, or before it wakes to ask), it must
hand the lead on again: otherwise nobody in the process asks, and the calls still waiting never hear
their grants (a PostgreSQL limits campaign stopped this way, one run holding a
granted slot it never learnt of).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from treadle import CallLimit
from treadle._checkpoints._limit_gate import StoreGate
from treadle._engine._limiter import SlotRequest
from treadle._stores._limit_roles import Admission

LIMIT = CallLimit("api", concurrency=1)


@dataclass
class Slots:
    """The store's side of the line, steered by the test."""

    held: dict[str, asyncio.Event] = field(default_factory=dict)  # entries kept waiting
    granted_on_entry: dict[str, tuple[str, ...]] = field(default_factory=dict)
    to_grant: list[str] = field(default_factory=list)  # told to the next asker
    on_admit: asyncio.Event | None = None  # set as the next asker hears its grants

    async def take_slot(self, terms: Any, entry: Any, lease: Any, gate: str) -> Admission:
        if (hold := self.held.get(entry.call_id)) is not None:
            await hold.wait()
        return Admission(self.granted_on_entry.get(entry.call_id, ()), None)

    async def admit_slots(self, terms: Any, gate: str) -> Admission:
        granted, self.to_grant = tuple(self.to_grant), []
        if granted and self.on_admit is not None:
            self.on_admit.set()
        return Admission(granted, None)

    async def release_slot(self, *args: Any) -> Admission:
        return Admission((), None)

    async def leave_line(self, *args: Any) -> None:
        return None


class Ownership:
    lease = None

    def detach(self, error: BaseException) -> None:
        raise AssertionError(error)


def request(call_id: str) -> SlotRequest:
    return SlotRequest(LIMIT, call_id, run_id="r")


async def test_a_call_handed_the_lead_and_granted_on_entry_hands_it_on():
    slots = Slots()
    gate, owner = StoreGate(slots, poll=0.01), Ownership()  # type: ignore[arg-type]
    asker = asyncio.create_task(gate.acquire(request("z"), owner))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)  # z asks for the line
    slots.held["x"] = asyncio.Event()
    slots.granted_on_entry["x"] = ("x",)
    entering = asyncio.create_task(gate.acquire(request("x"), owner))  # type: ignore[arg-type]
    waiting = asyncio.create_task(gate.acquire(request("y"), owner))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)  # y waits on z's asking; x is still entering
    slots.to_grant.append("z")
    await asyncio.wait_for(asker, 2)  # z is granted: the lead goes to x, first in line
    slots.held["x"].set()
    await asyncio.wait_for(entering, 2)  # x finds its slot granted as it enters
    slots.to_grant.append("y")
    slot = await asyncio.wait_for(waiting, 2)  # someone still asks: y hears its grant
    assert slot.request.call_id == "y"


async def test_a_call_handed_the_lead_and_granted_before_it_wakes_hands_it_on():
    """The lead given to x; before x wakes, w enters and its admission grants w and x."""
    slots = Slots()
    gate, owner = StoreGate(slots, poll=0.01), Ownership()  # type: ignore[arg-type]
    asker = asyncio.create_task(gate.acquire(request("z"), owner))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)  # z asks for the line
    led = asyncio.create_task(gate.acquire(request("x"), owner))  # type: ignore[arg-type]
    waiting = asyncio.create_task(gate.acquire(request("y"), owner))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)  # x and y wait on z's asking, x first
    # w enters now, and the store answers it just as z hears its own grant: w's answer
    # (w and x granted) is heard after z hands the lead to x and before x wakes.
    slots.held["w"] = slots.on_admit = asyncio.Event()
    slots.granted_on_entry["w"] = ("w", "x")
    entering = asyncio.create_task(gate.acquire(request("w"), owner))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    slots.to_grant.append("z")
    await asyncio.wait_for(asyncio.gather(asker, entering, led), 2)
    slots.to_grant.append("y")
    slot = await asyncio.wait_for(waiting, 2)  # someone still asks: y hears its grant
    assert slot.request.call_id == "y"
