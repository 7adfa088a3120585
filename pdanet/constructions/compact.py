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
meets no floating-point precision limit in any dtype; what bounds m is memory (the recurrence is
dense: H² weights, 4H² for the LSTM), checked against `pdanet.limits` before anything is allocated.
"""

from __future__ import annotations

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
from pdanet.constructions.modules import RecurrentBlocks, RecurrentNet, recurrent_state_dict
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
                        tests = _tests(cs, source, sym, m, G)
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
    # readout
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
    u0 = np.zeros(H, np.int64)
    u0[0] = 1
    return Program(A, U, b2, R, r2, u0, lay)


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
                    dtype: torch.dtype = torch.float32, scale: Any = None) -> CompiledNetwork:
    """A depth-bounded real-time DPDA/DPDT (``machine.bounded(m)``) → Elman RNN (``target``
    "elman") or LSTM ("lstm") with |L| + 1 + C·m·d units (see the module docstring).

    Readout: a recogniser's one logit (> 0: accept; final-state or empty-stack acceptance, as the
    machine says); a transducer's |Out| + 1 logits (argmax; the last is "no output").
    ``scale`` (β) overrides the β of the margin argument. CompileError for a machine with
    ε-moves or a move that is not noop/push/pop/replace; ResourceError before allocating a
    network over `pdanet.limits`."""
    view = _check(machine)
    if target not in ("elman", "lstm"):
        raise InputError(f"target must be 'elman' or 'lstm', got {target!r}")
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
    limits.check(what, estimate_bytes(H, lstm, view.K, max(1, view.n_out)), "max_bytes",
                 hint="lower the depth bound m")
    prog = build_program(cases, view, m, empty_stack, transducer)
    W = _row_norm(prog)
    eps = sp.Rational(1, 4 * W)
    ones = np.ones(H, np.int64)
    A = prog.A if H * H > 1 << 24 else prog.A.astype(np.int64)   # narrow only when large
    A1 = np.zeros(H, np.int64)
    for i in range(0, H, 4096):
        A1[i:i + 4096] = A[i:i + 4096].sum(1, dtype=np.int64)
    K = view.K
    emb = ExactWeight(np.eye(K, dtype=np.int64), 1, False)
    n_logits = prog.R.shape[0]
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
        blocks = RecurrentBlocks(
            embedding=emb,
            weight_ih=ExactWeight(prog.U, 2, True),
            weight_hh=ExactWeight(A, 4, True),
            bias_ih=ExactWeight(A1 + prog.b2, 4, True),
            bias_hh=ExactWeight(np.zeros(H, np.int64), 1, True),
            h0=ExactWeight(2 * prog.u0 - 1, 1, False),
            readout_weight=ExactWeight(prog.R, 2, True),
            readout_bias=ExactWeight(prog.R @ ones + prog.r2, 2, True))
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
        blocks = RecurrentBlocks(
            embedding=emb,
            weight_ih=ExactWeight(Wih, 4 * rd, True),
            weight_hh=ExactWeight(Whh, 4 * rd, True),
            bias_ih=ExactWeight(bias, 4 * rd, True),
            bias_hh=ExactWeight(np.zeros(4 * H, np.int64), 1, True),
            h0=ExactWeight.of(h0, scaled=False),
            c0=ExactWeight(2 * prog.u0 - 1, 1, False),
            readout_weight=ExactWeight(rn * prog.R, 2 * rd, True),
            readout_bias=ExactWeight(prog.R @ ones + prog.r2, 2, True))
    if scale is not None:
        beta = as_scale(scale)
        argument += f" Overridden: β = {beta} (the guarantee above needs the β it names)."
    weights = recurrent_state_dict(blocks)
    module = _load(weights, beta, dtype, "rnn" if not lstm else "lstm", K, H, n_logits)
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
        abstraction=abstraction, info={"W": W, **floor_info(machine, view)})
    if net.bound_value != H:
        raise AssertionError(f"compact: {H} units but the bound gives {net.bound_value}")
    return net


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
                          scale: Any = None) -> CompiledNetwork:
    """`compile_compact` to an Elman RNN."""
    return compile_compact(machine, "elman", dtype, scale)


def compile_compact_lstm(machine: BoundedPDA, dtype: torch.dtype = torch.float32,
                         scale: Any = None) -> CompiledNetwork:
    """`compile_compact` to an LSTM (saturated Elman units in LSTM cells)."""
    return compile_compact(machine, "lstm", dtype, scale)


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


__all__ = ["BOUND", "CompactDecoder", "ConfigDecoder", "Layout", "Program", "build_program", "compile_compact",
           "compile_compact_elman", "compile_compact_lstm", "compile_minsky_elman",
           "compile_minsky_lstm", "estimate_bytes", "floor_info", "lookup_cases", "requires",
           "slot_codes", "slot_width"]
