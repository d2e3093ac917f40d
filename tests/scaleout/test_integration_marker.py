"""Every test under tests/scaleout/ is marked ``integration``, by its conftest's hook.

A ``pytestmark`` in a conftest does nothing, so ``-m "not integration"`` used
to run scale-out tests that need PostgreSQL and worker processes.
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def collect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE.parent.parent,
    )


def test_this_test_carries_the_integration_marker(request):
    assert request.node.get_closest_marker("integration") is not None


def test_deselecting_integration_leaves_nothing_under_scaleout():
    everything = collect(str(HERE))
    assert everything.returncode == 0, everything.stdout + everything.stderr
    collected = [line for line in everything.stdout.splitlines() if "::" in line]
    assert len(collected) > 10  # the check below is not vacuous

    rest = collect("-m", "not integration", str(HERE))
    # Exit code 5: every test was deselected, none was collected.
    assert rest.returncode == 5, rest.stdout + rest.stderr
    assert [line for line in rest.stdout.splitlines() if "::" in line] == []
