"""Pictures of a graph: Mermaid and DOT text, and the real tools drawing it.

The text tests pin the structure (each edge kind drawn its own way, ids
escaped, marks styled, same text every time); the integration tests hand the
text to `mmdc` and `dot`, which `make renderers` installs. They fail, not
skip, when a tool is missing: a picture nobody can draw is a bug.
"""

import importlib.util
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from treadle import (
    Case,
    Default,
    Executor,
    HandoffRefused,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
)
from treadle._graph._cycles import cycle_members
from treadle._graph._edges import (
    DirectEdge,
    ErrorEdge,
    FanInEdge,
    FanOutEdge,
    HandoffEdge,
    SwitchEdge,
)
from treadle.declarative import loads

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MMDC = ROOT / ".tools" / "node_modules" / ".bin" / "mmdc"
PUPPETEER_CONFIG = ROOT / ".tools" / "puppeteer.json"
DOT = Path(shutil.which("dot") or "dot")  # not found: run_tool says so


def load_example():
    spec = importlib.util.spec_from_file_location(
        "every_edge_kind", ROOT / "examples" / "every_edge_kind.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["every_edge_kind"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


EXAMPLE = load_example()
EVERY_KIND = EXAMPLE.workflow


def passer(executor_id: str) -> Executor:
    @executor(id=executor_id)
    async def passes(message: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(message)

    return passes


def small_graph(ids: list[str]):
    """A chain through executors with the given ids, the first one the start."""
    executors = [passer(i) for i in ids]
    return WorkflowBuilder(start=executors[0], name="small").add_chain(executors).build()


@executor
async def collect(items: list[int], ctx: WorkflowContext) -> None:
    ctx.yield_output(items)


class Asker(Executor):
    def __init__(self) -> None:
        super().__init__(id="asker")

    @handler
    async def ask(self, message: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(message)

    @handler
    async def refused(self, refusal: HandoffRefused, ctx: WorkflowContext) -> None:
        pass


def one_of_each():
    """start -if-> a; a fans out to b, c; b, c fan in to d; a switches; asker hands off."""
    start, a, b, c, e, f = (passer(i) for i in ("start", "a", "b", "c", "e", "f"))
    return (
        WorkflowBuilder(start=start, name="one of each")
        .add_edge(start, a, condition=lambda m: m > 0)
        .add_fan_out(a, [b, c], selector=lambda m, ids: ids)
        .add_fan_in([b, c], collect)
        .add_switch(a, [Case(lambda m: m > 1, e), Case(lambda m: m > 2, f), Default(Asker)])
        .add_handoff("asker", [e], require_approval=True)
        .add_edge(e, f)
        .build()
    )


# -- the example every picture test draws ----------------------------------------


def test_the_example_has_every_edge_kind_and_a_loop():
    edges = EVERY_KIND.edges
    assert any(isinstance(e, DirectEdge) and e.condition is None for e in edges)  # chain
    assert any(isinstance(e, DirectEdge) and e.condition is not None for e in edges)
    assert any(isinstance(e, FanOutEdge) and e.selector is not None for e in edges)
    assert any(isinstance(e, FanOutEdge) and e.selector is None for e in edges)
    assert any(isinstance(e, FanInEdge) for e in edges)
    assert any(isinstance(e, SwitchEdge) and len(e.cases) >= 2 and e.default for e in edges)
    assert any(isinstance(e, HandoffEdge) and e.require_approval for e in edges)
    assert any(isinstance(e, HandoffEdge) and not e.require_approval for e in edges)
    assert any(isinstance(e, ErrorEdge) for e in edges)
    assert cycle_members(EVERY_KIND.ranks, edges), "the example should have a loop"


async def test_the_example_answers_a_question(capsys: pytest.CaptureFixture[str]):
    outputs = await EXAMPLE.main()
    assert outputs == ["email after 2 drafts: Hello! see docs on export; forum on export."]
    assert capsys.readouterr().out.strip() == outputs[0]


def test_the_committed_picture_sources_are_current():
    # Snapshots: scripts/render_graph_picture.py rewrites them (and the PNG).
    assert (DOCS / "graph.mmd").read_text(encoding="utf-8") == EVERY_KIND.to_mermaid()
    assert (DOCS / "graph.dot").read_text(encoding="utf-8") == EVERY_KIND.to_dot()
    assert (DOCS / "graph.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


# -- Mermaid text ---------------------------------------------------------------


def test_mermaid_draws_each_edge_kind_its_own_way():
    text = one_of_each().to_mermaid()
    lines = text.splitlines()
    assert lines[:4] == ["---", 'title: "one of each"', "---", "flowchart TD"]
    # executors in rank order, the start a stadium; hubs after them
    assert lines[4:13] == [
        '    n0(["start"])',
        '    n1["a"]',
        '    n2["b"]',
        '    n3["c"]',
        '    n4["collect"]',
        '    n5["e"]',
        '    n6["f"]',
        '    n7["asker"]',
        '    fan_out_1[/"fan-out (selector)"\\]',
    ]
    assert '    fan_in_2[\\"fan-in"/]' in lines
    assert '    switch_3{"switch"}' in lines
    links = [line.strip() for line in lines if re.match(r"\s+\w+ [-=.]+>", line)]
    assert links == [
        'n0 -.->|"if"| n1',
        "n1 ==> fan_out_1",
        "fan_out_1 ==> n2",
        "fan_out_1 ==> n3",
        "n2 ==> fan_in_2",
        "n3 ==> fan_in_2",
        "fan_in_2 ==> n4",
        "n1 --> switch_3",
        'switch_3 -->|"case 1"| n5',
        'switch_3 -->|"case 2"| n6',
        'switch_3 -->|"default"| n7',
        'n7 -.->|"handoff (approval)"| n5',
        "n5 --> n6",
    ]
    # Mermaid has one broken line; link styles tell a condition from a handoff.
    assert "    linkStyle 0 stroke-dasharray: 8 4" in lines
    assert "    linkStyle 11 stroke:#7b1fa2,stroke-dasharray: 2 3" in lines
    assert "    class fan_out_1,fan_in_2,switch_3 hub" in lines
    assert "    class n0 start" in lines


def is_urgent(message: int) -> bool:
    return message > 1


def is_large(message: int) -> bool:
    return message > 100


def test_a_switch_case_and_a_condition_are_labelled_with_their_condition():
    start, a, e, f = (passer(i) for i in ("start", "a", "e", "f"))
    named = (
        WorkflowBuilder(start=start, name="named")
        .add_edge(start, a, condition=is_large)
        .add_switch(a, [Case(is_urgent, e), Case(lambda m: m > 2, f), Default(f)])
        .build()
    )
    for text in (named.to_mermaid(), named.to_dot()):
        assert "is_urgent" in text
        assert "if is_large" in text
        assert "case 2" in text  # a lambda has no name: its place stands for it
        assert "case 1" not in text
    declared = loads(
        """
name: declared
start: triage
nodes:
  triage: {step: output}
  urgent: {step: output}
  later: {step: output}
edges:
  - from: triage
    switch:
      - {when: "message.priority > 3", to: urgent}
      - {default: later}
"""
    )
    assert '-->|"message.priority #62; 3"|' in declared.to_mermaid()
    assert 'label="  message.priority > 3  "' in declared.to_dot()


def test_mermaid_labels_plain_fan_out_and_handoff_without_approval():
    text = EVERY_KIND.to_mermaid()
    assert '[/"fan-out"\\]' in text
    assert '[/"fan-out (selector)"\\]' in text
    assert '-.->|"handoff"|' in text
    assert '-.->|"handoff (approval)"|' in text


NASTY_IDS = [
    'say "hi"',
    "a-b --> c",
    "naïve ünïcode ✓ 日本語",
    "back\\slash\\N",
    "semi;colon|pipe",
    "<b>html</b> &amp; &",
    "#35; hash #",
    "end",
    "graph",
    "new\nline",
    "tab\there",
    "%%{init: {'theme': 'dark'}}%%",
    "`tick`",
    "[brackets]{braces}(parens)",
    "n0",
    "style x fill:#f00;",
    "with spaces and - dashes -",
]


def shown(executor_id: str) -> list[str]:
    """The lines of text a picture should show for an id."""
    return executor_id.replace("\t", "\\t").split("\n")


def test_mermaid_node_lines_never_carry_a_raw_user_character():
    text = small_graph(NASTY_IDS).to_mermaid()
    node_lines = [line for line in text.splitlines() if re.match(r"\s+n\d+[\[(]", line)]
    assert len(node_lines) == len(NASTY_IDS)
    for line in node_lines:
        label = re.fullmatch(r'\s+n\d+\(?\["(.*)"\]\)?', line)
        assert label is not None, line
        # only letters, digits, spaces, harmless punctuation and #code; escapes
        assert re.fullmatch(r"([\w ,./()'!?+=-]|#\d+;|<br>)*", label[1]), line
    assert '    n0(["say #34;hi#34;"])' in text
    assert '    n9["new<br>line"]' in text
    assert '    n10["tab#92;there"]' in text
    assert '    n15["style x fill#58;#35;f00#59;"]' in text


def test_mermaid_title_is_a_quoted_yaml_string():
    workflow = WorkflowBuilder(start=passer("x"), name='say "hi"\n---').build()
    assert workflow.to_mermaid().splitlines()[:3] == ["---", 'title: "say \\"hi\\" ---"', "---"]


# -- DOT text -------------------------------------------------------------------


def test_dot_draws_each_edge_kind_its_own_way():
    text = one_of_each().to_dot()
    lines = text.splitlines()
    assert lines[0] == 'digraph "one of each" {'
    assert lines[-1] == "}"
    assert '    n0 [label="start", style="filled,rounded,bold"];' in lines
    assert '    n1 [label="a", style="filled"];' in lines
    assert (
        '    fan_out_1 [label="fan-out (selector)", shape=trapezium, style=filled, '
        'fillcolor="#eeeeee", fontsize=10];'
    ) in lines
    assert any(line.startswith('    fan_in_2 [label="fan-in", shape=invtrapez') for line in lines)
    assert any(line.startswith('    switch_3 [label="switch", shape=diamond') for line in lines)
    links = [line.strip() for line in lines if " -> " in line]
    assert links == [
        'n0 -> n1 [style=dashed, label="  if  "];',
        "n1 -> fan_out_1 [style=bold];",
        "fan_out_1 -> n2 [style=bold];",
        "fan_out_1 -> n3 [style=bold];",
        "n2 -> fan_in_2 [style=bold];",
        "n3 -> fan_in_2 [style=bold];",
        "fan_in_2 -> n4 [style=bold];",
        "n1 -> switch_3;",
        'switch_3 -> n5 [label="  case 1  "];',
        'switch_3 -> n6 [label="  case 2  "];',
        'switch_3 -> n7 [label="  default  "];',
        (
            'n7 -> n5 [style=dotted, color="#7b1fa2", fontcolor="#7b1fa2", penwidth=1.5, '
            'label="  handoff (approval)  "];'
        ),
        "n5 -> n6;",
    ]


def test_dot_edge_kinds_look_different():
    styles = {}
    for line in EVERY_KIND.to_dot().splitlines():
        match = re.fullmatch(r"\s+(\w+) -> (\w+)(?: \[(.*)\])?;", line)
        if match:
            attributes = re.sub(r',? ?label="[^"]*"', "", match[3] or "")
            label = re.sub(r'.*label="\s*(.*?)\s*".*', r"\1", line)
            styles.setdefault(attributes, set()).add(label)
    plain, conditional, fan, handoff, error = (
        "",
        "style=dashed",
        "style=bold",
        'style=dotted, color="#7b1fa2", fontcolor="#7b1fa2", penwidth=1.5',
        'style=dashed, color="#c62828", fontcolor="#c62828"',
    )
    assert set(styles) == {plain, conditional, fan, handoff, error}
    assert styles[conditional] == {"if", "if is_good"}
    assert styles[handoff] == {"handoff", "handoff (approval)"}
    assert styles[error] == {"on error"}


def dot_labels(text: str) -> list[str]:
    """Every node label of a DOT text, unescaped as Graphviz reads it."""
    found = re.findall(r'^\s+n\d+ \[label="((?:[^"\\]|\\.)*)"', text, re.MULTILINE)
    return [
        re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], label).replace("&amp;", "&")
        for label in found
    ]


def test_dot_labels_unescape_to_the_ids():
    text = small_graph(NASTY_IDS).to_dot()
    assert dot_labels(text) == [i.replace("\t", "\\t") for i in NASTY_IDS]
    assert '    n3 [label="back\\\\slash\\\\N", style="filled"];' in text
    assert '    n5 [label="<b>html</b> &amp;amp; &amp;", style="filled"];' in text


# -- marks ------------------------------------------------------------------------

MARKS = {"b": "ran", "a": "running", "e": "waiting", "start": "failed"}


def test_mermaid_marks_are_class_definitions():
    lines = one_of_each().to_mermaid(marks=MARKS).splitlines()
    assert lines[-8:] == [
        "    classDef ran fill:#d4edda,stroke:#2e7d32,color:#1b5e20",
        "    class n2 ran",
        "    classDef running fill:#d0e4ff,stroke:#1565c0,color:#0d47a1,stroke-width:3px",
        "    class n1 running",
        "    classDef waiting fill:#fff3cd,stroke:#b58900,color:#6d4c00,stroke-dasharray: 5 3",
        "    class n5 waiting",
        "    classDef failed fill:#f8d7da,stroke:#c62828,color:#b71c1c,stroke-width:3px",
        "    class n0 failed",
    ]
    assert "classDef ran" not in one_of_each().to_mermaid()


def test_dot_marks_fill_the_executors():
    lines = one_of_each().to_dot(marks=MARKS).splitlines()
    assert '    n2 [label="b", style="filled", fillcolor="#d4edda", color="#2e7d32"];' in lines
    assert (
        '    n1 [label="a", style="filled", fillcolor="#d0e4ff", color="#1565c0", penwidth=3];'
    ) in lines
    assert (
        '    n5 [label="e", style="filled,dashed", fillcolor="#fff3cd", color="#b58900", '
        "penwidth=2];"
    ) in lines
    # a marked start executor keeps its rounded, bold box
    assert (
        '    n0 [label="start", style="filled,rounded,bold", fillcolor="#f8d7da", '
        'color="#c62828", penwidth=3];'
    ) in lines
    assert '    n6 [label="f", style="filled"];' in lines


@pytest.mark.parametrize("render", ["to_mermaid", "to_dot"])
def test_unknown_marks_are_refused_by_name(render: str):
    draw = getattr(one_of_each(), render)
    with pytest.raises(ValueError, match="unknown executors: 'ghost', 'nobody'"):
        draw(marks={"nobody": "ran", "a": "ran", "ghost": "failed"})
    with pytest.raises(ValueError, match=r"unknown marks 'done' \(use 'ran', 'running'"):
        draw(marks={"a": "done"})
    with pytest.raises(ValueError, match=r"unknown executors: 'x'; unknown marks 'ok', 'yes'"):
        draw(marks={"x": "ran", "a": "yes", "b": "ok"})


# -- determinism ------------------------------------------------------------------


@pytest.mark.parametrize("render", ["to_mermaid", "to_dot"])
def test_the_same_graph_gives_the_same_text(render: str):
    first = getattr(one_of_each(), render)(marks=MARKS)
    again = getattr(one_of_each(), render)(marks=dict(reversed(MARKS.items())))
    assert first == again
    assert getattr(EVERY_KIND, render)() == getattr(EVERY_KIND, render)()


# -- the real tools (installed by `make renderers`) ---------------------------------


def run_tool(*command: str | Path) -> None:
    tool = Path(command[0])
    assert tool.is_file(), f"{tool} is missing: run `make renderers`"
    done = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == 0, f"{tool.name} failed:\n{done.stdout}\n{done.stderr}"


def mermaid_svg(text: str, tmp_path: Path) -> Path:
    assert PUPPETEER_CONFIG.exists(), f"{PUPPETEER_CONFIG} is missing: run `make renderers`"
    source, picture = tmp_path / "in.mmd", tmp_path / "out.svg"
    source.write_text(text, encoding="utf-8")
    run_tool(MMDC, "--quiet", "-i", source, "-o", picture, "-p", PUPPETEER_CONFIG)
    assert picture.stat().st_size > 0
    return picture


def dot_picture(text: str, tmp_path: Path, kind: str) -> Path:
    source, picture = tmp_path / "in.dot", tmp_path / f"out.{kind}"
    source.write_text(text, encoding="utf-8")
    run_tool(DOT, f"-T{kind}", "-o", picture, source)
    assert picture.stat().st_size > 0
    return picture


def svg_texts(picture: Path) -> set[str]:
    """Every piece of text an SVG shows (not its stylesheet)."""
    texts = set()
    for element in ET.parse(picture).getroot().iter():  # noqa: S314 - the tools' own output
        if element.tag.rsplit("}", 1)[-1] == "style":
            continue
        texts.update(t for t in (element.text, element.tail) if t and t.strip())
    return texts


@pytest.mark.integration
def test_mmdc_draws_every_edge_kind_with_marks(tmp_path: Path):
    marks = {"receive": "ran", "triage": "ran", "research": "failed", "billing desk": "waiting"}
    texts = svg_texts(mermaid_svg(EVERY_KIND.to_mermaid(marks=marks), tmp_path))
    expected = {"fan-out", "fan-out (selector)", "fan-in", "switch", "if", "case 1", "case 2"}
    expected |= {"default", "handoff", "handoff (approval)", "on error"}
    expected |= set(EVERY_KIND.executor_ids)
    assert expected <= texts


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["svg", "png"])
def test_dot_draws_every_edge_kind_with_marks(tmp_path: Path, kind: str):
    marks = {"receive": "ran", "triage": "running", "refunds": "waiting", "check": "failed"}
    picture = dot_picture(EVERY_KIND.to_dot(marks=marks), tmp_path, kind)
    if kind == "png":
        assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    else:
        texts = {t.strip() for t in svg_texts(picture)}
        expected = {"fan-out", "fan-out (selector)", "fan-in", "switch", "if", "case 1"}
        expected |= {"default", "handoff", "handoff (approval)", "on error"}
        expected |= set(EVERY_KIND.executor_ids)
        assert expected <= texts


@pytest.mark.integration
def test_both_tools_show_awkward_ids_as_written(tmp_path: Path):
    workflow = small_graph(NASTY_IDS)
    mermaid = svg_texts(mermaid_svg(workflow.to_mermaid(), tmp_path))
    dot = svg_texts(dot_picture(workflow.to_dot(), tmp_path, "svg"))
    for executor_id in NASTY_IDS:
        for line in shown(executor_id):
            assert line in mermaid, f"mmdc shows no {line!r}"
            assert line in dot, f"dot shows no {line!r}"
