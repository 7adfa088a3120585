"""Real-time deterministic machines as transition tables: the one table that the stack-RNN
compiler (`pdanet.constructions.controllers`) builds its controller from and the stack-RNN
certifier (`pdanet.verify.certify.stack`) checks it against.

A `RealtimeTable` reads a real-time DPDA / DPDT (store: a stack), a DFA or Mealy machine (no
store) or a real-time store transducer (stack, queue or deque) as integer tables:
``trans[(p, a, x)] = (p2, out, pop_end, push_end, y)`` with states, symbols and store symbols by
index, x and y store codes (x = G: the empty store / ⊥; y = −1: nothing pushed), ``out`` the
output symbol (−1: none) and the ends ``"top"``, ``"bottom"`` or None.

`one_op` is the rule by which a one-operation stack (Joulin–Mikolov, Suzgun: one push, pop or
no-op per step) simulates the machine's noop / push / pop / replace with the machine's top held in
the controller (modes ``U`` and ``H_X``), and `store_codes` the 0/1 vectors that stand for store
symbols in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdanet.automata.alphabet import EPSILON
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DeterministicPushdown
from pdanet.automata.pdt import DPDT
from pdanet.automata.store import StoreTransducer
from pdanet.errors import AutomatonError, CompileError, InputError

U = 0  # mode U; mode 1 + g holds store symbol g (g = G holds ⊥)
OPS = {(None, None): "noop", (None, "top"): "push", ("top", None): "pop", ("top", "top"): "replace"}


def op_name(pop_end: str | None, push_end: str | None) -> str:
    """noop / push / pop / replace for a stack move given by its pop and push ends."""
    return OPS[(pop_end, push_end)]

# --- the machine, as tables ---------------------------------------------------------------------
@dataclass(frozen=True)
class RealtimeTable:
    """A real-time deterministic machine as tables. ``trans[(p, a, x)] = (p2, out, pop_end,
    push_end, y)`` with x, y store codes (x = G: empty store / ⊥), ends "top"/"bottom"/None."""

    kind: str                 # store kind: "stack", "queue", "deque"
    fields: str               # "pushdown", "store" or "dfa": which run_batch fields to decode
    Q: int
    q0: int
    K: int
    G: int
    trans: dict
    reads_top: tuple
    output: str               # "accept" or "symbol"
    accepting: tuple          # accepting mask (accept, final state)
    empty_stack: bool
    n_out: int
    labels: dict


def _table_pushdown(m: DeterministicPushdown) -> RealtimeTable:
    if not m.is_realtime:
        eps = next(k for k in m.transitions if k[1] is EPSILON)
        raise CompileError(
            f"{m!r} has ε-transitions (e.g. {eps!r}); a real-time controller reads one symbol per "
            "step. ε-moves need the buffered model of Hao et al. (2018) with input/output "
            "queues (target 'buffered_stack_rnn'), or an equivalent real-time machine")
    G = len(m.stack_alphabet)
    trans = {}
    is_pdt = isinstance(m, DPDT)
    if is_pdt and m.output_kind != "symbol":
        raise CompileError(f"{m!r} emits more than one symbol in a step; the real-time controller "
                           "emits at most one symbol per step")
    for key, value in m.transitions.items():
        q, a, x = key
        try:
            op, y = m.op(key)
        except AutomatonError as exc:
            raise CompileError(
                f"transition {key!r} is not noop/push/pop/replace ({exc}); `.normal_form()` "
                "splits it but adds ε-moves, so compile that to the buffered target, or rewrite "
                "the machine to push one symbol per step") from None
        out = value[1] if is_pdt else ()
        pe, ue = {"noop": (None, None), "push": (None, "top"), "pop": ("top", None),
                  "replace": ("top", "top")}[op]
        trans[(m.state_index(q), m.alphabet.index(a), m.stack_code(x))] = (
            m.state_index(value[0]), m.output_alphabet.index(out[0]) if out else -1, pe, ue,
            -1 if y is None else m.stack_code(y))
    acc = tuple(q in m.accepting for q in m.states)
    return RealtimeTable("stack", "pushdown", len(m.states), m.state_index(m.start), len(m.alphabet), G,
                 trans, (True,) * len(m.states), "symbol" if is_pdt else "accept", acc,
                 (not is_pdt) and m.acceptance == "empty_stack",
                 len(m.output_alphabet) if is_pdt else 0, {})


def _table_dfa(m: DFA) -> RealtimeTable:
    if m.output_kind not in ("accept", "symbol"):
        raise CompileError(f"{m!r} has output kind {m.output_kind!r}; the stack_rnn target "
                           "compiles recognisers and Mealy machines")
    trans = {}
    for p in range(len(m.states)):
        for a in range(len(m.alphabet)):
            p2 = int(m.table[p, a])
            if p2 >= 0:
                out = int(m.out_table[p, a]) if m.output_kind == "symbol" else -1
                trans[(p, a, 0)] = (p2, out, None, None, -1)
    acc = tuple(q in m.accepting for q in m.states)
    n_out = len(m.output_alphabet) if m.output_kind == "symbol" else 0
    return RealtimeTable("stack", "dfa", len(m.states), m.state_index(m.start), len(m.alphabet), 0,
                 trans, (True,) * len(m.states), m.output_kind, acc, False, n_out, {})


def _table_store(m: StoreTransducer) -> RealtimeTable:
    tab = m.tables
    G = len(m.store_alphabet)
    trans = {}
    ends = {0: None, 1: "top", 2: "bottom"}
    for p, a, x in zip(*np.nonzero(tab["next"] >= 0)):
        i = (int(p), int(a), int(x))
        trans[i] = (int(tab["next"][i]), int(tab["out"][i]), ends[int(tab["pop"][i])],
                    ends[int(tab["push"][i])], int(tab["sym"][i]))
    return RealtimeTable(m.store, "store", len(m.states), m.state_index(m.start), len(m.alphabet), G,
                 trans, tuple(bool(v) for v in tab["reads_top"]), "symbol",
                 (False,) * len(m.states), False, len(m.output_alphabet), {})


def one_op(noop: bool, mode: int, G: int, R: int, move: tuple) -> tuple[int, str, int]:
    """(new mode, memory op "push"/"pop"/"noop", pushed code) for a one-operation stack, from the
    machine move (pop_end, push_end, y) in ``mode`` with reading R (the memory's top, G = empty).
    ``noop``: the stack has a no-op (Joulin–Mikolov); without one (Suzgun) every step pushes or
    pops. Invariant: mode U — memory = machine stack; mode H_X — memory = machine stack minus its
    top X (X = ⊥: both empty)."""
    pe, ue, y = move
    op = {(None, None): "noop", (None, "top"): "push", ("top", None): "pop",
          ("top", "top"): "replace"}[(pe, ue)]
    jm = noop
    if mode == U:
        X = R
        if op == "noop":
            return (U, "noop", -1) if jm else (1 + X, "pop", -1)
        if op == "replace":
            return 1 + y, "pop", -1
        if op == "push":
            return U, "push", y
        return U, "pop", -1
    X = mode - 1
    if op == "noop":
        if jm:
            return mode, "noop", -1
        return (U, "push", X) if X != G else (1 + G, "pop", -1)
    if op == "replace":
        return (1 + y, "noop", -1) if jm else (U, "push", y)
    if op == "push":
        if X != G:
            return 1 + y, "push", X
        return (1 + y, "noop", -1) if jm else (U, "push", y)
    return (U, "noop", -1) if jm else (1 + R, "pop", -1)


def store_codes(G: int, code: str) -> np.ndarray:
    """(G + 1, m) 0/1 codes of the store symbols, row G (empty / ⊥) all zero."""
    if code == "one_hot":
        return np.vstack([np.eye(max(G, 1), dtype=np.int64)[:G], np.zeros((1, max(G, 1)),
                                                                           dtype=np.int64)])
    if code != "binary":
        raise InputError(f"code must be 'binary' or 'one_hot', got {code!r}")
    width = max(1, int(np.ceil(np.log2(G + 1)))) if G > 0 else 1
    values = np.arange(1, G + 1)
    bits = (values[:, None] >> np.arange(width - 1, -1, -1)[None, :]) & 1
    return np.vstack([bits, np.zeros((1, width), dtype=np.int64)]).astype(np.int64)



def table(machine) -> RealtimeTable:
    """The machine as a `RealtimeTable` (CompileError naming what does not fit: ε-moves, a
    transducer step emitting more than one symbol, a move that is not noop/push/pop/replace)."""
    if isinstance(machine, StoreTransducer):
        return _table_store(machine)
    if isinstance(machine, DFA):
        return _table_dfa(machine)
    if isinstance(machine, DeterministicPushdown):
        return _table_pushdown(machine)
    raise CompileError(f"{machine!r} is not a real-time deterministic machine (DPDA, DPDT, DFA or "
                       "store transducer)")


__all__ = ["OPS", "RealtimeTable", "U", "one_op", "op_name", "store_codes", "table"]
