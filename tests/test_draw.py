"""Diagrams: graphviz structure (nodes, shapes, labels, merged edges), networkx graphs, rendering."""

from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.bounded import DyckConfig, DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.draw import (
    RenderError,
    draw,
    merged_edges,
    render,
    state_graph,
    string_text,
    to_networkx,
)
from pdanet.errors import InputError

_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s\]]+)')
_NODE = re.compile(r"^\t(\w+) \[(.*)\]$")
_EDGE = re.compile(r"^\t(\w+) -> (\w+)(?: \[(.*)\])?$")


def _attrs(text: str | None) -> dict:
    out = {}
    for key, value in _ATTR.findall(text or ""):
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"')
        out[key] = value
    return out


def parse(dot) -> tuple[dict, list]:
    """Nodes {name: attrs} and edges [(src, dst, attrs)] from a graphviz Digraph's body."""
    nodes, edges = {}, []
    for line in dot.body:
        line = line.rstrip("\n")
        if m := _EDGE.match(line):
            edges.append((m.group(1), m.group(2), _attrs(m.group(3))))
        elif (m := _NODE.match(line)) and m.group(1) not in ("node", "edge", "graph"):
            nodes[m.group(1)] = _attrs(m.group(2))
    return nodes, edges


def _optional(module: str, name: str):
    mod = pytest.importorskip(f"pdanet.automata.{module}")
    if not hasattr(mod, name):
        pytest.skip(f"pdanet.automata.{module}.{name} not available")
    return getattr(mod, name)


def test_dfa_diagram():
    m = DFA(["p", "q", "r"], "ab", {("p", "a"): "q", ("p", "b"): "q", ("q", "a"): "r",
                                    ("r", "a"): "r"}, "p", {"r"}, name="demo")
    nodes, edges = parse(draw(m))
    assert nodes["__start__"]["shape"] == "none" and nodes["__start__"]["label"] == ""
    labels = {n: a["label"] for n, a in nodes.items() if n != "__start__"}
    assert labels == {"q0": "p", "q1": "q", "q2": "r"}
    assert nodes["q2"]["shape"] == "doublecircle"
    assert nodes["q0"]["shape"] == nodes["q1"]["shape"] == "circle"
    by_pair = {(s, d): a.get("label") for s, d, a in edges}
    assert by_pair[("__start__", "q0")] is None
    # the two transitions p→q are merged into one edge with a two-line label
    assert by_pair[("q0", "q1")].split("\\n") == ["a", "b"]
    assert by_pair[("q1", "q2")] == "a" and by_pair[("q2", "q2")] == "a"
    assert len(edges) == 4


def test_mealy_labels():
    m = DFA([0, 1], "ab", {(0, "a"): 1, (1, "b"): 0, (1, "a"): 1}, 0,
            outputs={(0, "a"): "x", (1, "b"): "y", (1, "a"): "x"})
    _, edges = parse(draw(m))
    by_pair = {(s, d): a.get("label") for s, d, a in edges}
    assert by_pair[("q0", "q1")] == "a : x"
    assert by_pair[("q1", "q0")] == "b : y"
    assert by_pair[("q1", "q1")] == "a : x"


@st.composite
def dfas(draw):
    n = draw(st.integers(1, 5))
    alphabet = "abc"
    trans = {(q, a): draw(st.integers(0, n - 1)) for q in range(n) for a in alphabet
             if draw(st.booleans())}
    return DFA(range(n), alphabet, trans, 0, draw(st.sets(st.integers(0, n - 1))))


@settings(max_examples=60)
@given(dfas())
def test_random_dfa_structure(m):
    nodes, edges = parse(draw(m))
    shapes = {n: a["shape"] for n, a in nodes.items() if n != "__start__"}
    assert shapes == {f"q{i}": "doublecircle" if i in m.accepting else "circle"
                      for i in range(m.num_states)}
    drawn = Counter()
    for s, d, a in edges:
        if s == "__start__":
            assert d == "q0"
            continue
        for sym in a["label"].split("\\n"):
            drawn[(int(s[1:]), sym, int(d[1:]))] += 1
    assert drawn == Counter({(q, a, t): 1 for (q, a), t in m.transitions.items()})
    # one edge per ordered pair of states
    pairs = [(s, d) for s, d, _ in edges]
    assert len(pairs) == len(set(pairs))
    g = to_networkx(m)
    assert g.number_of_edges() == len(m.transitions)
    assert {(u, d["symbol"], v) for u, v, d in g.edges(data=True)} == \
        {(q, a, t) for (q, a), t in m.transitions.items()}
    assert [q for q, d in g.nodes(data=True) if d["start"]] == [0]
    assert {q for q, d in g.nodes(data=True) if d["accepting"]} == set(m.accepting)


def test_dyck_configuration_graph_matches_machine():
    m = DyckKM(2, 3)
    g = to_networkx(m)
    assert g.number_of_nodes() == m.num_configs
    for u, v, d in g.edges(data=True):
        assert m.step(DyckConfig(u), d["symbol"]) == DyckConfig(v)
    # every legal move of the machine is an edge
    for u in g.nodes:
        for sym in m.alphabet:
            nxt = m.step(DyckConfig(u), sym)
            if not nxt.dead:
                assert any(d["symbol"] == sym for _, v, d in g.out_edges(u, data=True)
                           if v == nxt.stack)
    nodes, _ = parse(draw(m))
    assert nodes["q0"]["label"] == "⊥" and nodes["q0"]["shape"] == "doublecircle"
    assert sorted(a["label"] for n, a in nodes.items() if n != "__start__")[:3] == \
        ["⊥", "⊥(", "⊥(("]


def test_dyck_large_is_schematic():
    m = DyckKM(1000, 4)
    g = state_graph(m)
    assert g.schematic and len(g.states) == 5
    nodes, edges = parse(draw(m))
    assert nodes["q0"]["label"] == "depth 0" and nodes["q0"]["shape"] == "doublecircle"
    assert len([e for e in edges if e[0] != "__start__"]) == 2 * 4
    with pytest.raises(InputError, match="max_configs"):
        to_networkx(m)
    assert not state_graph(DyckKM(2, 2)).schematic
    assert state_graph(DyckKM(2, 2), max_configs=6).schematic


def test_string_text():
    assert string_text(()) == "ε"
    assert string_text(("A", BOTTOM)) == "A⊥"
    assert string_text(("AB", "C")) == "AB C"
    assert string_text((EPSILON,)) == "ε"


def test_nfa_labels():
    NFA = _optional("nfa", "NFA")
    m = NFA([0, 1, 2], "ab", {(0, EPSILON): {1, 2}, (1, "a"): {1, 2}, (2, "b"): {0}}, [0, 1],
            [2])
    nodes, edges = parse(draw(m))
    starts = sorted(d for s, d, _ in edges if s == "__start__")
    assert starts == ["q0", "q1"]
    by_pair = {(s, d): a.get("label") for s, d, a in edges}
    assert by_pair[("q0", "q1")] == "ε" and by_pair[("q0", "q2")] == "ε"
    assert by_pair[("q1", "q2")] == "a"
    assert nodes["q2"]["shape"] == "doublecircle"


def test_dpda_labels():
    DPDA = _optional("pda", "DPDA")
    m = DPDA(["q0", "q1"], "ab", ["A"], {
        ("q0", "a", BOTTOM): ("q0", ("A", BOTTOM)),
        ("q0", "a", "A"): ("q0", ("A", "A")),
        ("q0", "b", "A"): ("q1", ()),
        ("q1", "b", "A"): ("q1", ()),
        ("q1", EPSILON, BOTTOM): ("q0", (BOTTOM,)),
    }, "q0", ["q0"])
    _, edges = parse(draw(m))
    by_pair = {(s, d): a.get("label") for s, d, a in edges}
    assert sorted(by_pair[("q0", "q0")].split("\\n")) == ["a, A → AA", "a, ⊥ → A⊥"]
    assert by_pair[("q0", "q1")] == "b, A → ε"
    assert by_pair[("q1", "q0")] == "ε, ⊥ → ⊥"
    g = to_networkx(m)
    (_, _, d), = [e for e in g.edges(data=True) if e[0] == "q0" and e[1] == "q1"]
    assert d["symbol"] == "b" and d["pop"] == "A" and d["push"] == ()


def test_dpdt_labels():
    DPDT = _optional("pdt", "DPDT")
    trans = {("q0", x, s): ("q0", "#", (x, s)) for x in "ab" for s in ("a", "b", BOTTOM)}
    trans.update({("q0", "#", s): ("q1", s, ()) for s in "ab"})
    trans.update({("q1", "#", s): ("q1", s, ()) for s in "ab"})
    m = DPDT(["q0", "q1"], "ab#", "ab#", "ab", trans, "q0")
    _, edges = parse(draw(m))
    by_pair = {(s, d): a.get("label") for s, d, a in edges}
    loop = by_pair[("q0", "q0")].split("\\n")
    assert "a : #, ⊥ → a⊥" in loop and "b : #, a → ba" in loop and len(loop) == 6
    assert sorted(by_pair[("q0", "q1")].split("\\n")) == ["# : a, a → ε", "# : b, b → ε"]
    g = to_networkx(m)
    assert g.number_of_edges() == len(trans)
    assert {d["output"] for *_, d in g.edges(data=True)} == {"#", "a", "b"}


def test_merged_edges_order():
    m = DFA([0, 1], "abc", {(0, "c"): 1, (0, "a"): 1, (0, "b"): 0}, 0)
    merged = merged_edges(state_graph(m))
    assert sorted(merged[(0, 1)]) == ["a", "c"] and merged[(0, 0)] == ["b"]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_render_svg(tmp_path):
    m = DFA([0, 1], "ab", {(0, "a"): 1, (1, "b"): 0}, 0, {1}, name="tiny")
    out = render(m, tmp_path / "tiny.svg")
    text = out.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert text.count('class="node"') == 3  # two states and the invisible start node
    assert text.count('class="edge"') == 3


def test_render_errors(tmp_path, monkeypatch):
    m = DFA([0], "a", {(0, "a"): 0}, 0)
    with pytest.raises(InputError, match="format"):
        render(m, tmp_path / "x.gif")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RenderError, match="dot"):
        render(m, tmp_path / "x.svg")
    assert not (tmp_path / "x.svg").exists()


def test_named_tasks_draw():
    import inspect

    tasks = pytest.importorskip("pdanet.automata.tasks")
    for name in tasks.names():
        factory = tasks.task(name).machine_factory
        params = {"vocab_size": 4} if "vocab_size" in inspect.signature(factory).parameters else {}
        m = tasks.get(name, **params)
        assert m is not None, name
        graph = state_graph(m)
        nodes, edges = parse(draw(m))
        assert len(nodes) == len(graph.states) + 1, name  # + the invisible start node
        assert len(edges) == len(merged_edges(graph)) + len(graph.starts), name
        drawn = sum(len(a["label"].split("\\n")) for s, _, a in edges if s != "__start__")
        assert drawn == len(graph.transitions), name
        if isinstance(m, DyckKM):
            continue
        trans = m.transitions
        count = sum(len(v) if isinstance(v, (set, frozenset)) else 1 for v in trans.values())
        assert to_networkx(m).number_of_edges() == count, name


def test_store_transducer_draw():
    from pdanet.automata import tasks

    m = tasks.get("sequence_copy", vocab_size=2)
    src = draw(m).source
    assert "s0 : #, ⊥ → push s0" in src and "# : s0, s0 → pop" in src


def test_dyck_schematic_has_bounded_size_for_any_depth():
    """Dyck-(10⁹, 10⁹): the configuration count is never built and the schematic elides the
    middle depths (drawing it once hung on Σ kⁱ)."""
    m = DyckKM(10**9, 10**9)
    assert m.configs_exceed(10**6)
    source = draw(m).source
    assert "…" in source and f"depth {10**9}" in source and len(source) < 5000
    for k, depth in ((1, 5), (2, 3), (3, 2)):
        small = DyckKM(k, depth)
        assert all(small.configs_exceed(n) == (small.num_configs > n) for n in range(40))
