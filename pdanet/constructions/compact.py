"""Depth-bounded real-time DPDAs and DPDTs as compact Elman RNNs and LSTMs (exact weights).

``pn.compile(dpda.bounded(m), target="elman" | "lstm", method="compact")``: m stack slots of
d = ⌈log₂(|Γ| + 1)⌉ bits each (slot code binary(i + 1) for stack symbol i, 0 = empty, most
significant bit first, top in slot 1) and a finite-control lookup, in the spirit of Hewitt et al.
(2020)'s push/pop slot copies, generalised from bracket types to stack symbols and from Dyck
languages to any real-time deterministic machine (cf. Svete, Chan & Cotterell 2024, who prove
such a bound for bounded PDAs; no code of theirs is used). The machine is read through the one
real-time table `pdanet.constructions.realtime.table` (noop / push / pop / replace moves).

Units (every one a 0/1 threshold unit u run as a tanh unit, u = (1 + h)/2, through
σ(z) = (1 + tanh(z/2))/2 as in `pdanet.constructions.dyck`; every ideal pre-activation z is an
integer + ½, so the margin is ½):

- one *start* unit, on only at t = 0 (state q0, empty stack);
- *lookup* units L (`LookupCase`): L_κ is on at time t iff step t fired case κ = (state before,
  symbol, previous operation — the *source* —, tests on the stack before the step) → (state
  after, operation, pushed symbol, output). At most one is on; none on (after t = 0) is the dead
  configuration, which stays dead (a missing transition, or a push beyond depth m: `BoundedPDA`'s
  semantics);
- *slot copies* (one step behind): at time t they hold the stack *before* step t, in the copy
  written by the operation of step t − 1 — push copy P(i) = [push] ∧ S(i − 1) (P(1): the
  written code, a plain sum over push and replace units), pop copy O(i) = [pop] ∧ S(i + 1), keep
  copy N(i) = [noop, or replace for i > 1] ∧ S(i); S = P + O + N. Only the copies the machine's
  operations need are built. Units: |L| + 1 + C·m·d (C ≤ 3 copies).

The lookup needs the top X of the stack before step t, which the lag hides one step: it comes
from the *source* — after a push or replace of Y it is Y (known from the source case), after a
noop slot 1 of S, after a pop slot 2, at the start ⊥ — so lookup units are indexed by (q, a,
source, test). After a push or replace the written code matters only where the move on a differs
between the codes that can be written on entering q that way: where it is the same for all of
them (the usual case: an open bracket, a symbol pushed whatever lies below), one unit stands for
them all (``source_symbol`` −1, "any written code") and its gate sums every unit entering q by
that source; only where the move differs (a close bracket matching the code just pushed) is
there one unit per written code. So |L| is O(|Q|·|Σ|) for the usual machines rather than
O(|Q|·|Σ|·|Γ|): Dyck-64 at m = 4 (|Σ| = |Γ| = 128) has 512 lookup units, marked reversal over
128 symbols (|Γ| = 256) 770.

Tests are violation counts e ≥ 0 that are 0 iff the test holds — "slot = X":
popcount(b_X) − Σ_j (2b_{X,j} − 1)s_j; "slot empty": Σ_j s_j; gate: 1 − Σ(source units); input:
1 − x_a — and the unit is z = ½ − D·Σ e_i − e_s (D = max(1, d)) with at most one *signed* test
e_s = 1 − Σ_j s_j ("slot nonempty", ≤ 0 when it holds, ≥ 1 − D). For each (q, a, source) the
tops are grouped by identical behaviour: a group of every top needs no test, all of Γ is
"nonempty", {⊥} is "empty", otherwise one unit per member. A push also tests "no overflow" (the
slot that would become slot m + 1 is empty); under empty-stack acceptance a pop tests whether
slot 2 of the stack before the step is empty, so that every lookup unit knows whether the stack
after its step is empty. Readout is linear in L: accept iff the state after the step is final
(empty-stack: iff the stack after it is empty); a transducer's logits are one per output symbol
and one for "no output".

Relation to the Dyck constructions (`pdanet.constructions.dyck`): a Dyck-(k, m) recogniser has
two operations, so two copies (P and Q) suffice and the top is read directly; here the state
and the top are looked up in one step, which puts the stack one step behind and adds the keep copy
N for noop/replace moves (3 copies when all four operations occur). The Dyck networks are the
k-bracket special case with a fixed lookup; they are kept as separate constructions because
their readout (the next-symbol set of a generator) differs.

LSTM: every unit is the saturated Elman unit inside an LSTM cell (i ≈ 1, f ≈ 0, o ≈ 1, c ≈ ±1,
h = tanh(c) ≈ ±tanh 1, read through ρ ≈ 1/tanh 1), as `pdanet.constructions.dfa_rnn` carries a
saturated Elman network; the same units, four times the recurrent weights.

Exact weights are integers over small denominators (times β); β comes from the margin argument
written into ``scale_argument`` (option ``scale`` overrides it). Nothing here is a fraction that
shrinks with depth (each slot holds bits, each weight is a small integer times β), so the depth m
meets no floating-point precision limit in any dtype; what bounds m is memory, checked against
`pdanet.limits` before anything is allocated. The dense module holds H² recurrent weights (4H² for
the LSTM); the sparse form (``sparse=True``, and automatically when the dense one would be over
the limit) holds the same units and recurrence as W_hh = S + G·F in a `SparseRecurrentNet`
(`build_sparse_program`): a gate sum or a copy's operation flag, read by many units with one
weight, is one shared sum F·u (its units once) times G (one entry per reading unit), and every
other weight is an entry of S — about |L|·(C·d + 2) + C²·m·d entries in all (marked reversal over
128 symbols at m = 1000: 27,771 units and about 129,000 entries where the dense LSTM has 3·10⁹).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
import torch

from pdanet import limits
from pdanet.automata.pda import BoundedPDA
from pdanet.automata.pdt import DPDT
from pdanet.constructions import realtime
from pdanet.constructions.abstraction import MAX_LABELS, CompactSlots, LookupCase, SlotTest
from pdanet.constructions.base import CompiledNetwork, ExactWeight, as_scale, load_exact
from pdanet.constructions.dfa_rnn import compile_lstm, compile_minsky
from pdanet.constructions.modules import (
    SPARSE_BLOCKS,
    RecurrentBlocks,
    RecurrentNet,
    SparseBlocks,
    SparseRecurrentNet,
    recurrent_state_dict,
    sparse_blocks,
    sparse_state_dict,
)
from pdanet.errors import CompileError, InputError, SearchBoundError
from pdanet.verify.bounds import information_floor

L_, C_, M_, D_ = sp.symbols("L C m d")
BOUND = L_ + 1 + C_ * M_ * D_   # units: lookup units + start unit + copies · slots · slot width
COPIES = ("push", "pop", "keep")
SOURCES = ("start", "push", "replace", "noop", "pop")
ENUMERATE_CONFIGS = 20_000  # the information floor is exact up to this many configurations


# --- the lookup --------------------------------------------------------------------------------


def slot_width(G: int) -> int:
    """d = ⌈log₂(G + 1)⌉ bits per slot for G stack symbols (0 when there are none)."""
    return (G).bit_length() if G > 0 else 0


def slot_codes(G: int) -> np.ndarray:
    """(G + 1, d) 0/1: row i < G is binary(i + 1), most significant bit first; row G (empty) 0."""
    d = slot_width(G)
    values = np.append(np.arange(1, G + 1), 0)
    return ((values[:, None] >> np.arange(d - 1, -1, -1)[None, :]) & 1).astype(np.int64)


@dataclass(frozen=True)
class _Pos:
    """Where position k (1 = top) of the stack before a step is: a static code (G: empty)
    or slot ``slot`` (0-based) of the slot units."""

    static: int | None = None
    slot: int | None = None


@functools.lru_cache(maxsize=4096)
def _position(k: int, source: str, sym: int, m: int, G: int) -> _Pos:
    """Position k (1-based) of the stack before step t, given step t − 1's operation (the
    source) and the slot units S (the stack before step t − 1)."""
    if source == "start":
        return _Pos(static=G)
    if source in ("push", "replace") and k == 1:
        return _Pos(static=sym)
    s = {"noop": k - 1, "pop": k, "push": k - 2, "replace": k - 1}[source]
    return _Pos(slot=s) if s < m else _Pos(static=G)


def _static_holds(kind: str, code: int, static: int, G: int) -> bool:
    if kind == "equals":
        return static == code
    return (static == G) == (kind == "empty")


def _tests(conds: list[tuple[str, int, int]], source: str, sym: int, m: int, G: int
           ) -> tuple[SlotTest, ...] | None:
    """Slot tests for conditions (kind, position, code); None when a static one fails. Of several
    "nonempty" tests only the deepest is kept (a stack is contiguous: it implies the others)."""
    out: list[SlotTest] = []
    for kind, k, code in conds:
        pos = _position(k, source, sym, m, G)
        if pos.static is not None:
            if not _static_holds(kind, code, pos.static, G):
                return None
            continue
        if kind == "equals" and code == G:
            kind = "empty"
        out.append(SlotTest(kind, pos.slot, code if kind == "equals" else -1))
    nonempty = [t for t in out if t.kind == "nonempty"]
    if len(nonempty) > 1:
        deepest = max(nonempty, key=lambda t: t.slot)
        out = [t for t in out if t.kind != "nonempty" or t is deepest]
    return tuple(out)


def lookup_cases(view: realtime.RealtimeTable, m: int, empty_stack: bool, accepting: tuple
                 ) -> list[LookupCase]:
    """The lookup units of the machine (tables from `realtime.table`) bounded at depth m, in a
    fixed order, found from the start case by a worklist over entered (state, source, written
    code). Then, for each (state p, source push/replace, input a): when at least two codes can be
    written on entering p that way and the step on a behaves the same after every one of them
    (same cases up to the written code: tests, next state, operation, pushed code, output,
    ``empty_after``, ``accepts``), their units become one unit with ``source_symbol`` −1 ("any
    written code", ``top`` the codes) whose gate sums every unit entering p by that source."""
    G, K = view.G, view.K
    by_pa: dict[tuple[int, int], dict[int, tuple]] = {}
    for (p, a, x), (p2, out, pe, ue, y) in view.trans.items():
        by_pa.setdefault((p, a), {})[x] = (p2, out, realtime.op_name(pe, ue), y)
    per_entry: dict[tuple, list[list[LookupCase]]] = {}
    order: list[tuple] = []
    work = [(view.q0, "start", -1)]
    seen: set = {work[0]}
    every, gamma = frozenset(range(G + 1)), frozenset(range(G))
    memo: dict[tuple, tuple[SlotTest, ...] | None] = {}
    while work:
        entry = work.pop(0)
        order.append(entry)
        p, source, sym = entry
        per_a: list[list[LookupCase]] = []
        per_entry[entry] = per_a
        for a in range(K):
            here: list[LookupCase] = []
            per_a.append(here)
            moves = by_pa.get((p, a), {})
            if not moves:
                continue
            top_pos = _position(1, source, sym, m, G)
            groups: dict[tuple, list[int]] = {}
            candidates = [top_pos.static] if top_pos.static is not None else range(G + 1)
            for x in candidates:
                if x not in moves:
                    continue
                p2, out, op, y = moves[x]
                key = (p2, out, op, y, (x == G) if (op == "noop" and empty_stack) else None)
                groups.setdefault(key, []).append(x)
            for (p2, out, op, y, noop_empty), members in groups.items():
                mset = frozenset(members)
                if top_pos.static is not None or mset == every:
                    tops = [(tuple(members), [])]
                elif mset == gamma and G > 0:
                    tops = [(tuple(members), [("nonempty", 1, -1)])]
                elif mset == {G}:
                    tops = [(tuple(members), [("empty", 1, -1)])]
                else:
                    tops = [((x,), [("equals", 1, x)]) for x in members]
                for top, conds in tops:
                    variants: list[tuple[list, bool | None]]
                    if op == "push":
                        variants = [(conds + [("empty", m, -1)], False)]
                    elif op == "replace":
                        variants = [(conds, False)]
                    elif op == "noop":
                        variants = [(conds, noop_empty)]
                    elif empty_stack:
                        variants = [(conds + [("empty", 2, -1)], True),
                                    (conds + [("nonempty", 2, -1)], False)]
                    else:
                        variants = [(conds, None)]
                    for cs, empty_after in variants:
                        # after a push/replace only position 1 depends on the written code,
                        # and no test here asks which stack symbol it is: memoised without it
                        key = (tuple(cs), source, -1 if source in ("push", "replace") else sym)
                        if key not in memo:
                            memo[key] = _tests(cs, source, sym, m, G)
                        tests = memo[key]
                        if tests is None:
                            continue
                        acc = bool(empty_after) if empty_stack else bool(accepting[p2])
                        here.append(LookupCase(p, a, source, sym, top, tests, p2, op, y, out,
                                               empty_after, acc))
                        nxt = (p2, op, y if op in ("push", "replace") else -1)
                        if nxt not in seen:
                            seen.add(nxt)
                            work.append(nxt)
    written: dict[tuple[int, str], list[int]] = {}      # (p, source) -> codes written on entry
    for p, source, sym in order:
        if source in ("push", "replace"):
            written.setdefault((p, source), []).append(sym)

    def behaviour(c: LookupCase) -> tuple:
        return (c.tests, c.p2, c.op, c.y, c.out, c.empty_after, c.accepts)

    merged: dict[tuple[int, str, int], bool] = {}
    cases: list[LookupCase] = []
    for entry in order:
        p, source, sym = entry
        for a, here in enumerate(per_entry[entry]):
            syms = written.get((p, source), [])
            if len(syms) >= 2:
                key = (p, source, a)
                if key not in merged:
                    first = [behaviour(c) for c in per_entry[(p, source, syms[0])][a]]
                    merged[key] = bool(first) and all(
                        [behaviour(c) for c in per_entry[(p, source, s)][a]] == first
                        for s in syms[1:])
                if merged[key]:
                    if sym == syms[0]:
                        top = tuple(sorted(syms))
                        cases += [replace(c, source_symbol=-1, top=top) for c in here]
                    continue
            cases += here
    return cases


# --- the network --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Unit indices: start 0, lookup units 1..|L|, then ``units[c, s, j]`` (copy, slot, bit)."""

    n_lookup: int
    copies: tuple[str, ...]
    m: int
    d: int

    @property
    def H(self) -> int:
        return 1 + self.n_lookup + len(self.copies) * self.m * self.d

    @property
    def units(self) -> np.ndarray:
        C = len(self.copies)
        return 1 + self.n_lookup + np.arange(C * self.m * self.d).reshape(C, self.m, self.d)


def _needed_copies(cases: list[LookupCase]) -> tuple[str, ...]:
    ops = {c.op for c in cases}
    need = {"push": bool(ops & {"push", "replace"}), "pop": "pop" in ops,
            "keep": bool(ops & {"noop", "replace"})}
    return tuple(c for c in COPIES if need[c])


@dataclass(frozen=True)
class Program:
    """The ideal threshold network in u-space (u ∈ {0, 1}): pre-activations z = A u + U x + b2/2
    (ideal values integers + ½) and readout logits R u + r2/2, for units in `Layout` order.
    ``A`` may be held in a narrow integer dtype (its entries are small)."""

    A: np.ndarray
    U: np.ndarray
    b2: np.ndarray
    R: np.ndarray
    r2: np.ndarray
    u0: np.ndarray
    layout: Layout

    def step(self, u: np.ndarray, a: int) -> np.ndarray:
        """Exact ideal pre-activations (as Fractions) of one step from a 0/1 state u on input a."""
        z = self.A.astype(np.int64) @ np.asarray(u, np.int64) + self.U[:, a]
        return np.array([Fraction(int(v)) + Fraction(int(b), 2) for v, b in zip(z, self.b2)],
                        dtype=object)


def build_program(cases: list[LookupCase], view: realtime.RealtimeTable, m: int,
                  empty_stack: bool, transducer: bool) -> Program:
    """Integer weights of the ideal threshold network (see the module docstring)."""
    G, K = view.G, view.K
    d = slot_width(G)
    D = max(1, d)
    codes = slot_codes(G)
    lay = Layout(len(cases), _needed_copies(cases), m, d)
    H, units = lay.H, lay.units
    limits.check(f"the compact network ({H:,} units)", H, "max_units")
    A = np.zeros((H, H), dtype=np.int8 if D < 32 else np.int64)
    U = np.zeros((H, K), np.int64)
    b2 = np.zeros(H, np.int64)
    b2[0] = -1                                               # start: off after t = 0
    # source units of each entered (state, source, symbol): the lookup units that lead there
    srcs: dict[tuple, list[int]] = {}
    for i, c in enumerate(cases):
        srcs.setdefault((c.p2, c.op, c.y if c.op in ("push", "replace") else -1), []).append(1 + i)
        if c.op in ("push", "replace"):                      # source_symbol −1: any code
            srcs.setdefault((c.p2, c.op, -1), []).append(1 + i)
    gated: dict[tuple | None, list[int]] = {}                # gate key -> rows gated by it
    for i, c in enumerate(cases):
        key = None if c.source == "start" else (c.p, c.source, c.source_symbol)
        gated.setdefault(key, []).append(1 + i)
    for key, rows_ in gated.items():                         # −D(1 − Σ gate): distinct rows and
        gate = [0] if key is None else srcs.get(key, [])    # columns, so one += per gate
        if gate:
            A[np.ix_(rows_, gate)] += D
    for i, c in enumerate(cases):
        row = 1 + i
        bias2 = 1                                            # ½
        bias2 -= 2 * D
        U[row, c.a] += D                                     # −D(1 − x_a)
        bias2 -= 2 * D
        for t in c.tests:
            cells = units[:, t.slot, :]                      # (C, d): s_j = Σ_c cells[c, j]
            if t.kind == "equals":
                sgn = 2 * codes[t.code] - 1                  # e = popcount − Σ sgn_j s_j
                A[row, cells] += D * np.broadcast_to(sgn, cells.shape)
                bias2 -= 2 * D * int(codes[t.code].sum())
            elif t.kind == "empty":                          # e = Σ s_j
                A[row, cells] -= D
            else:                                            # signed: e = 1 − Σ s_j
                A[row, cells] += 1
                bias2 -= 2
        b2[row] = bias2
    # slot copies
    L = np.arange(1, 1 + len(cases))
    op = np.array([c.op for c in cases] or [""], dtype=object)[:len(cases)]
    flag = {name: L[op == name] for name in ("push", "pop", "noop", "replace")}
    slots = np.arange(m)
    for ci, copy in enumerate(lay.copies):       # every slot of a copy at once
        rows = units[ci]                                     # (m, d)
        b2[rows] = -3                                        # z = flag + s_src − 3/2
        first = 0
        if copy == "push":                                   # slot 1: the written code
            w = np.concatenate([flag["push"], flag["replace"]])
            if w.size:
                A[np.ix_(rows[0], w)] = codes[np.array([cases[i - 1].y for i in w])].T
            b2[rows[0]] = -1
            first = 1
        if copy == "keep":
            if flag["noop"].size:
                A[np.ix_(rows[0], flag["noop"])] = 1
            first = 1
        fl = {"push": flag["push"], "pop": flag["pop"],
              "keep": np.concatenate([flag["noop"], flag["replace"]])}[copy]
        if fl.size and first < m and lay.d:                  # rows[first:]: one range of
            template = np.zeros(H, A.dtype)                  # rows, all zero so far
            template[fl] = 1
            A[rows[first, 0]:rows[-1, -1] + 1] = template
        src = slots + {"push": -1, "pop": 1, "keep": 0}[copy]
        ok = (src >= 0) & (src < m)                          # (push: slot 1 has no source)
        if ok.any():                                         # s_{src, j} = Σ_c cells
            A[rows[ok][:, :, None], units[:, src[ok], :].transpose(1, 2, 0)] = 1
    R, r2 = _readout(cases, view, H, empty_stack, transducer)
    u0 = np.zeros(H, np.int64)
    u0[0] = 1
    return Program(A, U, b2, R, r2, u0, lay)


def _readout(cases: list[LookupCase], view: realtime.RealtimeTable, H: int, empty_stack: bool,
             transducer: bool) -> tuple[np.ndarray, np.ndarray]:
    """Readout R (logits, H) and doubled bias r2: logits R u + r2/2 (module docstring)."""
    if transducer:
        n_out = view.n_out
        R = np.zeros((n_out + 1, H), np.int64)
        r2 = np.full(n_out + 1, -1, np.int64)
        for i, c in enumerate(cases):
            if c.out >= 0:
                R[c.out, 1 + i] = 1
                R[n_out, 1 + i] = -1
        r2[n_out] = 1                                        # none: ½ − Σ(units emitting)
    else:
        R = np.zeros((1, H), np.int64)
        R[0, 1:1 + len(cases)] = [int(c.accepts) for c in cases]
        start_accepts = True if empty_stack else bool(view.accepting[view.q0])
        R[0, 0] = int(start_accepts)
        r2 = np.array([-1], np.int64)
    return R, r2


# --- the sparse form ----------------------------------------------------------------------------


def _coalesce(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n_cols: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COO triples sorted by (row, column), duplicates summed, zeros dropped."""
    key = rows.astype(np.int64) * n_cols + cols
    uniq, inv = np.unique(key, return_inverse=True)
    summed = np.zeros(len(uniq), np.int64)
    np.add.at(summed, inv, vals)
    keep = summed != 0
    uniq = uniq[keep]
    return uniq // n_cols, uniq % n_cols, summed[keep]


def _gates(cases: list[LookupCase]) -> tuple[dict[tuple | None, list[int]], dict[tuple, list[int]]]:
    """(gated, srcs): the lookup rows gated by each gate key, and the source units of each
    entered (state, source, symbol) — as `build_program` computes them."""
    srcs: dict[tuple, list[int]] = {}
    for i, c in enumerate(cases):
        srcs.setdefault((c.p2, c.op, c.y if c.op in ("push", "replace") else -1), []).append(1 + i)
        if c.op in ("push", "replace"):
            srcs.setdefault((c.p2, c.op, -1), []).append(1 + i)
    gated: dict[tuple | None, list[int]] = {}
    for i, c in enumerate(cases):
        key = None if c.source == "start" else (c.p, c.source, c.source_symbol)
        gated.setdefault(key, []).append(1 + i)
    return gated, srcs


def sparse_entries(cases: list[LookupCase], lay: Layout) -> int:
    """An upper bound on the stored entries of `build_sparse_program` (S, G, F and U), computed
    from the lookup cases without building anything: what the memory estimate counts."""
    C, m, d = len(lay.copies), lay.m, lay.d
    gated, srcs = _gates(cases)
    n = 0
    for key, rows_ in gated.items():
        gate = [0] if key is None else srcs.get(key, [])
        n += len(rows_) + len(gate) if len(rows_) > 1 and len(gate) > 1 else len(rows_) * len(gate)
    n += sum(1 + C * max(1, d) * len(c.tests) for c in cases)   # input and slot tests
    n += (m * d) * (C * C + 1) * C + d * len(cases) + C * len(cases)  # copies: sources, flags
    return n


@dataclass(frozen=True)
class SparseProgram:
    """`Program` with the update A held sparse as A = S + G·F: ``S`` COO triples (rows, cols,
    values), ``G`` (rows, shared sum, coefficient) — each row reads at most one shared sum —
    and ``F`` (shared sum, cols): shared sum k is Σ_{j ∈ F_k} u_j. A gate (the units entering
    a state by one source, read by every lookup unit gated by it) and a copy's flag (the lookup
    units of its operation, read by every slot unit of the copy) are shared sums: that turns
    the (rows × columns) blocks of `build_program` into rows + columns entries. ``U`` is the
    input block as triples; the rest as in `Program`."""

    S: tuple[np.ndarray, np.ndarray, np.ndarray]
    G: tuple[np.ndarray, np.ndarray, np.ndarray]
    F: tuple[np.ndarray, np.ndarray]
    n_shared: int
    K: int
    U: tuple[np.ndarray, np.ndarray, np.ndarray]
    b2: np.ndarray
    R: np.ndarray
    r2: np.ndarray
    u0: np.ndarray
    layout: Layout

    def row_sums(self) -> np.ndarray:
        """A·1: each row's sum of coefficients."""
        H = self.layout.H
        (sr, _, sv), (gr, gk, gv), (fk, _) = self.S, self.G, self.F
        size = np.bincount(fk, minlength=self.n_shared).astype(np.int64)
        out = np.bincount(sr, weights=sv, minlength=H).astype(np.int64)
        out += np.bincount(gr, weights=gv * size[gk], minlength=H).astype(np.int64)
        return out

    def row_norm(self) -> int:
        """W as `_row_norm`: the largest ℓ₁ norm of a row on the hidden units (update and
        readout). A row's S columns and its shared sum's columns are disjoint (slot units and
        lookup units), so the norms add."""
        H = self.layout.H
        (sr, _, sv), (gr, gk, gv), (fk, _) = self.S, self.G, self.F
        size = np.bincount(fk, minlength=self.n_shared).astype(np.int64)
        norm = np.bincount(sr, weights=np.abs(sv), minlength=H)
        norm += np.bincount(gr, weights=np.abs(gv) * size[gk], minlength=H)
        return max(1, int(norm.max(initial=0)), int(np.abs(self.R).sum(1).max(initial=0)))

    def dense(self) -> Program:
        """The same network as a dense `Program` (small networks: for checking)."""
        H, K = self.layout.H, self.K
        A = np.zeros((H, H), np.int64)
        sr, sc, sv = self.S
        np.add.at(A, (sr, sc), sv)
        F = np.zeros((self.n_shared, H), np.int64)
        F[self.F] = 1
        gr, gk, gv = self.G
        np.add.at(A, gr, gv[:, None] * F[gk])
        U = np.zeros((H, K), np.int64)
        np.add.at(U, self.U[:2], self.U[2])
        return Program(A, U, self.b2, self.R, self.r2, self.u0, self.layout)


def build_sparse_program(cases: list[LookupCase], view: realtime.RealtimeTable, m: int,
                         empty_stack: bool, transducer: bool) -> SparseProgram:
    """`build_program`'s integer weights, with the update as A = S + G·F (`SparseProgram`):
    ``build_sparse_program(...).dense()`` equals ``build_program(...)`` entry for entry (up to
    the dtype of A)."""
    G, K = view.G, view.K
    d = slot_width(G)
    D = max(1, d)
    codes = slot_codes(G)
    lay = Layout(len(cases), _needed_copies(cases), m, d)
    H, units = lay.H, lay.units
    limits.check(f"the compact network ({H:,} units)", H, "max_units")
    sr: list[np.ndarray] = []                                # S triples, in pieces
    sc: list[np.ndarray] = []
    sv: list[np.ndarray] = []

    def put(rows: Any, cols: Any, vals: Any) -> None:
        rows, cols = np.broadcast_arrays(np.asarray(rows, np.int64), np.asarray(cols, np.int64))
        sr.append(rows.ravel())
        sc.append(cols.ravel())
        sv.append(np.broadcast_to(np.asarray(vals, np.int64), rows.shape).ravel())

    g_rows: list[np.ndarray] = []                            # G: row -> (shared sum, coefficient)
    g_coef: list[np.ndarray] = []
    g_id: list[np.ndarray] = []
    f_id: list[np.ndarray] = []                              # F: shared sum -> columns
    f_cols: list[np.ndarray] = []

    def share(rows: Any, cols: Any, coef: int) -> None:
        k = len(f_id)
        rows, cols = np.asarray(rows, np.int64).ravel(), np.asarray(cols, np.int64).ravel()
        g_rows.append(rows)
        g_coef.append(np.full(len(rows), coef, np.int64))
        g_id.append(np.full(len(rows), k, np.int64))
        f_id.append(np.full(len(cols), k, np.int64))
        f_cols.append(cols)

    b2 = np.zeros(H, np.int64)
    b2[0] = -1                                               # start: off after t = 0
    gated, srcs = _gates(cases)
    for key, rows_ in gated.items():                         # −D(1 − Σ gate)
        gate = [0] if key is None else srcs.get(key, [])
        if len(rows_) > 1 and len(gate) > 1:
            share(rows_, gate, D)
        elif gate:
            put(np.asarray(rows_)[:, None], np.asarray(gate)[None, :], D)
    u_rows = np.arange(1, 1 + len(cases), dtype=np.int64)
    u_cols = np.array([c.a for c in cases], np.int64)
    for i, c in enumerate(cases):
        row = 1 + i
        bias2 = 1 - 4 * D                                    # ½, −D(1 − x_a), −D(1 − Σ gate)
        for t in c.tests:
            cells = units[:, t.slot, :]                      # (C, d)
            if t.kind == "equals":
                sgn = 2 * codes[t.code] - 1
                put(row, cells, D * np.broadcast_to(sgn, cells.shape))
                bias2 -= 2 * D * int(codes[t.code].sum())
            elif t.kind == "empty":
                put(row, cells, -D)
            else:
                put(row, cells, 1)
                bias2 -= 2
        b2[row] = bias2
    L = np.arange(1, 1 + len(cases))
    op = np.array([c.op for c in cases] or [""], dtype=object)[:len(cases)]
    flag = {name: L[op == name] for name in ("push", "pop", "noop", "replace")}
    slots = np.arange(m)
    for ci, copy in enumerate(lay.copies):
        rows = units[ci]                                     # (m, d)
        b2[rows] = -3                                        # z = flag + s_src − 3/2
        first = 0
        if copy == "push":                                   # slot 1: the written code
            w = np.concatenate([flag["push"], flag["replace"]])
            if w.size:
                put(rows[0][:, None], w[None, :], codes[np.array([cases[i - 1].y for i in w])].T)
            b2[rows[0]] = -1
            first = 1
        if copy == "keep":
            if flag["noop"].size:
                put(rows[0][:, None], flag["noop"][None, :], 1)
            first = 1
        fl = {"push": flag["push"], "pop": flag["pop"],
              "keep": np.concatenate([flag["noop"], flag["replace"]])}[copy]
        if fl.size and first < m and lay.d:
            share(rows[first:], fl, 1)
        src = slots + {"push": -1, "pop": 1, "keep": 0}[copy]
        ok = (src >= 0) & (src < m)
        if ok.any():
            put(rows[ok][:, :, None], units[:, src[ok], :].transpose(1, 2, 0), 1)
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64))
    S = _coalesce(cat(sr), cat(sc), cat(sv), H)
    for part in (sr, sc, sv):
        part.clear()
    Gt = (cat(g_rows), cat(g_id), cat(g_coef))
    Ft = (cat(f_id), cat(f_cols))
    U = (u_rows, u_cols, np.full(len(cases), D, np.int64))
    R, r2 = _readout(cases, view, H, empty_stack, transducer)
    u0 = np.zeros(H, np.int64)
    u0[0] = 1
    return SparseProgram(S, Gt, Ft, len(f_id), K, U, b2, R, r2, u0, lay)


def _narrow(biggest: int) -> np.dtype:
    """The narrowest signed integer dtype holding ±biggest."""
    for dt in (np.int8, np.int16, np.int32):
        if biggest <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


def _row_norm(prog: Program) -> int:
    """W: the largest ℓ₁ norm of a row's coefficients on the hidden units (update and readout)."""
    A = prog.A
    w = 0
    for i in range(0, A.shape[0], 4096):
        w = max(w, int(np.abs(A[i:i + 4096]).sum(1, dtype=np.int64).max(initial=0)))
    return max(1, w, int(np.abs(prog.R).sum(1).max(initial=0)))


def _rho(eps: sp.Expr) -> tuple[Fraction, sp.Expr]:
    """ρ ≈ 1/tanh 1 with the smallest denominator (a power of two bound, so that the LSTM's
    weights stay small integers) whose error bound dk ≥ |ρ·tanh 1 − 1| is at most ε/4."""
    target = Fraction(str(sp.N(1 / sp.tanh(1), 40)))
    for bound in (2 ** e for e in range(3, 40)):
        rho = target.limit_denominator(bound)
        err = abs(sp.Rational(rho.numerator, rho.denominator) * sp.tanh(1) - 1)
        dk = sp.Rational(str(sp.N(err, 6))) * 2
        if dk <= eps / 4:
            return rho, dk
    raise AssertionError("1/tanh 1 has rational approximations of any precision")


def _beta_for(delta: sp.Expr) -> sp.Integer:
    """Smallest integer β with σ(−β/4) ≤ δ: β ≥ 4 ln((1 − δ)/δ)."""
    return sp.Integer(sp.ceiling(4 * sp.log((1 - delta) / delta)))


# --- compile ------------------------------------------------------------------------------------


def _check(machine: Any) -> realtime.RealtimeTable:
    if not isinstance(machine, BoundedPDA):
        raise InputError(f"the compact construction takes a depth-bounded DPDA or DPDT "
                         f"(machine.bounded(m)), got {type(machine).__name__}")
    return requires(machine, raise_error=True)  # type: ignore[return-value]


def requires(machine: Any, raise_error: bool = False) -> Any:
    """None (or, with ``raise_error``, the machine's real-time table) when the construction
    applies: a `BoundedPDA` of a real-time DPDA or DPDT (one symbol, one noop/push/pop/replace
    and at most one output symbol per step); otherwise the CompileError naming the ε-move or
    the move that does not fit."""
    try:
        view = realtime.table(machine.machine)
    except CompileError as exc:
        if raise_error:
            raise
        return exc
    return view if raise_error else None


def estimate_bytes(H: int, lstm: bool, n_in: int, n_out: int) -> int:
    """Working memory of a build: the threshold program (H² one-byte entries), the recurrence
    (H² or 4H² entries, held as narrow integers and as the float module: 9 bytes each), and the
    input and readout blocks (16 bytes an entry)."""
    rows = (4 if lstm else 1) * H
    return H * H + 9 * rows * H + 16 * (rows * (n_in + 2) + (n_out + 1) * H)


def compile_compact(machine: BoundedPDA, target: str = "elman",
                    dtype: torch.dtype = torch.float32, scale: Any = None,
                    sparse: bool | None = None) -> CompiledNetwork:
    """A depth-bounded real-time DPDA/DPDT (``machine.bounded(m)``) → Elman RNN (``target``
    "elman") or LSTM ("lstm") with |L| + 1 + C·m·d units (see the module docstring).

    Readout: a recogniser's one logit (> 0: accept; final-state or empty-stack acceptance, as the
    machine says); a transducer's |Out| + 1 logits (argmax; the last is "no output").
    ``scale`` (β) overrides the β of the margin argument. ``sparse``: True loads the network
    into a `SparseRecurrentNet` (the same units and recurrence, W_hh = S + G·F from
    `build_sparse_program`; float32 or float64 only), False into the dense `RecurrentNet`;
    None (default) chooses sparse exactly when the dense build's memory estimate
    (`estimate_bytes`) is over `pdanet.limits`' ``max_bytes`` and the dtype is float32 or
    float64 (pass ``sparse=True`` for the sparse form of a network that would fit dense: its
    entries grow as |L|·|gate| + C²·m·d rather than H², so it compiles and runs much faster
    once H is in the thousands). Every estimate is made before
    anything is allocated. ``net.info["sparse"]`` says which was built. CompileError for a
    machine with ε-moves or a move that is not noop/push/pop/replace; ResourceError before
    allocating a network over `pdanet.limits`; InputError for ``sparse`` not a bool or None, or
    a sparse network in a half-precision dtype."""
    view = _check(machine)
    if target not in ("elman", "lstm"):
        raise InputError(f"target must be 'elman' or 'lstm', got {target!r}")
    if sparse is not None and not isinstance(sparse, (bool, np.bool_)):
        raise InputError(f"sparse={sparse!r} must be True, False or None (automatic)")
    inner = machine.machine
    m = machine.m
    transducer = isinstance(inner, DPDT)
    empty_stack = view.empty_stack
    accepting = tuple(view.accepting)
    cases = lookup_cases(view, m, empty_stack, accepting)
    d = slot_width(view.G)
    lay = Layout(len(cases), _needed_copies(cases), m, d)
    H = lay.H
    lstm = target == "lstm"
    what = f"compiling {machine!r} to {target}/compact ({H:,} units)"
    limits.check(what, H, "max_units", hint="lower the depth bound m")
    K = view.K
    dense_bytes = estimate_bytes(H, lstm, K, max(1, view.n_out))
    if sparse is None:
        sparse = (dense_bytes > limits.current().max_bytes
                  and dtype in (torch.float32, torch.float64))
    sparse = bool(sparse)
    if sparse:
        if dtype not in (torch.float32, torch.float64):
            raise InputError(f"a sparse compact network runs in float32 or float64, not "
                             f"{str(dtype).replace('torch.', '')}: pass dtype='float32' (or "
                             "sparse=False for a small network)")
        limits.check(what + " in sparse form",
                     estimate_sparse_bytes(cases, lay, lstm, K, max(1, view.n_out)),
                     "max_bytes", hint="lower the depth bound m")
        sprog = build_sparse_program(cases, view, m, empty_stack, transducer)
        W = sprog.row_norm()
        A1 = sprog.row_sums()
        n_logits = sprog.R.shape[0]
    else:
        limits.check(what, dense_bytes, "max_bytes",
                     hint="lower the depth bound m, or pass sparse=True")
        prog = build_program(cases, view, m, empty_stack, transducer)
        W = _row_norm(prog)
        A = prog.A if H * H > 1 << 24 else prog.A.astype(np.int64)   # narrow only when large
        A1 = np.zeros(H, np.int64)
        for i in range(0, H, 4096):
            A1[i:i + 4096] = A[i:i + 4096].sum(1, dtype=np.int64)
        n_logits = prog.R.shape[0]
    eps = sp.Rational(1, 4 * W)
    if not lstm:
        beta = _beta_for(eps)
        argument = (
            f"Every unit is a 0/1 threshold unit u = (1 + h)/2 run as h = tanh(βz/2) "
            f"(σ(βz) = (1 + tanh(βz/2))/2). Ideal pre-activations z are integers + ½. Invariant: "
            f"every u within ε = 1/(4W) = {eps} of its ideal value, W = {W} the largest ℓ₁ norm of "
            f"a row on u (update and readout). Then |z − z*| ≤ Wε = ¼, so |z| ≥ ¼ and u is within "
            f"σ(−β/4) of its ideal; σ(−β/4) ≤ ε iff β ≥ 4 ln(4W − 1) = "
            f"{sp.N(4 * sp.log(4 * W - 1), 8)}; β = {beta}. Every logit β(z) keeps its sign with "
            f"|logit| ≥ β/4: margin ¼.")
        rho = None
    else:
        rho, dk = _rho(eps)
        R_ = sp.Rational(rho.numerator, rho.denominator)
        delta = (eps - dk / 2) / (4 * R_)
        beta = _beta_for(delta)
        argument = (
            f"Each unit is a saturated Elman unit in an LSTM cell: i = σ(β), f = σ(−β), o = σ(β), "
            f"g = tanh(βz/2) with z the threshold pre-activation of u = (1 + ρh)/2, ρ = {rho} ≈ "
            f"1/tanh 1 (|ρ tanh 1 − 1| ≤ {sp.N(dk, 3)}); ideal c = ±1, h = ±tanh 1. Invariant: u "
            f"within ε = 1/(4W) = {eps} (W = {W}), so |z − z*| ≤ ¼, |z| ≥ ¼, g within 2δ of ±1 "
            f"with δ = σ(−β/4); |c| ≤ 1 always, c within 5δ of ±1, h within 6δ of ±tanh 1, and u "
            f"within ρ·3δ + |ρ tanh 1 − 1|/2 ≤ 4δ + {sp.N(dk / 2, 3)} ≤ ε when δ ≤ "
            f"{sp.N(delta, 6)}: β ≥ 4 ln((1 − δ)/δ); β = {beta}. Logits keep |logit| ≥ β/4: "
            f"margin ¼.")
    if sparse:
        weights = _sparse_weights(sprog, A1, lstm, rho, K)
    else:
        weights = recurrent_state_dict(_dense_blocks(prog, A, A1, lstm, rho, K))
    if scale is not None:
        beta = as_scale(scale)
        argument += f" Overridden: β = {beta} (the guarantee above needs the β it names)."
    cell = "lstm" if lstm else "rnn"
    module = (_load_sparse(weights, beta, dtype, cell, K, H, n_logits, sprog.n_shared) if sparse
              else _load(weights, beta, dtype, cell, K, H, n_logits))
    labels = _labels(cases, lay, inner, view) if H <= MAX_LABELS else ()
    abstraction = CompactSlots(
        labels=labels, cell="lstm" if lstm else "rnn", slots=m, slot_width=d, start=0,
        lookup=np.arange(1, 1 + len(cases)), cases=tuple(cases), copies=lay.copies,
        units=lay.units, codes=slot_codes(view.G),
        acceptance="transducer" if transducer else ("empty_stack" if empty_stack
                                                    else "final_state"),
        rho=rho)
    params = {"L": len(cases), "C": len(lay.copies), "m": m, "d": d}
    net = CompiledNetwork(
        machine=machine, module=module, target=target, method="compact", hidden_units=H,
        bound=BOUND, params=params, weights=weights, scale=beta,
        decoder=CompactDecoder(lay, cases, view.q0, view.G),
        reader=_reader(transducer), margin=sp.Rational(1, 4), scale_argument=argument,
        abstraction=abstraction,
        info={"W": W, "sparse": sparse, **floor_info(machine, view),
              # a run's working memory per (row, step) position, which sizes verify's calls
              "position_bytes": limits.position_bytes(H, cell, n_logits)})
    if net.bound_value != H:
        raise AssertionError(f"compact: {H} units but the bound gives {net.bound_value}")
    return net


def _dense_blocks(prog: Program, A: np.ndarray, A1: np.ndarray, lstm: bool, rho: Any, K: int
                  ) -> RecurrentBlocks:
    """`RecurrentNet`'s exact blocks of a dense `Program` (A: its update, maybe narrow; A1: A·1;
    ρ ≈ 1/tanh 1 for the LSTM)."""
    H = prog.layout.H
    ones = np.ones(H, np.int64)
    emb = ExactWeight(np.eye(K, dtype=np.int64), 1, False)
    if not lstm:
        return RecurrentBlocks(
            embedding=emb,
            weight_ih=ExactWeight(prog.U, 2, True),
            weight_hh=ExactWeight(A, 4, True),
            bias_ih=ExactWeight(A1 + prog.b2, 4, True),
            bias_hh=ExactWeight(np.zeros(H, np.int64), 1, True),
            h0=ExactWeight(2 * prog.u0 - 1, 1, False),
            readout_weight=ExactWeight(prog.R, 2, True),
            readout_bias=ExactWeight(prog.R @ ones + prog.r2, 2, True))
    rn, rd = rho.numerator, rho.denominator
    Wih = np.zeros((4 * H, K), np.int64)
    Wih[2 * H:3 * H] = 2 * rd * prog.U                   # g rows: U/2 over 4·rd
    Whh = np.zeros((4 * H, H), dtype=np.int64 if 4 * H * H <= 1 << 24 else
                   _narrow(int(np.abs(A).max(initial=0)) * rn))
    Whh[2 * H:3 * H] = A
    Whh[2 * H:3 * H] *= rn                               # g rows: ρA/4 over 4·rd
    bias = np.zeros(4 * H, np.int64)
    bias[:H] = 4 * rd                                    # i: +β
    bias[H:2 * H] = -4 * rd                              # f: −β
    bias[3 * H:] = 4 * rd                                # o: +β
    bias[2 * H:3 * H] = rd * (A1 + prog.b2)
    h0 = [Fraction(int(2 * v - 1) * rd, rn) for v in prog.u0]   # ±1/ρ: u0 exact
    return RecurrentBlocks(
        embedding=emb,
        weight_ih=ExactWeight(Wih, 4 * rd, True),
        weight_hh=ExactWeight(Whh, 4 * rd, True),
        bias_ih=ExactWeight(bias, 4 * rd, True),
        bias_hh=ExactWeight(np.zeros(4 * H, np.int64), 1, True),
        h0=ExactWeight.of(h0, scaled=False),
        c0=ExactWeight(2 * prog.u0 - 1, 1, False),
        readout_weight=ExactWeight(rn * prog.R, 2 * rd, True),
        readout_bias=ExactWeight(prog.R @ ones + prog.r2, 2, True))


@dataclass(frozen=True)
class IndexBlock(ExactWeight):
    """The (2, nnz) int64 (row, column) indices of a sparse block of a `SparseRecurrentNet`: a
    state-dict entry that is no weight, so `to_float` gives the indices unchanged (int64, for any
    β and dtype) and `CompiledNetwork.float_weights` / ``with_scale`` carry them along."""

    def to_float(self, beta: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.as_tensor(np.asarray(self.numer, np.int64))


def _sparse_weights(prog: SparseProgram, A1: np.ndarray, lstm: bool, rho: Any, K: int
                    ) -> dict[str, ExactWeight]:
    """`SparseRecurrentNet`'s exact weights (state-dict keys) of a `SparseProgram`: the blocks
    of `_dense_blocks`, with W_ih and W_hh = S + G·F as values and `IndexBlock` indices (for the
    LSTM only the g rows, 2H..3H, are nonzero)."""
    H = prog.layout.H
    ones = np.ones(H, np.int64)
    (sr, sc, sv), (gr, gk, gv), (fk, fc), (ur, uc, uv) = prog.S, prog.G, prog.F, prog.U
    if not lstm:
        off, den, num, uden = 0, 4, 1, 2                     # W_hh = βA/4, W_ih = βU/2 (Elman)
    else:
        rn, rd = rho.numerator, rho.denominator
        off, den, num, uden = 2 * H, 4 * rd, rn, 4 * rd      # g rows: ρβA/4, βU/2 over 4·rd

    def values(vals: np.ndarray, denom: int, scaled: bool) -> ExactWeight:
        return ExactWeight(np.asarray(vals, np.int64), denom, scaled)

    def index(rows: np.ndarray, cols: np.ndarray) -> IndexBlock:
        return IndexBlock(np.stack([rows, cols]).astype(np.int64), 1, False)

    if not lstm:
        bias = A1 + prog.b2                                  # over 4, times β
        h0 = ExactWeight(2 * prog.u0 - 1, 1, False)
        readout = ExactWeight(prog.R, 2, True)
        u_num, c0 = uv, None
    else:
        bias = np.zeros(4 * H, np.int64)                     # over 4·rd, times β
        bias[:H] = 4 * rd                                    # i: +β
        bias[H:2 * H] = -4 * rd                              # f: −β
        bias[3 * H:] = 4 * rd                                # o: +β
        bias[2 * H:3 * H] = rd * (A1 + prog.b2)
        h0 = ExactWeight.of([Fraction(int(2 * v - 1) * rd, rn) for v in prog.u0],
                            scaled=False)                    # ±1/ρ: u0 exact
        c0 = ExactWeight(2 * prog.u0 - 1, 1, False)
        readout = ExactWeight(rn * prog.R, 2 * rd, True)
        u_num = 2 * rd * uv
    return sparse_state_dict(SparseBlocks(
        embedding=ExactWeight(np.eye(K, dtype=np.int64), 1, False),
        weight_ih_values=values(u_num, uden, True), weight_ih_indices=index(ur + off, uc),
        weight_hh_values=values(num * sv, den, True), weight_hh_indices=index(sr + off, sc),
        share_out_values=values(num * gv, den, True), share_out_indices=index(gr + off, gk),
        share_in_values=values(np.ones(len(fk), np.int64), 1, False),
        share_in_indices=index(fk, fc),
        bias_ih=ExactWeight(bias, den, True),
        bias_hh=ExactWeight(np.zeros(len(bias), np.int64), 1, True),
        h0=h0, c0=c0, readout_weight=readout,
        readout_bias=ExactWeight(prog.R @ ones + prog.r2, 2, True)))


def estimate_sparse_bytes(cases: list[LookupCase], lay: Layout, lstm: bool, n_in: int,
                          n_out: int) -> int:
    """Working memory of a sparse build: 160 bytes per stored entry (`sparse_entries`: the
    triples as built, coalesced and sorted, the exact integer values and indices, the float
    values and the CSR copies a run makes) and 64 bytes per recurrence row and unit (biases,
    row sums, initial state, decoder), plus the embedding and readout (16 bytes an entry)."""
    rows = (4 if lstm else 1) * lay.H
    return (160 * sparse_entries(cases, lay) + 64 * (rows + lay.H)
            + 16 * (n_in * n_in + (n_out + 1) * lay.H))


def _load_sparse(weights: dict[str, ExactWeight], beta: Any, dtype: torch.dtype, cell: str,
                 K: int, H: int, n_logits: int, n_shared: int) -> SparseRecurrentNet:
    """The float `SparseRecurrentNet`: its indices from the `IndexBlock`s, every value
    ``w.to_float(beta, dtype)`` written in place (`_fill`)."""
    blocks = sparse_blocks(weights)
    indices = {name: getattr(blocks, f"{name}_indices").numer for name in SPARSE_BLOCKS}
    module = SparseRecurrentNet(cell, K, K, H, n_logits, n_shared, indices).to(dtype)
    state = module.state_dict(keep_vars=True)
    if set(state) != set(weights):
        raise CompileError(f"exact weights do not cover the module: missing "
                           f"{sorted(set(state) - set(weights))}, extra "
                           f"{sorted(set(weights) - set(state))}")
    with torch.no_grad():
        for name, w in weights.items():
            if not isinstance(w, IndexBlock):
                _fill(state[name], w, beta, dtype, name)
    return module


def _load(weights: dict[str, ExactWeight], beta: Any, dtype: torch.dtype, cell: str, K: int,
          H: int, n_logits: int) -> RecurrentNet:
    """The float module: as `load_exact` for small networks; for a large one the same float
    values (`ExactWeight.to_float`) written straight into the parameters of a module built
    without initialisation (no random init, no second float copy of each block)."""
    if H * H <= 1 << 22:
        return load_exact(RecurrentNet(cell, K, K, H, n_logits), weights, beta, dtype)
    with torch.device("meta"):
        module = RecurrentNet(cell, K, K, H, n_logits)
    module = module.to(dtype).to_empty(device="cpu")
    params = dict(module.named_parameters())
    if set(params) != set(weights) or set(module.state_dict()) != set(weights):
        raise CompileError(f"exact weights do not cover the module: missing "
                           f"{sorted(set(params) - set(weights))}, extra "
                           f"{sorted(set(weights) - set(params))}")
    with torch.no_grad():
        for name, w in weights.items():
            _fill(params[name], w, beta, dtype, name)
    for p in module.parameters():
        p.requires_grad_(True)
    return module


def _fill(out: torch.Tensor, w: ExactWeight, beta: Any, dtype: torch.dtype, name: str) -> None:
    """Write ``w.to_float(beta, dtype)`` into ``out`` in place. For integer numerators every
    value from min to max of w.numer is first converted both ways — as `to_float` does (float64
    product, rounded once to ``dtype``) and as the fast path does (converted to ``dtype``, then
    multiplied in ``dtype``) — and the fast path is used only when the two agree on every such
    value (hence on every entry); otherwise the float64 product, a block of rows at a time.
    InputError when a value overflows ``dtype``."""
    overflow = InputError(f"weight block {name!r} overflows {str(dtype).replace('torch.', '')} "
                          f"at scale β = {beta}: use a smaller scale or a wider dtype such as "
                          "float64")
    numer = w.numer
    if numer.dtype == object or numer.size == 0:
        values = w.to_float(beta, dtype)
        if not bool(torch.isfinite(values).all()):
            raise overflow
        out.copy_(values.reshape(out.shape))
        return
    factor = (float(beta) if w.scaled else 1.0) / w.denom
    lo, hi = int(numer.min()), int(numer.max())
    if hi - lo < 1 << 16:
        vals = np.resize(np.arange(lo, hi + 1, dtype=numer.dtype), max(hi - lo + 1, 64))
        exact = torch.as_tensor(vals.astype(np.float64) * factor, dtype=dtype)
        if not bool(torch.isfinite(exact).all()):
            raise overflow
        fast = torch.empty(len(vals), dtype=dtype)
        fast.copy_(torch.from_numpy(vals)).mul_(factor)      # the fast path, on every value
        if torch.equal(fast, exact):
            out.copy_(torch.from_numpy(numer).reshape(out.shape)).mul_(factor)
            return
    flat = out.reshape(len(out), -1) if out.ndim else out.reshape(1)
    rows = numer.reshape(len(flat), -1)
    for i in range(0, len(rows), 1024):
        block = torch.as_tensor(rows[i:i + 1024].astype(np.float64) * factor, dtype=dtype)
        if not bool(torch.isfinite(block).all()):
            raise overflow
        flat[i:i + 1024] = block


def _reader(transducer: bool) -> Callable[[np.ndarray], np.ndarray]:
    if transducer:
        def read_symbol(logits: np.ndarray) -> np.ndarray:
            idx = logits.argmax(-1)
            return np.where(idx == logits.shape[-1] - 1, -1, idx).astype(np.int64)
        return read_symbol
    return lambda logits: logits[..., 0] > 0


def floor_info(machine: BoundedPDA, view: realtime.RealtimeTable) -> dict[str, Any]:
    """The information floor ⌈log₂ #reachable configurations⌉ when there are at most
    `ENUMERATE_CONFIGS` configurations to enumerate (``floor_exact``), and always the upper bound
    ⌈log₂|Q|⌉ + ⌈log₂ Σ_{i≤m}|Γ|^i⌉ ≥ ⌈log₂(|Q|·Σ_{i≤m}|Γ|^i)⌉ (``floor_upper``): every
    configuration is a state and a stack of depth ≤ m. The exact floor is tried (breadth-first,
    stopping at `ENUMERATE_CONFIGS`) only when |Q|·(|Γ| + 1)^min(m, 64) is at most 1000 times
    that, so large m costs nothing."""
    Q, G, m = view.Q, view.G, machine.m
    stacks = information_floor(G, m) if G >= 1 else 0
    upper = (Q - 1).bit_length() + stacks
    out: dict[str, Any] = {"floor_upper": upper,
                           "floor_upper_formula": "⌈log₂|Q|⌉ + ⌈log₂ Σ_{i≤m}|Γ|^i⌉"}
    if Q * (G + 1) ** min(m, 64) > ENUMERATE_CONFIGS * 1000:
        return out                       # far too many to try
    try:
        configs, _ = machine.reachable_configs(max_states=ENUMERATE_CONFIGS)
    except SearchBoundError:
        return out
    out["configs"] = len(configs)
    out["floor_exact"] = (len(configs) - 1).bit_length()
    return out


def _labels(cases: list[LookupCase], lay: Layout, inner: Any, view: realtime.RealtimeTable
            ) -> tuple[str, ...]:
    states = inner.states
    syms = inner.alphabet.symbols
    stack = list(inner.stack_alphabet.symbols) + ["⊥"]

    def test(t: SlotTest) -> str:
        return (f"slot{t.slot + 1}={stack[t.code]!r}" if t.kind == "equals"
                else f"slot{t.slot + 1} {t.kind}")

    out = ["start"]
    for c in cases:
        src = c.source + (f" {stack[c.source_symbol]!r}" if c.source_symbol >= 0 else
                          " any" if c.source in ("push", "replace") else "")
        tops = ",".join(repr(stack[x]) for x in c.top)
        cond = "; ".join(test(t) for t in c.tests)
        out.append(f"{states[c.p]!r} {syms[c.a]!r} after {src} top∈{{{tops}}}"
                   + (f" [{cond}]" if cond else "") + f" → {states[c.p2]!r} {c.op}"
                   + (f" {stack[c.y]!r}" if c.y >= 0 else ""))
    out += [f"{copy} slot {s + 1}[{j}]" for copy in lay.copies for s in range(lay.m)
            for j in range(lay.d)]
    return tuple(out)


@dataclass(frozen=True)
class CompactDecoder:
    """States (…, H) (Elman h; LSTM h, or [h, c]) → the machine's fields ``state``, ``depth``,
    ``top`` and ``stack`` (bottom first, BOTTOM = G at index 0, −1 above the top, width m + 1;
    −1 everywhere once dead): the lookup unit on gives the state and the step's operation, which
    applied to the slot units (the stack before the step) gives the stack."""

    layout: Layout
    cases: list
    q0: int
    G: int

    def __call__(self, states: np.ndarray) -> dict[str, np.ndarray]:
        lay = self.layout
        H, m, d, G = lay.H, lay.m, lay.d, self.G
        states = np.asarray(states)
        lead = states.shape[:-1]
        on = states.reshape(-1, states.shape[-1])[:, :H] > 0             # (N, H)
        nL = lay.n_lookup
        p2 = np.array([c.p2 for c in self.cases] + [self.q0, -1], np.int64)
        opc = np.array([{"noop": 0, "push": 1, "pop": 2, "replace": 3}[c.op]
                        for c in self.cases] + [0, 0], np.int8)
        ys = np.array([c.y for c in self.cases] + [-1, -1], np.int64)
        Lon = on[:, 1:1 + nL]
        which = np.where(Lon.any(-1), Lon.argmax(-1) if nL else 0,
                         np.where(on[:, 0], nL, nL + 1))
        state, op, y = p2[which], opc[which], ys[which]
        dt = np.int16 if G < 2**15 - 1 else np.int64
        if d:                       # slot codes of the stack before the step, top first
            bits = on[:, 1 + nL:].reshape(len(on), len(lay.copies), m, d).any(1)
            tf = np.zeros((len(on), m), dt)
            for j in range(d):
                tf = (tf << 1) | bits[..., j]
            tf -= 1                                                        # −1: empty
        else:
            tf = np.full((len(on), m), -1, dt)
        rows = np.nonzero(op == 1)[0]                                      # push y
        tf[rows, 1:] = tf[rows, :-1]
        tf[rows, 0] = y[rows]
        rows = np.nonzero(op == 2)[0]                                      # pop
        tf[rows, :-1] = tf[rows, 1:]
        tf[rows, -1] = -1
        rows = np.nonzero(op == 3)[0]                                      # replace by y
        tf[rows, 0] = y[rows]
        dead = state < 0
        depth = np.where(dead, -1, (tf >= 0).sum(-1))
        stack = np.full((len(on), m + 1), -1, dt)
        stack[:, 0] = G                                                    # bottom first
        rev = tf[:, ::-1]                                                  # ends with the stack
        for k in np.unique(depth[depth > 0]):
            r = np.nonzero(depth == k)[0]
            stack[r, 1:k + 1] = rev[r, m - k:]
        stack[dead] = -1
        top = np.where(dead, -1, np.where(depth > 0, tf[:, 0], G))
        return {"state": state.reshape(lead), "depth": depth.reshape(lead),
                "top": top.astype(np.int64).reshape(lead),
                "stack": stack.reshape(lead + (m + 1,))}


def compile_compact_elman(machine: BoundedPDA, dtype: torch.dtype = torch.float32,
                          scale: Any = None, sparse: bool | None = None
                          ) -> CompiledNetwork:
    """`compile_compact` to an Elman RNN."""
    return compile_compact(machine, "elman", dtype, scale, sparse)


def compile_compact_lstm(machine: BoundedPDA, dtype: torch.dtype = torch.float32,
                         scale: Any = None, sparse: bool | None = None
                         ) -> CompiledNetwork:
    """`compile_compact` to an LSTM (saturated Elman units in LSTM cells)."""
    return compile_compact(machine, "lstm", dtype, scale, sparse)


@dataclass(frozen=True)
class ConfigDecoder:
    """Wraps the decoder of a network for ``bounded.to_dfa()`` (its ``state`` is a DFA state, a
    configuration) into the bounded machine's fields: ``state``, ``depth``, ``top`` and
    ``stack`` (bottom first, width m + 1), −1 everywhere for the dead state."""

    inner: Callable[[np.ndarray], dict[str, np.ndarray]]
    table: dict[str, np.ndarray]       # field -> (n + 1, …) rows, the last for the dead state

    @classmethod
    def of(cls, inner: Callable, bounded: BoundedPDA, dfa: Any) -> ConfigDecoder:
        pda, m = bounded.machine, bounded.m
        n = len(dfa.states)
        rows = {"state": np.full(n + 1, -1, np.int64), "depth": np.full(n + 1, -1, np.int64),
                "top": np.full(n + 1, -1, np.int64), "stack": np.full((n + 1, m + 1), -1, np.int64)}
        for i, c in enumerate(dfa.states):
            codes = [pda.stack_code(x) for x in c.stack]
            rows["state"][i] = pda.state_index(c.state)
            rows["depth"][i] = c.depth
            rows["top"][i] = codes[-1]
            rows["stack"][i, :len(codes)] = codes
        return cls(inner, rows)

    def __call__(self, states: np.ndarray) -> dict[str, np.ndarray]:
        idx = np.asarray(self.inner(states)["state"])
        idx = np.where(idx >= 0, idx, len(self.table["state"]) - 1)
        return {name: rows[idx] for name, rows in self.table.items()}


def _minsky(machine: BoundedPDA, build: Callable[..., CompiledNetwork], dtype: torch.dtype,
            **options: Any) -> CompiledNetwork:
    if not isinstance(machine, BoundedPDA):
        raise InputError(f"expected a BoundedPDA (machine.bounded(m)), got "
                         f"{type(machine).__name__}")
    requires(machine, raise_error=True)
    dfa = machine.to_dfa(max_states=limits.current().max_configs)
    net = build(dfa, dtype=dtype, **options)
    reader = net.reader
    if isinstance(machine.machine, DPDT):          # the DFA's outputs may be emitted tuples
        reader = OutputMap(net.reader, _output_map(machine.machine, dfa))
    return replace(net, machine=machine, decoder=ConfigDecoder.of(net.decoder, machine, dfa),
                   reader=reader, info={**net.info, "configs": len(dfa.states)})


def _output_map(pdt: DPDT, dfa: Any) -> np.ndarray:
    """DFA output index → the DPDT's output index (−1: nothing emitted)."""
    out = []
    for sym in dfa.output_alphabet.symbols:
        if isinstance(sym, tuple):
            out.append(pdt.output_alphabet.index(sym[0]) if sym else -1)
        else:
            out.append(pdt.output_alphabet.index(sym))
    return np.array(out, np.int64)


@dataclass(frozen=True)
class OutputMap:
    """A reader whose output indices are renamed by ``table`` (−1 stays −1)."""

    inner: Callable[[np.ndarray], np.ndarray]
    table: np.ndarray

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        idx = np.asarray(self.inner(logits))
        return np.where(idx >= 0, self.table[np.maximum(idx, 0)], -1)


def compile_minsky_elman(machine: BoundedPDA, dtype: torch.dtype = torch.float32,
                         scale: Any = None) -> CompiledNetwork:
    """Minsky's Elman network (`pdanet.constructions.dfa_rnn.compile_minsky`) of the explicit
    automaton ``machine.to_dfa()`` (one unit per reachable (configuration, symbol)): the
    exponential-in-m baseline the compact construction is measured against (same precondition).
    Decodes the configuration's fields (`ConfigDecoder`)."""
    return _minsky(machine, compile_minsky, dtype, scale=scale)


def compile_minsky_lstm(machine: BoundedPDA, dtype: torch.dtype = torch.float32,
                        scale: Any = None) -> CompiledNetwork:
    """`compile_minsky_elman`'s units in an LSTM (`pdanet.constructions.dfa_rnn.compile_lstm`)."""
    return _minsky(machine, compile_lstm, dtype, scale=scale)


__all__ = ["BOUND", "CompactDecoder", "ConfigDecoder", "IndexBlock", "Layout", "Program",
           "SparseProgram", "build_program", "build_sparse_program", "compile_compact",
           "compile_compact_elman", "compile_compact_lstm", "compile_minsky_elman",
           "compile_minsky_lstm", "estimate_bytes", "estimate_sparse_bytes", "floor_info",
           "lookup_cases", "requires", "slot_codes", "slot_width", "sparse_entries"]
