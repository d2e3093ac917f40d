"""Fixtures every test folder shares (PostgreSQL schemas, store backends), and the order of tests.

``make test`` runs the suite on every core with ``--dist loadgroup``: each
test is a unit of work of its own, except the tests of a module sharing a
fixture made once per module (a ``treadle serve``, a browser, 100,000 runs),
which go to one worker together, so the fixture is made once, not once per
worker. Modules whose tests start processes or servers (marked
``integration``) come first and the quick in-process tests last, so the
workers end together instead of one waiting on a long test started last.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["postgres", "store_backends"]

_SHARED_SCOPES = {"module", "class"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group each module's tests that share a module fixture; the slow modules first."""
    slow_modules = set()
    for item in items:
        module = getattr(item, "module", None)
        if item.get_closest_marker("integration") is not None:
            slow_modules.add(module)
        fixtures = getattr(item, "_fixtureinfo", None)
        defined = fixtures.name2fixturedefs.values() if fixtures is not None else ()
        if module is not None and any(d.scope in _SHARED_SCOPES for ds in defined for d in ds):
            item.add_marker(pytest.mark.xdist_group(module.__name__))
    items.sort(key=lambda item: getattr(item, "module", None) not in slow_modules)
