"""A run's log as its rows lie in a SQLite file: in ``treadle_events``, and in checkpoints.

A commit of one checkpoint keeps its superstep's events in the checkpoint's
row; every other write keeps a row of ``treadle_events`` (see
``treadle/_stores/_sql_events.py``). Tests that look at the rows themselves
read both, as the store does, through :data:`LOG_ROWS`: each row's run,
seqs, events and ``home`` (the table it lies in, for a test that damages one).
"""

LOG_ROWS = (
    "(SELECT run_id, first_seq, last_seq, events, 'treadle_events' AS home"
    " FROM treadle_events UNION ALL"
    " SELECT run_id, first_seq, last_seq, events, 'treadle_checkpoints' AS home"
    " FROM treadle_checkpoints WHERE first_seq IS NOT NULL)"
)
