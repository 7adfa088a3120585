"""State diagrams of machines: graphviz drawings and networkx graphs.

Drawing conventions (those of the source papers' figures): states are circles, accepting states
double circles; an invisible node points at the start state; edges are labelled

- DFA and NFA: ``a`` (``ε`` for an ε-move),
- Mealy machine: ``a : y`` (read a, emit y),
- PDA: ``a, X → γ`` (read a, pop X, push γ written top first; ``ε`` for an empty γ),
- PDT: ``x : y, s → s′`` (Hao et al. 2018, Figure 3),
- store transducer (stack, queue, deque): ``a : y, X → op`` (op: ``push Y``, ``pop`` …),
- PFSA: ``a / p`` (the probability of reading a in the source state); a state with an EOS
  probability is a double circle labelled ``q`` and ``EOS p``,
- probabilistic DPDA: ``a / p, X → γ``; its states list their EOS probabilities per top
  (``EOS ⊥: p``),
- weighted PDA: ``a, X → op Y / w`` (read a, with X on top do the one stack operation
  ``push Y``, ``replace Y`` or ``pop``, with weight w in the machine's semiring); weighted PDT:
  ``a : y, X → op Y / w`` (y the emitted string). The title names the semiring and, when set,
  empty-stack acceptance; with ``accepting=None`` (every run counts) every state is a double
  circle,

with ``ε`` and ``⊥`` shown as such. Transitions between the same two states share one edge whose
label has one line per transition. A partial DFA's implicit dead state is not drawn.

Dyck-(k, m): when it has at most ``max_configs`` configurations it is drawn (and converted to
networkx) as its finite configuration graph, one node per stack (written ``⊥`` then the open
brackets, bottom first). Larger instances are drawn as a schematic with one node per stack depth
0..m; `to_networkx` refuses them (InputError), since their graph has Σ kⁱ nodes.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

import graphviz
import networkx as nx
import numpy as np

from pdanet import limits
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.bounded import DyckKM
from pdanet.automata.io import kind_of
from pdanet.automata.store import StoreTransducer
from pdanet.errors import InputError, PdanetError

MAX_DYCK_CONFIGS = 64
RENDER_FORMATS = ("svg", "png", "pdf")


class RenderError(PdanetError):
    """A diagram could not be rendered (Graphviz's `dot` is missing or failed)."""


# --------------------------------------------------------------------------------------------
# labels
# --------------------------------------------------------------------------------------------
def symbol_text(symbol: Any) -> str:
    """A symbol as shown in diagrams and traces: ε and ⊥ as such, others by str."""
    if symbol is EPSILON or symbol is None:
        return "ε"
    if symbol is BOTTOM:
        return "⊥"
    return str(symbol)


def string_text(symbols: Iterable[Any]) -> str:
    """A string of symbols: concatenated when all are one character, else space separated;
    ``ε`` when empty."""
    parts = [symbol_text(s) for s in symbols]
    if not parts:
        return "ε"
    return ("" if all(len(p) == 1 for p in parts) else " ").join(parts)


@dataclass(frozen=True)
class Transition:
    """One drawn transition: source and target state, its label, and its data fields."""

    source: Hashable
    target: Hashable
    label: str
    data: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class StateGraph:
    """The states (in order), start, accepting states and transitions of a machine's diagram."""

    title: str
    kind: str
    states: tuple
    starts: tuple
    accepting: frozenset
    transitions: tuple[Transition, ...]
    state_labels: tuple[tuple[Hashable, str], ...] = ()
    schematic: bool = False

    def label_of(self, q: Hashable) -> str:
        return self._labels.get(q, str(q)) if self.state_labels else str(q)

    @cached_property
    def _labels(self) -> dict:
        return dict(self.state_labels)


def _fa_rows(m: Any, kind: str) -> list[Transition]:
    rows = []
    order = {q: i for i, q in enumerate(m.states)} if kind == "nfa" else {}
    for (q, a), t in m.transitions.items():
        targets = sorted(t, key=order.__getitem__) if kind == "nfa" else [t]
        for t2 in targets:
            if kind == "mealy":
                y = m.outputs_map[(q, a)]
                rows.append(Transition(q, t2, f"{symbol_text(a)} : {symbol_text(y)}",
                                       (("symbol", a), ("output", y))))
            else:
                rows.append(Transition(q, t2, symbol_text(a), (("symbol", a),)))
    return rows


def _pushdown_rows(m: Any, kind: str) -> list[Transition]:
    rows = []
    for (q, x, s), value in m.transitions.items():
        values = sorted(value, key=repr) if kind == "pda" else [value]
        for v in values:
            if kind == "dpdt":
                q2, y, gamma = v
                y = tuple(y) if isinstance(y, (tuple, list)) else (() if y is EPSILON else (y,))
                label = f"{symbol_text(x)} : {string_text(y)}, {symbol_text(s)} → {string_text(gamma)}"
                out = y[0] if len(y) == 1 else EPSILON if not y else y
                data = (("symbol", x), ("output", out), ("pop", s), ("push", tuple(gamma)))
            else:
                q2, gamma = v
                label = f"{symbol_text(x)}, {symbol_text(s)} → {string_text(gamma)}"
                data = (("symbol", x), ("pop", s), ("push", tuple(gamma)))
            rows.append(Transition(q, q2, label, data))
    return rows


def _store_rows(m: StoreTransducer) -> list[Transition]:
    """``a : y, X → op``: read a, emit y (ε: nothing), with X at the end the state looks at
    (⊥: empty store); op is ``noop``, ``pop``, ``push Y``, ``replace Y`` (deques: ``push_top Y``,
    ``pop_bottom`` …), as in `pdanet.automata.store`."""
    rows = []
    for (q, a, x), mv in m.transitions.items():
        op = mv.op if mv.symbol is None else f"{mv.op} {symbol_text(mv.symbol)}"
        label = f"{symbol_text(a)} : {symbol_text(mv.output)}, {symbol_text(x)} → {op}"
        rows.append(Transition(q, mv.target, label, (("symbol", a), ("output", mv.output),
                                                     ("read", x), ("op", op))))
    return rows


def prob_text(p: Any) -> str:
    """A probability in a diagram: exact ones as written ("3/8"), floats to 4 digits."""
    return str(p) if isinstance(p, Fraction) else f"{float(p):.4g}"


def _pfsa_rows(m: Any) -> list[Transition]:
    return [Transition(q, t, f"{symbol_text(a)} / {prob_text(p)}",
                       (("symbol", a), ("probability", p)))
            for (q, a), (t, p) in m.transitions.items()]


def _pdpda_rows(m: Any) -> list[Transition]:
    rows = []
    for (q, a, x), (q2, gamma, p) in m.transitions.items():
        label = f"{symbol_text(a)} / {prob_text(p)}, {symbol_text(x)} → {string_text(gamma)}"
        rows.append(Transition(q, q2, label, (("symbol", a), ("pop", x), ("push", tuple(gamma)),
                                              ("probability", p))))
    return rows


def weight_text(w: Any) -> str:
    """A weight in a diagram: booleans as true/false, exact ones as written ("3/8"), other
    numbers to 4 digits (``inf``/``-inf`` for the infinite zeros)."""
    if isinstance(w, (bool, np.bool_)):
        return "true" if w else "false"
    return prob_text(w)


def _weighted_rows(m: Any) -> list[Transition]:
    """``a, X → op Y / w`` (PDA) and ``a : y, X → op Y / w`` (PDT) per transition."""
    rows = []
    pdt = len(next(iter(m.transitions), ())) == 7
    for key, w in m.transitions.items():
        q, x, a, r, op, y = key[:6]
        act = "pop" if op == "pop" else f"{op} {symbol_text(y)}"
        read = f"{symbol_text(a)} : {string_text(key[6])}" if pdt else symbol_text(a)
        data = (("symbol", a),) + ((("output", key[6]),) if pdt else ()) + (
            ("top", x), ("op", op), ("operand", y), ("weight", w))
        rows.append(Transition(q, r, f"{read}, {symbol_text(x)} → {act} / {weight_text(w)}",
                               data))
    return rows


def _eos_labels(m: Any, kind: str) -> tuple[tuple[Hashable, str], ...]:
    """State labels with their EOS probabilities (per top for a probabilistic DPDA)."""
    lines: dict = {q: [str(q)] for q in m.states}
    for key, p in m.final.items():
        if kind == "pfsa":
            lines[key].append(f"EOS {prob_text(p)}")
        else:
            lines[key[0]].append(f"EOS {symbol_text(key[1])}: {prob_text(p)}")
    return tuple((q, "\n".join(v)) for q, v in lines.items())


def _dyck_graph(m: DyckKM) -> StateGraph:
    stacks: list[tuple] = [()]
    frontier: list[tuple] = [()]
    while frontier:
        nxt = []
        for s in frontier:
            if len(s) < m.m:
                for i in range(m.k):
                    nxt.append(s + (i,))
        stacks.extend(nxt)
        frontier = nxt
    rows = []
    for s in stacks:
        if len(s) < m.m:
            for i in range(m.k):
                rows.append(Transition(s, s + (i,), m.opens[i],
                                       (("symbol", m.opens[i]), ("push", (i,)))))
        if s:
            c = m.closes[s[-1]]
            rows.append(Transition(s, s[:-1], c, (("symbol", c), ("pop", s[-1]))))
    sep = "" if m.k <= 4 else " "
    labels = tuple((s, sep.join(("⊥",) + tuple(m.opens[i] for i in s))) for s in stacks)
    return StateGraph(f"Dyck-({m.k}, {m.m})", "dyck", tuple(stacks), ((),), frozenset({()}),
                      tuple(rows), labels)


SCHEMATIC_DEPTHS = 8  # a deeper Dyck-(k, m) schematic shows depths 0–3 and m − 1, m, and "…"


def _dyck_schematic(m: DyckKM) -> StateGraph:
    """One node per stack depth; for m > `SCHEMATIC_DEPTHS` the middle depths are one "…" node,
    so the drawing has a bounded size whatever m is."""
    if m.m <= SCHEMATIC_DEPTHS:
        nodes: list = list(range(m.m + 1))
    else:
        nodes = [0, 1, 2, 3, "…", m.m - 1, m.m]
    rows = []
    for a, b in itertools.pairwise(nodes):
        top = "⊥" if a == 0 else "X"
        rows.append(Transition(a, b, f"(ᵢ, {top} → (ᵢ{top}   (i = 0…{m.k - 1})", ()))
        rows.append(Transition(b, a, ")ᵢ, (ᵢ → ε", ()))
    labels = tuple((d, "…" if d == "…" else f"depth {d}") for d in nodes)
    return StateGraph(f"Dyck-({m.k}, {m.m}) schematic: one node per stack depth", "dyck",
                      tuple(nodes), (0,), frozenset({0}), tuple(rows), labels, True)


def state_graph(machine: Any, max_configs: int = MAX_DYCK_CONFIGS) -> StateGraph:
    """The diagram content of a machine (see module docstring); DyckKM beyond `max_configs`
    configurations gives the depth schematic.

    Guarded by ``pdanet.limits.max_states``: a machine with more states (a Dyck graph with more
    configurations) raises ResourceError before anything is built.
    """
    if isinstance(max_configs, bool) or not isinstance(max_configs, int) or max_configs < 1:
        raise InputError(f"max_configs={max_configs!r} must be a positive integer")
    kind = "store" if isinstance(machine, StoreTransducer) else kind_of(machine)
    hint = ("draw a smaller machine (e.g. its .minimize() or .trim()), or read its "
            "transition table instead of a diagram")
    if kind == "dyck":
        if not machine.configs_exceed(max_configs):
            limits.check(f"drawing {machine!r}", machine.num_configs, "max_states", hint=hint)
            return _dyck_graph(machine)
        return _dyck_schematic(machine)
    if kind in ("wpda", "wpdt"):
        pda = machine.pda if kind == "wpdt" else machine
        limits.check(f"drawing {machine!r}", len(pda.states), "max_states", hint=hint)
        notes = [f"{pda.semiring.name} weights"] + (["empty stack"] if pda.empty_stack else [])
        title = f"{pda.name} ({', '.join(notes)})" if pda.name else f"({', '.join(notes)})"
        acc = pda.states if pda.accepting is None else pda.accepting
        return StateGraph(title, kind, tuple(pda.states), (pda.start,), frozenset(acc),
                          tuple(_weighted_rows(machine)))
    limits.check(f"drawing {machine!r}", len(machine.states), "max_states", hint=hint)
    if kind in ("pfsa", "pdpda"):
        rows = _pfsa_rows(machine) if kind == "pfsa" else _pdpda_rows(machine)
        finals = {k if kind == "pfsa" else k[0] for k in machine.final}
        return StateGraph(getattr(machine, "name", None) or "", kind, tuple(machine.states),
                          (machine.start,), frozenset(finals), tuple(rows),
                          _eos_labels(machine, kind))
    if kind in ("dfa", "mealy", "nfa"):
        rows = _fa_rows(machine, kind)
    elif kind == "store":
        rows = _store_rows(machine)
    else:
        rows = _pushdown_rows(machine, kind)
    title = getattr(machine, "name", None) or ""
    if kind == "nfa":
        starts = tuple(q for q in machine.states if q in machine.starts)
    else:
        starts = (machine.start,)
    return StateGraph(title, kind, tuple(machine.states), starts,
                      frozenset(machine.accepting), tuple(rows))


# --------------------------------------------------------------------------------------------
# graphviz
# --------------------------------------------------------------------------------------------
def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\")


def merged_edges(graph: StateGraph) -> dict[tuple[Hashable, Hashable], list[str]]:
    """Edge labels grouped by (source, target), in transition order."""
    merged: dict[tuple[Hashable, Hashable], list[str]] = {}
    for t in graph.transitions:
        merged.setdefault((t.source, t.target), []).append(t.label)
    return merged


def draw(machine: Any, max_configs: int = MAX_DYCK_CONFIGS) -> graphviz.Digraph:
    """A graphviz drawing of the machine in the papers' style (see module docstring).

    Node names are ``q0, q1, …`` in state order; the state itself is the node label. The
    invisible start node is named ``__start__``.
    """
    g = state_graph(machine, max_configs)
    ids = {q: f"q{i}" for i, q in enumerate(g.states)}
    dot = graphviz.Digraph(name=g.title or g.kind)
    dot.attr(rankdir="LR")
    if g.title:
        dot.attr(label=_dot_text(g.title), labelloc="t")
    dot.attr("node", shape="circle")
    dot.node("__start__", label="", shape="none", width="0", height="0")
    for q in g.states:
        shape = "doublecircle" if q in g.accepting else "circle"
        dot.node(ids[q], label=_dot_text(g.label_of(q)), shape=shape)
    for q in g.starts:
        dot.edge("__start__", ids[q])
    for (q, t), labels in merged_edges(g).items():
        dot.edge(ids[q], ids[t], label="\\n".join(_dot_text(s) for s in labels))
    return dot


def to_networkx(machine: Any, max_configs: int = MAX_DYCK_CONFIGS) -> nx.MultiDiGraph:
    """The state graph as a networkx MultiDiGraph: nodes are the states (attributes ``label``,
    ``start``, ``accepting``), one edge per transition (attributes ``label`` and the
    transition's fields: ``symbol``, and where present ``output``, ``pop``, ``push``; for weighted
    machines ``top``, ``op``, ``operand`` and ``weight``).
    Graph attributes: ``kind`` and ``name``."""
    if isinstance(machine, DyckKM) and machine.configs_exceed(max_configs):
        raise InputError(
            f"Dyck-({machine.k}, {machine.m}) has more configurations than "
            f"max_configs={max_configs}; raise max_configs to build the full configuration graph, "
            "or use draw() for a schematic"
        )
    g = state_graph(machine, max_configs)
    out = nx.MultiDiGraph(kind=g.kind, name=g.title)
    for q in g.states:
        out.add_node(q, label=g.label_of(q), start=q in g.starts, accepting=q in g.accepting)
    for t in g.transitions:
        out.add_edge(t.source, t.target, label=t.label, **dict(t.data))
    return out


def render(machine: Any, path: str | Path, format: str | None = None,
           max_configs: int = MAX_DYCK_CONFIGS) -> Path:
    """Render the drawing to `path` with Graphviz's ``dot`` (format from the suffix unless given:
    svg, png or pdf). RenderError when ``dot`` is not installed."""
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt not in RENDER_FORMATS:
        raise InputError(f"cannot render to format {fmt!r}; use one of {', '.join(RENDER_FORMATS)}"
                         " (give it with format= or as the file suffix)")
    if shutil.which("dot") is None:
        raise RenderError("Graphviz's `dot` program is not on the PATH; install Graphviz "
                          "(e.g. `apt-get install graphviz` or `brew install graphviz`), or use "
                          "draw(machine).source to get the DOT text")
    dot = draw(machine, max_configs)
    try:
        data = dot.pipe(format=fmt)
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError) as exc:
        raise RenderError(f"`dot` failed to render {fmt}: {exc}") from None
    path.write_bytes(data)
    return path


__all__ = [
    "MAX_DYCK_CONFIGS",
    "RenderError",
    "StateGraph",
    "Transition",
    "draw",
    "merged_edges",
    "prob_text",
    "render",
    "state_graph",
    "string_text",
    "symbol_text",
    "to_networkx",
    "weight_text",
]
