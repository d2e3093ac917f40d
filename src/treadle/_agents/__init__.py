"""Agents as steps of a workflow: the machinery behind ``treadle.agents``.

An agent turn runs inside one invocation of an :class:`AgentExecutor`
(``_executor.py``). The agent library is reached through a small adapter
protocol (``_adapter.py``): treadle hands the adapter a turn and a set of
steps (``_steps.py``) that journal each model request and tool call with
``ctx.saved_step``, ask approvals with ``ctx.request`` and publish deltas as
events. pydantic-ai is the first adapter (``_pydantic_ai.py``).

Importing this package loads no agent library: ``treadle.events`` imports
:mod:`treadle._agents._events` from here, and only ``treadle.agents``
imports pydantic-ai.
"""
