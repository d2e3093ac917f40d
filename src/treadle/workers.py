"""Many processes sharing runs through PostgreSQL (``pip install 'treadle[postgres]'``).

A :class:`Worker` serves the runs of some workflows from a ``PostgresStore``,
alongside any number of other workers: it claims runnable runs, drives each
to its next rest under a fenced lease, and releases it. A :class:`Client`,
made by :func:`connect`, starts, answers, messages, cancels and watches
those runs from anywhere, with no workflow code needed::

    from treadle.workers import connect

    async with connect("postgresql://treadle@db/prod") as client:
        run_id = await client.start("refund", {"order": "A-17"})
        row = await client.wait(run_id)

``treadle worker --app pkg.module`` runs a worker from the command line;
``docs/deploy.md`` walks through a deployment. Importing this module does
not import psycopg: the first store or client opened does.
"""

from treadle._public import publish
from treadle._scaleout._client import Client, connect
from treadle._scaleout._worker import Worker

__all__ = ["Client", "Worker", "connect"]

publish(__name__, globals(), __all__)
