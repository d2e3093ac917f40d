"""The public surface: deliberate, sorted, documented, and light to import."""

import subprocess
import sys

import treadle


def test_all_is_sorted_and_every_name_resolves():
    assert treadle.__all__ == sorted(treadle.__all__)
    for name in treadle.__all__:
        assert hasattr(treadle, name), name


def test_every_public_name_has_a_docstring():
    missing = [n for n in treadle.__all__ if not (getattr(treadle, n).__doc__ or "").strip()]
    assert missing == []


def test_every_error_derives_from_treadle_error():
    errors = [getattr(treadle, n) for n in treadle.__all__ if n.endswith(("Error", "Exceeded"))]
    assert errors
    for error in errors:
        assert issubclass(error, treadle.TreadleError), error


def test_import_treadle_loads_no_heavy_dependency():
    code = (
        "import sys, treadle; "
        "heavy = [m for m in ('pydantic', 'psycopg', 'opentelemetry', 'rich', 'typer') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
