"""The docs say what the code does.

Every Python block of docs/quickstart.md runs as written. Each fenced
```python block is a complete script: it runs alone, as a fresh module, with
nothing from the blocks before it. When a ```text block follows it directly
(blank lines only in between), that text is what the script must print.
Tracebacks point at the line of quickstart.md that failed.

Beyond the quickstart: every repository path the docs, README.md and
CONTRIBUTING.md cite exists; no doc calls a shipped public name coming or
planned; CONTRIBUTING.md's dependency rule matches pyproject.toml; and the
documented rule for writing undeclared state keys is what a run does.
"""

import asyncio
import importlib
import os
import pkgutil
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import tomllib
import types
from pathlib import Path

import pytest

import treadle
from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ExecutorFailedError

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "quickstart.md"
CITING = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "CONTRIBUTING.md"]

FENCE = re.compile(
    r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE
)


def fenced_blocks(text: str) -> list[tuple[int, str, str, int, int]]:
    """(line of the opening fence, language, body, start, end) of every block."""
    return [
        (text.count("\n", 0, m.start()) + 1, m["lang"], m["body"], m.start(), m.end())
        for m in FENCE.finditer(text)
    ]


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, expected output or None) of every python block."""
    text = path.read_text(encoding="utf-8")
    blocks = fenced_blocks(text)
    found = []
    for index, (line, lang, body, _, end) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if index + 1 < len(blocks):
            _, next_lang, next_body, next_start, _ = blocks[index + 1]
            if next_lang == "text" and not text[end:next_start].strip():
                expected = next_body
        found.append((line, body, expected))
    return found


BLOCKS = python_blocks(DOC)


def test_the_quickstart_is_all_runnable_python_or_shell():
    langs = {lang for _, lang, _, _, _ in fenced_blocks(DOC.read_text(encoding="utf-8"))}
    assert langs <= {"python", "sh", "text"}, "an untested kind of block crept in"
    assert len(BLOCKS) >= 15


@pytest.mark.parametrize(
    ("line", "code", "expected"),
    [pytest.param(line, code, expected, id=f"line-{line}") for line, code, expected in BLOCKS],
)
def test_quickstart_block_runs(
    line: int,
    code: str,
    expected: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    name = f"quickstart_line_{line}"
    module = types.ModuleType(name)
    module.__file__ = str(DOC)
    # Dataclasses and typing look a class's module up in sys.modules.
    monkeypatch.setitem(sys.modules, name, module)
    # Pad with newlines so line numbers in tracebacks are those of the doc.
    compiled = compile("\n" * line + code, str(DOC), "exec")
    exec(compiled, module.__dict__)  # noqa: S102 - running the docs is the point
    printed = capsys.readouterr().out
    if expected is not None:
        assert printed.rstrip() == expected.rstrip()


# -- repository paths ----------------------------------------------------------------

# A path that starts at a top-level directory of the repository, or one of the
# package's (``treadle/__init__.py``, ``_engine/_loop.py``, under src/treadle).
REPO_PATH = re.compile(
    r"(?<![\w/.\-])"
    r"((?:examples|src|tests|benchmarks|docs|scripts|\.ci|treadle|_[a-z]\w*)/[\w.*/\-]*[\w*])"
)
# A repository-level document named in capitals (``DESIGN.md``, ``CONTRIBUTING.md``).
REPO_DOCUMENT = re.compile(r"(?<![\w/.\-])([A-Z][A-Z_\-]*\.md)\b")
# The target of a relative markdown link: ``[semantics](semantics.md#anchor)``.
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)(?:#[^)]*)?\)")


def cited_paths(doc: Path) -> set[str]:
    """Every path into the repository that ``doc`` cites, as written."""
    text = doc.read_text(encoding="utf-8")
    found = {m[1].split("::")[0] for m in REPO_PATH.finditer(text)}
    found |= {m[1] for m in REPO_DOCUMENT.finditer(text)}
    found |= {m[1] for m in LINK.finditer(text)}
    # ``../shared/STYLE.md`` and the like point outside the repository on purpose.
    return {path for path in found if not path.startswith("../")}


def resolves(path: str, doc: Path) -> bool:
    """Whether ``path`` names something in the repository (globs: at least one thing)."""
    bases = [ROOT, doc.parent, ROOT / "src", ROOT / "src" / "treadle"]
    return any(any(base.glob(path)) if "*" in path else (base / path).exists() for base in bases)


@pytest.mark.parametrize("doc", CITING, ids=lambda doc: doc.name)
def test_every_repository_path_the_docs_cite_exists(doc: Path):
    cited = cited_paths(doc)
    assert not (doc.name == "README.md" and not cited), "README.md cites nothing: check the regex"
    assert sorted(path for path in cited if not resolves(path, doc)) == []


def test_the_path_check_sees_paths_of_every_kind():
    # Guards the test above against silently checking nothing.
    cited = set().union(*(cited_paths(doc) for doc in CITING))
    assert {
        "examples/document_review.py",
        "tests/stores/test_store_suite.py",
        "benchmarks/RESULTS.md",
        "_workflow/_sync.py",
        "CONTRIBUTING.md",
        "semantics.md",
    } <= cited


# -- shipped names are not "coming" ---------------------------------------------------

FUTURE = re.compile(
    r"\b(?:coming(?: soon)?|planned|upcoming|forthcoming|to come|on the roadmap"
    r"|not yet (?:available|implemented|shipped|supported|released|there)"
    r"|(?:in|with) a (?:future|later|coming) (?:release|version)"
    r"|will (?:ship|be added|arrive|land))\b",
    re.IGNORECASE,
)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:[*|#-]|\d+\.))")


def public_names() -> set[str]:
    """Every name a public treadle module exports."""
    modules = ["treadle"] + [
        f"treadle.{info.name}"
        for info in pkgutil.iter_modules(treadle.__path__)
        if not info.name.startswith("_")
    ]
    return {name for module in modules for name in importlib.import_module(module).__all__}


def called_unshipped(text: str, names: set[str]) -> list[str]:
    """The sentences of ``text`` that name one of ``names`` as coming, planned, not yet there."""
    return [
        " ".join(sentence.split())
        for sentence in SENTENCE_END.split(text)
        if FUTURE.search(sentence)
        and any(re.search(rf"(?<![\w.]){re.escape(name)}\b", sentence) for name in names)
    ]


def test_the_unshipped_check_catches_a_shipped_name_called_coming():
    # Guards the test below against silently checking nothing.
    names = public_names()
    assert {"PostgresStore", "SqliteStore", "FakeClock", "WorkflowBuilder"} <= names
    text = "| `SqliteStore(path)` | the default |\n| `PostgresStore(dsn)` | coming |\n"
    assert called_unshipped(text, names) == ["| `PostgresStore(dsn)` | coming |"]
    assert called_unshipped("Incoming messages reach `SqliteStore`.", names) == []


@pytest.mark.parametrize("doc", CITING, ids=lambda doc: doc.name)
def test_no_doc_calls_a_shipped_public_name_coming(doc: Path):
    assert called_unshipped(doc.read_text(encoding="utf-8"), public_names()) == []


# -- CONTRIBUTING.md's dependency rule --------------------------------------------------


def requirement_name(requirement: str) -> str:
    """``"psycopg[binary]>=3.2"`` -> ``"psycopg"``."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._\-]*", requirement)
    assert match is not None, requirement
    return match[0].lower()


def declared_placement() -> dict[str, str]:
    """Each dependency of pyproject.toml: ``"core"``, or the extra that brings it.

    The ``dev`` extra is for working on treadle, not for users, so it places nothing.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    placement = {requirement_name(r): "core" for r in project["dependencies"]}
    for extra, requirements in project["optional-dependencies"].items():
        if extra != "dev":
            for requirement in requirements:
                placement.setdefault(requirement_name(requirement), extra)
    return placement


def dependency_rule() -> str:
    """The numbered house rule of CONTRIBUTING.md about dependencies."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    rule = r"^\d+\. \*\*Dependencies\*\*.*?(?=^\d+\. |^#|\Z)"
    match = re.search(rule, text, re.DOTALL | re.MULTILINE)
    assert match is not None, "CONTRIBUTING.md has no rule on dependencies"
    return match[0]


def mentions(sentence: str, package: str) -> bool:
    """Whether ``sentence`` names ``package`` (``opentelemetry-api`` also as OpenTelemetry).

    A package is also named by its first part, unless that part is a package of
    its own (``pydantic-ai-slim`` is not named by ``pydantic``).
    """
    short = package.split("-", maxsplit=1)[0]
    spellings = {package} if short in {"pydantic"} - {package} else {package, short}
    patterns = [rf"(?<![\w\-]){re.escape(s)}(?![\w\-])" for s in spellings]
    return any(re.search(pattern, sentence, re.IGNORECASE) for pattern in patterns)


def test_contributing_places_every_dependency_where_pyproject_does():
    placement = declared_placement()
    assert {"pydantic", "typer", "rich", "psycopg", "opentelemetry-api"} <= placement.keys()
    rule = dependency_rule()
    wrong = []
    for sentence in re.split(r"(?<=\.)\s+(?=[A-Z`])", " ".join(rule.split())):
        said = "an extra" if re.search(r"\bextras?\b", sentence) else "core"
        for package, where in placement.items():
            actual = "core" if where == "core" else "an extra"
            if mentions(sentence, package) and said != actual:
                wrong.append(f"{package} is {where} in pyproject.toml; CONTRIBUTING: {sentence}")
    assert wrong == []
    assert sorted(p for p in placement if not mentions(rule, p)) == [], "rule 12 omits these"
    for extra in set(placement.values()) - {"core"}:
        assert f"`{extra}`" in rule, f"rule 12 does not name the {extra!r} extra"


# -- undeclared state keys -------------------------------------------------------------


def test_the_quickstart_says_what_updating_an_undeclared_state_key_raises():
    @executor(id="count_visit")
    async def count_visit(page: str, ctx: WorkflowContext) -> None:
        ctx.state.update("visits", lambda n: n + 1)

    @executor(id="first_visit")
    async def first_visit(page: str, ctx: WorkflowContext) -> None:
        ctx.state.set("visits", 1)

    with pytest.raises(ExecutorFailedError) as caught:
        WorkflowBuilder(start=count_visit).build().run_sync("home")
    inner = caught.value.error
    assert isinstance(inner, KeyError)
    assert caught.value.__cause__ is inner
    assert caught.value.executor_id == "count_visit"
    # ``set`` needs no declaration: it creates the key.
    assert WorkflowBuilder(start=first_visit).build().run_sync("home").state == {"visits": 1}

    section = DOC.read_text(encoding="utf-8").split("## 5. Shared state", 1)[1].split("\n## ")[0]
    said = " ".join(section.split())
    assert "`ExecutorFailedError`" in said
    assert "`KeyError`" in said
    assert inner.args[0] in said  # the message, word for word (in the example's output)
    assert "`set`" in said
    assert re.search(r"`set`[^.]*(?:any|undeclared|new) key", said), "set's rule is not stated"


# -- deploy.md's shop, run as the guide runs it ----------------------------------------

DEPLOY = ROOT / "docs" / "deploy.md"


def deploy_block(marker: str) -> str:
    """The one python block of docs/deploy.md that contains ``marker``."""
    text = DEPLOY.read_text(encoding="utf-8")
    (body,) = [b for _, lang, b, _, _ in fenced_blocks(text) if lang == "python" and marker in b]
    return body


@pytest.mark.integration
def test_the_deploy_guides_shop_runs_on_workers_as_the_guide_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    dsn, schema = postgres_dsn(), fresh_schema()
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "flows.py").write_text(deploy_block("# shop/flows.py"))
    client_code = deploy_block("from treadle.workers import connect")
    assert 'connect("postgresql://treadle@db.internal/prod", schema="treadle")' in client_code
    client_code = client_code.replace("postgresql://treadle@db.internal/prod", dsn)
    client_code = client_code.replace('schema="treadle"', f"schema={schema!r}")
    imports, _, body = client_code.partition("\n\n")
    ending = "        outputs = (await client.result(run_id)).outputs\n    return final, outputs\n"
    script = f"{imports}\n\n\nasync def main():\n{textwrap.indent(body, '    ')}{ending}"

    # Section 2: `treadle worker --app shop.flows`, from the directory holding shop/.
    env = {**os.environ, "TREADLE_STORE": dsn, "TREADLE_SCHEMA": schema}
    treadle_command = str(Path(sys.executable).with_name("treadle"))
    command = [treadle_command, "worker", "--app", "shop.flows", "--poll-interval", "0.1"]
    worker = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    monkeypatch.syspath_prepend(str(tmp_path))  # `client.result` needs the workflow here
    try:
        namespace: dict[str, object] = {"__name__": "deploy_client"}
        exec(compile(script, str(DEPLOY), "exec"), namespace)  # noqa: S102 - the guide's code
        final, outputs = asyncio.run(namespace["main"]())  # type: ignore[operator]
        assert (final.run_id, final.status) == ("refund-A-17", "completed")
        assert outputs == ["refunded 40.0 euros for A-17"]  # approved by the guide's answer
    finally:
        worker.send_signal(signal.SIGTERM)
        _, logged = worker.communicate(timeout=30)
        for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
            del sys.modules[name]
        asyncio.run(drop_schemas([schema]))
    assert worker.returncode == 0, logged
    assert "claimed run refund-A-17" in logged


# -- installing: from a clone, as the quickstart says ------------------------------------

PIP_INSTALL = re.compile(r"pip install (?P<what>[^`\n#]+)")
INSTALLING = CITING


def installs(doc: Path) -> list[str]:
    """What each ``pip install`` in ``doc`` installs, as written."""
    return [m["what"].strip() for m in PIP_INSTALL.finditer(doc.read_text(encoding="utf-8"))]


def test_the_quickstart_installs_from_a_clone_since_treadle_is_not_on_pypi():
    quickstart = " ".join(DOC.read_text(encoding="utf-8").split())
    assert "not on PyPI" in quickstart
    assert "-e ." in installs(DOC)
    assert installs(ROOT / "docs" / "deploy.md") == ["-e '.[postgres]'"]


@pytest.mark.parametrize("doc", INSTALLING, ids=lambda doc: doc.name)
def test_every_doc_installs_treadle_and_its_extras_from_a_clone(doc: Path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    for what in installs(doc):
        if "treadle" not in what and not what.startswith("-e"):
            continue  # some other package
        assert re.fullmatch(r"-e (?:\.|'\.\[[\w,]+\]')", what), f"{doc.name}: pip install {what}"
        named = set(re.findall(r"\w+", what.partition("[")[2]))
        assert named <= extras, f"{doc.name} names extras pyproject.toml lacks: {named - extras}"


# -- long-running.md: who wakes a timer -------------------------------------------------


def test_long_running_names_treadle_worker_as_what_wakes_timers_from_a_shell():
    text = (ROOT / "docs" / "long-running.md").read_text(encoding="utf-8")
    section = text.split("### Where a run rests, and who wakes it", 1)[1].split("\n## ", 1)[0]
    (timers,) = [line for line in section.splitlines() if line.startswith("| `ctx.sleep`")]
    assert "`treadle worker`" in timers.rsplit("|", 2)[1]  # the "Woken by" column
    assert "treadle worker --app your.module --store runs.sqlite" in section
    # tests/cli/test_cli_ux.py shows `treadle run` naming it for a run resting on a timer.


def test_the_readmes_command_line_example_runs_as_printed_from_the_project_root(tmp_path):
    """Each ``$ treadle`` line of README's "From the command line", run from the root."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## From the command line", 1)[1]
    block = FENCE.search(section)
    assert block is not None
    commands = [line[2:] for line in block["body"].splitlines() if line.startswith("$ treadle ")]
    assert len(commands) == 3
    printed_request = re.search(r"req-[0-9a-f]+", block["body"])
    assert printed_request is not None
    treadle_command = str(Path(sys.executable).parent / "treadle")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    env["TREADLE_STORE"] = str(tmp_path / "runs.sqlite")  # not the clone's own treadle.sqlite
    expected_codes = [3, 0, 0]  # resting on the approval, the listing, completed
    request_id = None
    for command, expected in zip(commands, expected_codes, strict=True):
        shown = block["body"].split(f"$ {command}\n", 1)[1].split("\n$ ", 1)[0]
        if request_id is not None:  # ids are made per run: the one this run asks
            command = command.replace(printed_request[0], request_id)  # noqa: PLW2901
        args = shlex.split(command)
        done = subprocess.run(
            [treadle_command, *args[1:]],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == expected, (command, done.stdout, done.stderr)
        # And it prints what the README shows (but the request's id and the times).
        assert _as_printed(done.stdout) == _as_printed(shown), (command, done.stdout)
        found = re.search(r"req-[0-9a-f]+", done.stdout)
        if request_id is None and found:
            request_id = found[0]
    assert '"approved": true' in done.stdout


def _as_printed(text: str) -> list[str]:
    """Lines as a reader compares them: ids of requests and times made alike, ends trimmed."""
    text = re.sub(r"req-[0-9a-f]+", "req-ID", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", "TIME", text)
    return [line.rstrip() for line in text.strip("\n").splitlines()]
