"""An answer and a cancel raced by separate processes: one outcome, and each is told the truth.

`treadle cancel` and two `treadle respond` of the same request start at once,
as separate processes, on SQLite and on PostgreSQL. Whoever wins, the run
ends one way (answered and completed, or cancelled), the record holds one
entry for what happened and none for what did not, and no process is told it
did something that did not happen. An answer taken just before the cancel is
on the record, and its process is told the run was then cancelled.
"""

from __future__ import annotations

from test_cli_delete_race import awaiting_run, cli, race  # noqa: F401 - cli is a fixture

ROUNDS = 4


def test_an_answer_and_a_cancel_racing_end_the_run_one_way_and_say_so(cli) -> None:  # noqa: F811
    worker = None
    if "TREADLE_SCHEMA" in cli.env:
        worker = cli.start("worker", "--app", "cli_app", "--poll-interval", "0.05")
    try:
        _rounds(cli)
    finally:
        if worker is not None:
            worker.terminate()
            worker.communicate(timeout=30)


def _rounds(cli) -> None:  # noqa: F811
    for attempt in range(ROUNDS):
        run_id = awaiting_run(cli, f"raced-{attempt}")
        for _ in range(200):
            shown = cli.json("show", run_id)
            if shown["pending_requests"]:
                break
        (request,) = shown["pending_requests"]
        answer = ("respond", run_id, request["request_id"], '{"ok": true, "note": "ship it"}')
        cancel, *answers = race(cli, ("cancel", run_id), answer, answer)
        final = cli.json("show", run_id)["status"]
        actions = [e["action"] for e in cli.json("audit", run_id)["entries"]]
        told = [(o.returncode, o.stdout, o.stderr) for o in (cancel, *answers)]
        took = [o for o in answers if o.returncode == 0]
        assert len(took) <= 1, told
        # An answer taken and then cut short by the cancel is on the record as answered:
        # its process is told the run was cancelled (it was), not that it completed.
        assert len(took) <= actions.count("request_answered") <= 1, (actions, told)
        for o in answers:
            if "was already answered by" in o.stderr:  # only ever true
                assert "request_answered" in actions, (actions, told)
        if final == "completed":  # an answer won: the cancel is told the run had ended
            assert cancel.returncode == 2, told
            assert f"run '{run_id}' has ended (completed)" in cancel.stderr
            assert len(took) == 1, told
            assert "run_cancelled" not in actions
            (lost,) = [o for o in answers if o.returncode != 0]
            assert "was already answered by" in lost.stderr, told
        else:  # the cancel won: no answer is said to have completed the run
            assert final == "cancelled", told
            assert cancel.returncode == 0, told
            assert f"run {run_id} cancelled" in cancel.stdout
            assert actions.count("run_cancelled") == 1
            for o in answers:
                if o.returncode == 0:  # PostgreSQL: delivered first, before the cancel
                    assert o.stdout.startswith(f"delivered to run {run_id}"), told
                else:
                    assert "cancelled" in o.stderr or "was already answered by" in o.stderr, told
        assert all("completed" not in o.stdout for o in answers) or final == "completed"
    # The audit chain, written by racing processes (and a worker), verifies whole.
    verified = cli("audit", "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
