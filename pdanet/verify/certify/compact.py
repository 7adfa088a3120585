"""All-lengths certificates for the compact bounded-PDA networks (`CompactSlots`) by local views.

A compact network (`pdanet.constructions.compact`) of a depth-bounded real-time DPDA or DPDT has
Σ_{i≤m}|Γ|ⁱ·|Q| configurations — far too many for the box family's exploration at m = 16 — but
every unit reads only the lookup units, the input and the code bits of at most a few stack
slots. This module proves the box-induction statement of `pdanet.verify.certify.induction` (every
state within its box is mapped into the box of the successor, and every box reads out the
machine's output) unit by unit on *local views*, with every ideal value derived from the
machine's own transition table (`pdanet.constructions.realtime.table`), never from the
construction's weights or its lookup units' declared outcomes.

Abstract configurations. σ_t = (p, a, o, y, S): the state p before step t, the symbol a it read,
the previous step's operation o ∈ {start, push, replace, noop, pop} (y its written code) and the
stack S before step t (depth δ ≤ m). The table gives step t's outcome (q_t, op_t, Y_t, output);
σ_t is *live* when that transition exists and does not push past m (`BoundedPDA`). The encoding
E(σ_t) (the box centres) is built from the abstraction's declared unit roles: lookup unit κ is on
iff κ's (p, a, source, source symbol) are (p, a, o, y) — a source symbol −1 after a push or
replace matches every written code y (`LookupCase`: "any written code"; the top of S is then y,
so the tops of κ still decide) —, the top of S is one of κ's tops and, when
κ says so, the stack after the step is empty or not (`LookupCase.empty_after`); the start unit is
on only at t = 0; slot-copy unit (c, s, j) is on iff the copy c is the one written for slot s by o
(push → "push"; replace → "push" for the top, "keep" below; noop → "keep"; pop → "pop") and bit j
of slot s's code (`CompactSlots.codes`) is 1. Ideal values are ±1 (Elman, u = (1 + h)/2) or
h = ±tanh 1, c = ±1 (the saturated Elman unit in an LSTM cell).

Lemma 1 (the lookup is a function). For every σ-class (p, o, y reachable through the table from
the start; the top X; the depth range allowed by o; empty after or not) that is live, exactly
one lookup unit is on (counting the units for y and those for any written code) (`_coverage`;
otherwise NOT CERTIFIED, kind "encoding"). So the network state of a live σ_t is determined by
(κ on, o, S), and every live reachable σ_t lies in one *case* (κ, o, the tops of κ with one
outcome, depth δ) that `_cases` enumerates.

Lemma 2 (locality). Unit u's pre-activation is base_u + W[u, κ] + Σ_{slots s read by u}
f_{u,s,o}(S[s]) + W_ih[u]·x_{a'}: one term per slot (the units of slot s in every copy), each a
function of that slot's content and o. Its *target* (the ideal value in E(σ_{t+1})) is a function
of the case's outcome, the next symbol's class (a lookup unit's own symbol, or not) and at most
one *pinned* slot's content class: a copy unit's source slot (bit j of its code) or, for a lookup
unit whose gate matches, the slot holding the next top (in the unit's live tops or not; a top that
makes σ_{t+1} dead needs no check). A local view is (unit, case, symbol class, pinned class); the
certifier encloses the pre-activation over *every* assignment of slot contents consistent with it:
slot 0 over the case's tops, slots above the depth over Γ, deeper slots empty, the pinned slot
within its class — a product of per-slot sets that contains every reachable stack, whose range is
the sum of exact per-slot ranges. The views of all units number O(units × cases × 2) with cases
≤ |L|·(m + 1): no enumeration of stacks. Identical views are merged.

Lemma 3 (readout). Each logit is affine in the state, so per case its range is the lookup term
plus per-slot ranges; the required output (final state of q_t, an empty stack after the step, or
the transducer's symbol) is a function of the case.

Lemma 4 (exact rows; Elman in float32 under the "saturating" kernel model). A row whose weights,
biases and input codes lie on one grid 2^−k with Σ|entries|·2^k < 2^p (`grid_rows`) is computed
without any rounding, in any order, when every state it reads is exactly ±1. Let X be the
greatest set of units such that h0 = E0 on X and every view of a unit of X has a row reading
only X whose exact image the checked kernel saturation maps exactly onto the target ±1
(`Compact._exact_set`). By induction h_t = E(σ_t) on X at every step, so those rows and the
readout rows reading only X carry neither spread |W|·R nor rounding. This is what keeps the γₙ
rounding bounds of rows with ℓ₁ norms in the thousands (wide lookups, |Σ| = 128) from eating the
margin; networks whose units do not saturate exactly get the ordinary bounds.

Lemma 5 (rounding of wide rows: the LSTM, and Elman rows off the grid). A row's rounding is the
smaller of γₙ·Σ|t| (n all columns) and `_sum_error` on its n nonzero terms only (a zero weight
adds an exact zero): every addition node of the summation tree rounds by at most u times its
value, and node values are subset sums, so they lie in [−N, P] (half of Σ|t| plus |Σ t|) and,
singling out the largest term b, the nodes holding b form one path whose values are Σ t minus
what lies outside them — about half the γₙ charge on rows of thousands of equal terms ±q·tanh 1
that cancel a large bias (the lookup gates of |Σ| = 64 or 128). No order of summation is
assumed.

Radii are per unit; the fixed point, the LSTM cell drift bound and the ε search are
`pdanet.verify.certify.induction`'s. Interval arithmetic is `pdanet.verify.intervals` in the
module's dtype with outward rounding (every float a proof uses is a float of the module; sums
carry γₙ bounds, Higham §3.1). A radius may grow past the cap ε (to 3ε, `Compact.growth`): the
proof never decodes a box by thresholds, it checks every step and every logit on the boxes
themselves, so weakly saturated networks (small β) are covered as far as their margins allow. The
bottom marker ⊥ is never popped or replaced (`DPDA` refuses such moves), so the stack before a
step is a sequence of ≤ m symbols over ⊥.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from pdanet.automata.base import Machine
from pdanet.automata.pda import BoundedPDA
from pdanet.constructions import realtime
from pdanet.constructions.abstraction import CompactSlots
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.modules import RecurrentBlocks
from pdanet.errors import CertificationError, PdanetError
from pdanet.verify import intervals as iv
from pdanet.verify.certify import box
from pdanet.verify.certify.core import (
    Certificate,
    FailingCase,
    Progress,
    begin,
    check_arguments,
    check_pair,
    nan_min,
    notify,
    overflow_free,
)
from pdanet.verify.certify.induction import LIVE_NOTE, lstm_image, prove

_U64 = 2.0**-53
TANH1 = math.tanh(1.0)
START, PUSH, REPLACE, NOOP, POP = range(5)
OPS = ("start", "push", "replace", "noop", "pop")
DELTA = np.array([0, 1, 0, 0, -1], np.int64)
_TABLE_OP = {"push": PUSH, "replace": REPLACE, "noop": NOOP, "pop": POP}


# --- the semantic model -------------------------------------------------------------------------

class _Masks:
    """Sets of slot contents (0/1 masks over the G + 1 codes, G = empty) by integer id, with
    cached intersections."""

    def __init__(self, G: int):
        self.G = G
        self.rows: list[np.ndarray] = []
        self.ids: dict[bytes, int] = {}
        self.meets: dict[tuple[int, int], int] = {}
        gamma = np.ones(G + 1, bool)
        gamma[G] = False
        self.GAMMA = self.add(gamma)
        self.EMPTY = self.add(~gamma)

    def add(self, mask: np.ndarray) -> int:
        key = np.asarray(mask, bool).tobytes()
        if key not in self.ids:
            self.ids[key] = len(self.rows)
            self.rows.append(np.asarray(mask, bool).copy())
        return self.ids[key]

    def meet(self, a: int, b: int) -> int:
        k = (min(a, b), max(a, b))
        if k not in self.meets:
            self.meets[k] = self.add(self.rows[a] & self.rows[b])
        return self.meets[k]

    def meet_many(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        base = int(max(a.max(initial=0), b.max(initial=0))) + 1
        keys, inv = np.unique(a * base + b, return_inverse=True)
        got = np.array([self.meet(*divmod(int(k), base)) for k in keys], np.int64)
        return got[inv.reshape(-1)] if len(got) else np.zeros(0, np.int64)

    def empty(self, ids: np.ndarray) -> np.ndarray:
        nonempty = np.array([bool(r.any()) for r in self.rows])
        return ~nonempty[ids]

    def matrix(self) -> np.ndarray:
        return np.stack(self.rows)


@dataclass
class _Model:
    """The machine's table and the network's declared unit roles."""

    machine: BoundedPDA
    tab: realtime.RealtimeTable
    abst: CompactSlots
    H: int
    lstm: bool
    m: int
    G: int
    K: int
    d: int
    nxt: np.ndarray           # (Q, K, G+1) next state, −1: no transition
    op: np.ndarray            # (Q, K, G+1) operation code
    ych: np.ndarray           # (Q, K, G+1) written code (−1 none)
    out: np.ndarray           # (Q, K, G+1) output index (−1 none)
    units: np.ndarray         # (C, m, d)
    codes: np.ndarray         # (G+1, d) float64
    copy_of: np.ndarray       # (5, m): copy written for slot s by each operation (−1: none)
    on: float
    off: float
    con: float
    coff: float

    @property
    def kinds(self) -> np.ndarray:
        """Per hidden unit: 0 start, 1 lookup, 2 copy."""
        k = np.full(self.H, 2, np.int64)
        k[self.abst.start] = 0
        k[np.asarray(self.abst.lookup, np.int64)] = 1
        return k

    def stack_name(self, x: int) -> str:
        syms = list(self.machine.machine.stack_alphabet.symbols)
        return "⊥" if x == self.G else repr(syms[x])

    def case_label(self, i: int) -> str:
        c = self.abst.cases[i]
        inner = self.machine.machine
        src = c.source + (f" {self.stack_name(c.source_symbol)}" if c.source_symbol >= 0 else
                          " of any code" if c.source in ("push", "replace") else "")
        return (f"lookup unit (state {inner.states[c.p]!r}, symbol {inner.alphabet.symbols[c.a]!r},"
                f" after {src})")

    def label(self, j: int) -> str:
        v = j % self.H
        pre = "c:" if j >= self.H else ""
        names = self.abst.labels
        if v < len(names):
            return pre + names[v]
        kind = self.kinds[v]
        if kind == 0:
            return pre + "start"
        if kind == 1:
            return pre + self.case_label(int(np.nonzero(np.asarray(self.abst.lookup) == v)[0][0]))
        c, s, b = (int(x[0]) for x in np.nonzero(self.units == v))
        return pre + f"{self.abst.copies[c]} copy, slot {s + 1}, bit {b}"


def _model(machine: BoundedPDA, net: CompiledNetwork) -> _Model:
    """The model from the machine's table and the network's `CompactSlots` abstraction; raises
    CertificationError when the abstraction is not a consistent compact layout."""
    lay = net.abstraction
    if not isinstance(lay, CompactSlots):
        raise CertificationError(f"{net.construction} has no compact slot layout (CompactSlots); "
                                 "use pdanet.certify")
    try:
        tab = realtime.table(machine.machine)
    except PdanetError as exc:
        raise CertificationError(f"the compact certificate needs a real-time table: {exc}") from exc
    W = net.module.blocks(numpy=True)
    H = W.h0.shape[0]
    lstm = lay.cell == "lstm"
    if lstm != (W.c0 is not None):
        raise CertificationError(f"the abstraction says cell {lay.cell!r}, the module disagrees")
    if W.out_weight is not None:
        raise CertificationError("a factored readout (out_embedding) is not covered by the "
                                 "compact certificate")
    m, G = machine.m, tab.G
    units = np.asarray(lay.units, np.int64)
    codes = np.asarray(lay.codes)
    lookup = np.asarray(lay.lookup, np.int64)
    d = int(lay.slot_width)
    if lay.slots != m or units.ndim != 3 or units.shape[1:] != (m, d):
        raise CertificationError(f"slot units of shape {units.shape} do not match m = {m}, "
                                 f"slot width {d}")
    if codes.shape != (G + 1, d) or not np.isin(codes, (0, 1)).all():
        raise CertificationError(f"slot codes must be a 0/1 array of shape {(G + 1, d)}")
    if len(lookup) != len(lay.cases) or len(set(lay.copies)) != len(lay.copies) or \
            not set(lay.copies) <= {"push", "pop", "keep"} or units.shape[0] != len(lay.copies):
        raise CertificationError("the lookup units, cases and copies of the layout disagree")
    every = np.concatenate([[lay.start], lookup, units.ravel()])
    if len(every) != H or sorted(every.tolist()) != list(range(H)):
        raise CertificationError("start, lookup and slot units must list every hidden unit once")
    for c in lay.cases:
        if not (0 <= c.p < tab.Q and 0 <= c.a < tab.K and c.source in OPS
                and all(0 <= x <= G for x in c.top)
                and (c.source_symbol == -1 or 0 <= c.source_symbol < G)):
            raise CertificationError(f"lookup case {c} is out of the machine's range")
    Q, K = tab.Q, tab.K
    nxt = np.full((Q, K, G + 1), -1, np.int64)
    op, ych, out = (np.full((Q, K, G + 1), -1, np.int64) for _ in range(3))
    for (p, a, x), (p2, o, pe, ue, y) in tab.trans.items():
        nxt[p, a, x] = p2
        op[p, a, x] = _TABLE_OP[realtime.op_name(pe, ue)]
        ych[p, a, x] = y
        out[p, a, x] = o
    idx = {name: i for i, name in enumerate(lay.copies)}
    copy_of = np.full((5, m), -1, np.int64)
    copy_of[PUSH] = idx.get("push", -1)
    copy_of[REPLACE] = idx.get("keep", -1)
    copy_of[REPLACE, 0] = idx.get("push", -1)
    copy_of[NOOP] = idx.get("keep", -1)
    copy_of[POP] = idx.get("pop", -1)
    if lstm:
        on, off, con, coff = TANH1, -TANH1, 1.0, -1.0
    else:
        on, off, con, coff = 1.0, -1.0, 1.0, -1.0
    return _Model(machine, tab, lay, H, lstm, m, G, K, d, nxt, op, ych, out, units,
                  codes.astype(np.float64), copy_of, on, off, con, coff)


def _depths(md: _Model, o: int, y: int, x: int) -> tuple[int, int] | None:
    """The depths the stack before a step can have when its top is x after operation o (which
    wrote y; −1: any code): ⊥ at depth 0; a push or replace leaves y on top, a pop depth
    ≤ m − 1."""
    G, m = md.G, md.m
    if x == G:
        return (0, 0) if o in (START, NOOP, POP) else None
    if o == START or (o in (PUSH, REPLACE) and y >= 0 and x != y):
        return None
    if o == POP:
        return (1, m - 1) if m >= 2 else None
    return (1, m)


def _code(source: str) -> int:
    return OPS.index(source)


def _coverage(md: _Model) -> FailingCase | None:
    """Lemma 1: every live σ-class reachable through the table has exactly one lookup unit."""
    cases = md.abst.cases
    index: dict[tuple, list[int]] = {}
    for i, c in enumerate(cases):
        index.setdefault((c.p, c.a, _code(c.source), c.source_symbol), []).append(i)
    tops = [frozenset(c.top) for c in cases]
    G, m, K = md.G, md.m, md.K
    q0 = md.tab.q0
    seen = {(q0, START, -1)}
    work = [(q0, START, -1)]
    inner = md.machine.machine
    while work:
        p, o, y = work.pop()
        xs = [G] if o == START else [y] if o in (PUSH, REPLACE) else range(G + 1)
        for a in range(K):
            cand = index.get((p, a, o, y), [])
            if o in (PUSH, REPLACE):              # units for any written code (−1)
                cand = cand + index.get((p, a, o, -1), [])
            for x in xs:
                q2 = md.nxt[p, a, x]
                if q2 < 0:
                    continue
                dd = _depths(md, o, y, x)
                if dd is None:
                    continue
                op2 = int(md.op[p, a, x])
                lo, hi = dd[0], min(dd[1], m - int(DELTA[op2]))
                if lo > hi:
                    continue
                after = -int(DELTA[op2])
                flags = ([True] if lo <= after <= hi else []) + \
                    ([False] if hi > lo or not lo <= after <= hi else [])
                for e in flags:
                    n = sum(1 for i in cand if x in tops[i]
                            and (cases[i].empty_after is None or cases[i].empty_after == e))
                    if n != 1:
                        what = ("no lookup unit stands for it" if n == 0
                                else f"{n} lookup units stand for it")
                        cfg = (f"state {inner.states[p]!r} reading {inner.alphabet.symbols[a]!r}"
                               f" after {OPS[o]}" + (f" {md.stack_name(y)}" if y >= 0 else "")
                               + f" with top {md.stack_name(x)}, depth in [{lo}, {hi}]"
                               + f", stack empty after: {e}")
                        return FailingCase("encoding", cfg, None, -1, what, (math.nan, math.nan),
                                           (1.0, 1.0))
                y2 = int(md.ych[p, a, x]) if op2 in (PUSH, REPLACE) else -1
                key = (int(q2), op2, y2)
                if key not in seen:
                    seen.add(key)
                    work.append(key)
    return None


@dataclass
class _Cases:
    """The cases (Lemma 1) as arrays: the unit on, the previous operation, the tops' mask id,
    the depth before the step, and the step's outcome from the table."""

    ell: np.ndarray
    o: np.ndarray
    xm: np.ndarray
    d: np.ndarray
    q2: np.ndarray
    op2: np.ndarray
    y2: np.ndarray
    out2: np.ndarray
    lookup: np.ndarray        # index into abst.cases (−1: the start case)

    def __len__(self) -> int:
        return len(self.ell)

    def adm(self, masks: _Masks, s: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Mask id of slot s's possible contents in each case (slot 0: the case's tops)."""
        xm, d = (self.xm, self.d) if rows is None else (self.xm[rows], self.d[rows])
        if s == 0:
            return xm
        return np.where(s < d, masks.GAMMA, masks.EMPTY)


def _cases(md: _Model, masks: _Masks) -> _Cases:
    G, m = md.G, md.m
    rows: list[tuple] = [(md.abst.start, START, masks.EMPTY, 0, md.tab.q0, START, -1, -1, -1)]
    for i, c in enumerate(md.abst.cases):
        o, y = _code(c.source), c.source_symbol
        groups: dict[tuple, list[int]] = {}
        for x in c.top:
            if md.nxt[c.p, c.a, x] < 0 or _depths(md, o, y, x) is None:
                continue
            key = (int(md.nxt[c.p, c.a, x]), int(md.op[c.p, c.a, x]), int(md.ych[c.p, c.a, x]),
                   int(md.out[c.p, c.a, x]))
            groups.setdefault(key, []).append(x)
        for (q2, op2, y2, out2), xs in groups.items():
            delta = int(DELTA[op2])
            for depth in range(m + 1):
                if depth + delta > m:
                    continue
                if c.empty_after is not None and c.empty_after != (depth + delta == 0):
                    continue
                members = [x for x in xs if (dd := _depths(md, o, y, x)) is not None
                           and dd[0] <= depth <= dd[1]]
                if not members:
                    continue
                mask = np.zeros(G + 1, bool)
                mask[members] = True
                rows.append((int(md.abst.lookup[i]), o, masks.add(mask), depth, q2, op2, y2,
                             out2, i))
    cols = [np.array(col, np.int64) for col in zip(*rows)]
    return _Cases(*cols)


# --- local views ------------------------------------------------------------------------------------

@dataclass
class _Views:
    """Merged local views: the unit, the enclosure of its row(s) at the ideal centres (before
    rounding and radii), the input term's magnitude, the target (on/off) and a representative
    (case, symbol class, pinned slot, its mask) for messages."""

    unit: np.ndarray          # (N,)
    zlo: np.ndarray           # (N, G) G = 1 (Elman) or 4 (LSTM gates i, f, g, o)
    zhi: np.ndarray
    absin: np.ndarray         # (N, G)
    target: np.ndarray        # (N,) bool
    case: np.ndarray          # (N,)
    acls: np.ndarray          # (N,) −1: every symbol; a ≥ 0: a; −2 − a: every symbol but a
    pin: np.ndarray           # (N,) pinned slot or −1
    pid: np.ndarray           # (N,) its mask id


class _Rows:
    """Per-row terms of the recurrence (or readout) at the ideal centres."""

    def __init__(self, md: _Model, masks: _Masks, cs: _Cases, W: np.ndarray, bias: np.ndarray,
                 Win: np.ndarray | None, emb: np.ndarray | None, on: float, off: float):
        self.md, self.masks, self.cs = md, masks, cs
        self.W, self.on, self.off = W, on, off
        self.base = bias + off * W.sum(1)
        C = md.units.shape[0]
        if md.d and C:
            nz = (W[:, md.units.ravel()] != 0).reshape(len(W), C, md.m, md.d)
            self.reads = nz.any(axis=(1, 3))                         # (rows, m)
        else:
            self.reads = np.zeros((len(W), md.m), bool)
        if Win is not None:
            self.inp = Win @ emb.T                                   # (rows, K)
            self.inabs = np.abs(Win) @ np.abs(emb).T
        self.M = masks.matrix()

    def refresh(self) -> None:
        self.M = self.masks.matrix()

    def slot_ranges(self, r: int, s: int, o: np.ndarray, mid: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """min/max over each (operation, content set) of row r's term for slot s."""
        md = self.md
        key = o * (len(self.M) + 1) + mid
        uniq, inv = np.unique(key, return_inverse=True)
        lo = np.empty(len(uniq))
        hi = np.empty(len(uniq))
        for k, kv in enumerate(uniq.tolist()):
            oo, mm = divmod(kv, len(self.M) + 1)
            c = md.copy_of[oo, s]
            if c < 0:
                vals = np.zeros(md.G + 1)
            else:
                vals = (self.on - self.off) * (md.codes @ self.W[r, md.units[c, s]])
            sel = self.M[mm]
            lo[k] = np.min(vals, where=sel, initial=np.inf)
            hi[k] = np.max(vals, where=sel, initial=-np.inf)
        inv = inv.reshape(-1)
        return lo[inv], hi[inv]

    def centre(self, r: int, case: np.ndarray, pin: np.ndarray, pid: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Range of row r's state term over every stack of each view (Lemma 2)."""
        cs = self.cs
        z = self.base[r] + (self.on - self.off) * self.W[r, cs.ell[case]]
        lo, hi = z.copy(), z.copy()
        for s in np.nonzero(self.reads[r])[0].tolist():
            mid = np.where(pin == s, pid, cs.adm(self.masks, s, case))
            a, b = self.slot_ranges(r, s, cs.o[case], mid)
            lo += a
            hi += b
        return lo, hi

    def inputs(self, r: int, acls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Range and magnitude of row r's input term over each symbol class."""
        v, va = self.inp[r], self.inabs[r]
        K = len(v)
        order = np.argsort(v, kind="stable")
        lo_all, hi_all, abs_all = v.min(), v.max(), va.max()
        a = np.where(acls >= 0, acls, np.where(acls <= -2, -2 - acls, 0))
        ex_lo = np.where(a == order[0], v[order[1]] if K > 1 else np.inf, lo_all)
        ex_hi = np.where(a == order[-1], v[order[-2]] if K > 1 else -np.inf, hi_all)
        aorder = np.argsort(va, kind="stable")
        ex_abs = np.where(a == aorder[-1], va[aorder[-2]] if K > 1 else 0.0, abs_all)
        lo = np.select([acls >= 0, acls <= -2], [v[a], ex_lo], lo_all)
        hi = np.select([acls >= 0, acls <= -2], [v[a], ex_hi], hi_all)
        ab = np.select([acls >= 0, acls <= -2], [va[a], ex_abs], abs_all)
        return lo, hi, ab


def _next_tops(md: _Model, ci: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per depth d_t of the stack before the next step: the tops X' for which lookup case ci is
    the live unit on, and the tops that make the next configuration dead."""
    c = md.abst.cases[ci]
    G, m = md.G, md.m
    nxt = md.nxt[c.p, c.a]
    delta = DELTA[np.maximum(md.op[c.p, c.a], 0)]
    intop = np.zeros(G + 1, bool)
    intop[list(c.top)] = True
    on, dead = [], []
    for dt in range(m + 1):
        exists = nxt >= 0
        live = exists & (dt + delta <= m)
        ok = live & intop
        if c.empty_after is not None:
            ok &= (dt + delta == 0) == c.empty_after
        consistent = np.zeros(G + 1, bool)
        if dt == 0:
            consistent[G] = True
        else:
            consistent[:G] = True
        on.append(ok & consistent)
        dead.append(~live)
    return on, dead


def _unit_views(md: _Model, masks: _Masks, cs: _Cases, u: int, kind: int,
                where: dict) -> tuple[np.ndarray, ...]:
    """The local views of unit u (Lemma 2): (case, symbol class, pinned slot, mask id, target)."""
    N = len(cs)
    allc = np.arange(N)
    parts: list[tuple] = []

    def add(case, acls, pin, pid, tgt):
        case = np.asarray(case, np.int64)
        if len(case):
            parts.append((case, np.broadcast_to(np.asarray(acls, np.int64), case.shape),
                          np.broadcast_to(np.asarray(pin, np.int64), case.shape),
                          np.broadcast_to(np.asarray(pid, np.int64), case.shape),
                          np.broadcast_to(np.asarray(tgt, bool), case.shape)))

    def pinned(case, slot, adm, on_mask, off_mask, acls):
        """Two views per case: the pinned slot's content in the on set or the off set."""
        for mk, tgt in ((on_mask, True), (off_mask, False)):
            pid = masks.meet_many(adm, mk)
            keep = ~masks.empty(pid)
            add(case[keep], acls, slot[keep], pid[keep], tgt)

    if kind == 0:                                         # start: off after t = 0
        add(allc, -1, -1, -1, False)
    elif kind == 2:                                       # copy unit (c, s, j)
        c, s, j = where["copy"][u]
        cu = md.copy_of[cs.op2, s]
        add(allc[cu != c], -1, -1, -1, False)
        mine = allc[cu == c]
        op2 = cs.op2[mine]
        writes = np.isin(op2, (PUSH, REPLACE))
        static = (writes & (s == 0)) | ((op2 == POP) & (s + 1 >= md.m))
        code = np.where(writes, cs.y2[mine], md.G)
        st = mine[static]
        add(st, -1, -1, -1, md.codes[code[static], j] > 0)
        sl = mine[~static]
        src = np.where(op2[~static] == PUSH, s - 1, np.where(op2[~static] == POP, s + 1, s))
        adm = np.where(src == 0, cs.xm[sl], np.where(src < cs.d[sl], masks.GAMMA, masks.EMPTY))
        b1 = masks.add(np.append(md.codes[:md.G, j] > 0, md.codes[md.G, j] > 0))
        b0 = masks.add(~masks.rows[b1])
        pinned(sl, src, adm, np.full(len(sl), b1), np.full(len(sl), b0), -1)
    else:                                                 # lookup unit
        ci = where["lookup"][u]
        c = md.abst.cases[ci]
        o = _code(c.source)
        written = np.where(np.isin(cs.op2, (PUSH, REPLACE)), cs.y2, -1)
        match = (cs.q2 == c.p) & (cs.op2 == o)
        if c.source_symbol >= 0 or o not in (PUSH, REPLACE):
            match &= written == c.source_symbol
        # source_symbol −1 after a push/replace: any written code (the target checks it is a top)
        add(allc[~match], -1, -1, -1, False)
        mine = allc[match]
        if md.K > 1:
            add(mine, -2 - c.a, -1, -1, False)
        if len(mine):
            on, dead = _next_tops(md, ci)
            on_ids = np.array([masks.add(x) for x in on])
            off_ids = np.array([masks.add(~x & ~y) for x, y in zip(on, dead)])
            dead_m = np.stack(dead)
            on_m = np.stack(on)
            dt = cs.d[mine] + DELTA[cs.op2[mine]]
            if o in (PUSH, REPLACE):                      # the next top is the written code
                x = cs.y2[mine]
                live = ~dead_m[dt, x]
                add(mine[live], c.a, -1, -1, on_m[dt, x][live])
            elif o == POP and md.m < 2:                   # nothing below the top: ⊥ next
                live = ~dead_m[dt, md.G]
                add(mine[live], c.a, -1, -1, on_m[dt, md.G][live])
            else:                                         # noop / start: slot 0; pop: slot 1
                slot = np.full(len(mine), 1 if o == POP else 0)
                adm = np.where(slot == 0, cs.xm[mine],
                               np.where(1 < cs.d[mine], masks.GAMMA, masks.EMPTY))
                pinned(mine, slot, adm, on_ids[dt], off_ids[dt], c.a)
    if not parts:
        z = np.zeros(0, np.int64)
        return z, z, z, z, np.zeros(0, bool)
    return tuple(np.concatenate(col) for col in zip(*parts))


def _distinct_rows(feats: np.ndarray) -> np.ndarray:
    """Sorted indices of the first occurrence of each distinct row (exact float equality, by
    one multi-key sort)."""
    if len(feats) <= 1:
        return np.arange(len(feats))
    order = np.lexsort(feats.T[::-1])
    srt = feats[order]
    new = np.ones(len(feats), bool)
    new[1:] = (srt[1:] != srt[:-1]).any(1)
    return np.sort(order[new])


def _same_terms(md: _Model, masks: _Masks, cs: _Cases, rows: _Rows, u: int, G: int,
                case: np.ndarray, acls: np.ndarray, pin: np.ndarray, pid: np.ndarray,
                tgt: np.ndarray) -> np.ndarray:
    """Indices of one view per class of views with the same terms: the unit on (or "a unit
    unit u does not read"), the previous operation (when u reads a slot), the content set of
    every slot u reads, the symbol class and the target. Views of one class have the same
    enclosure (Lemma 2), so only one is computed. All views when the key would not fit 63 bits."""
    H = md.H
    rr = [u + g * H for g in range(G)]
    reads_unit = (rows.W[rr] != 0).any(0)
    slots = np.nonzero(rows.reads[rr].any(0))[0].tolist()
    key = np.where(reads_unit[cs.ell[case]], cs.ell[case], -1) + 1
    radix = H + 1
    parts = [(cs.o[case] if slots else np.zeros(len(case), np.int64), 5),
             (acls + md.K + 2, 2 * md.K + 3), (tgt.astype(np.int64), 2)]
    n_masks = len(masks.rows) + 1
    parts += [(np.where(pin == s, pid, cs.adm(masks, s, case)), n_masks) for s in slots]
    for col, size in parts:
        if radix * size >= 2**62:
            return np.arange(len(case))
        key = key * size + col
        radix *= size
    _, first = np.unique(key, return_index=True)
    return np.sort(first)


def _build_views(md: _Model, masks: _Masks, cs: _Cases, W: RecurrentBlocks,
                 progress: Progress | None) -> _Views:
    H = md.H
    G = 4 if md.lstm else 1
    rows = _Rows(md, masks, cs, W.weight_hh, W.bias, W.weight_ih, W.embedding, md.on, md.off)
    kinds = md.kinds
    where = {"lookup": {int(u): i for i, u in enumerate(np.asarray(md.abst.lookup))},
             "copy": {int(u): tuple(int(v) for v in idx)
                      for idx, u in np.ndenumerate(md.units)}}
    out: list[tuple] = []
    for u in range(H):
        case, acls, pin, pid, tgt = _unit_views(md, masks, cs, u, int(kinds[u]), where)
        if not len(case):
            continue
        rows.refresh()
        keep = _same_terms(md, masks, cs, rows, u, G, case, acls, pin, pid, tgt)
        case, acls, pin, pid, tgt = case[keep], acls[keep], pin[keep], pid[keep], tgt[keep]
        lo = np.empty((len(case), G))
        hi = np.empty((len(case), G))
        ab = np.empty((len(case), G))
        for g in range(G):
            r = u + g * H
            a, b = rows.centre(r, case, pin, pid)
            ia, ib, iab = rows.inputs(r, acls)
            lo[:, g], hi[:, g], ab[:, g] = a + ia, b + ib, iab
        first = _distinct_rows(np.concatenate([lo, hi, ab, tgt[:, None].astype(np.float64)], 1))
        out.append((np.full(len(first), u), lo[first], hi[first], ab[first], tgt[first],
                    case[first], acls[first], pin[first], pid[first]))
        if progress is not None and u % 256 == 0:
            notify(progress, "compact local views", u + 1, H)
    cols = [np.concatenate(col) for col in zip(*out)]
    return _Views(*cols)


# --- one pass at radii R ------------------------------------------------------------------------

@dataclass
class _Pass:
    dev: np.ndarray           # (S, 1)
    drift: np.ndarray         # (S,)
    settled: np.ndarray       # (S,)
    cases: int
    dcase: np.ndarray         # (N, 1 or 2)
    lo: np.ndarray
    hi: np.ndarray


def _rounding(W: np.ndarray, absbias: np.ndarray, R: np.ndarray, on: float, n_terms: int,
              dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray, float]:
    """(spread |W|·R, Σ|terms| but the input's, γ coefficient) of each row at radii R, for
    states within R of ±``on`` and biases of absolute sum ``absbias``."""
    u = iv.unit_roundoff(dtype)
    coef = iv.gamma(n_terms, u) + iv.gamma(2 * (n_terms + 8), _U64)
    absW = np.abs(W)
    return absW @ R, absW @ (abs(on) + R) + absbias, float(coef)


@dataclass
class _Terms:
    """Per row of an affine map: the number of nonzero terms (products of the state and input
    parts, and biases) and upper bounds on their magnitudes, for `_sum_error`."""

    n: np.ndarray             # (rows,) nonzero terms
    absW: np.ndarray          # (rows,) largest |w| over the state columns
    two_w: np.ndarray         # (rows,) whether the row has two or more state terms
    bias: np.ndarray          # (rows, 2) |biases|
    inmax: np.ndarray         # (rows,) largest |input product|
    two_in: np.ndarray        # (rows,) whether one symbol gives two or more input terms


def _terms(W: np.ndarray, biases: list[np.ndarray], Win: np.ndarray | None = None,
           emb: np.ndarray | None = None) -> _Terms:
    nz = W != 0
    n_w = nz.sum(1)
    bias = np.zeros((len(W), 2))
    for k, b in enumerate(biases):
        bias[:, k] = np.abs(b)
    if Win is not None and Win.size and emb is not None and emb.size:
        prods = (Win != 0).astype(np.int64) @ (np.asarray(emb) != 0).T.astype(np.int64)
        n_in = prods.max(1)
        inmax = (np.abs(Win).max(1) * np.abs(emb).max())
    else:
        n_in, inmax = np.zeros(len(W), np.int64), np.zeros(len(W))
    absW = np.abs(W).max(1, initial=0.0)
    return _Terms(n_w + n_in + (bias != 0).sum(1), absW, n_w >= 2, bias, inmax, n_in >= 2)


def _sum_error(tm: _Terms, rows: np.ndarray, tot: np.ndarray, zmag: np.ndarray, hmax: float,
               dtype: torch.dtype) -> np.ndarray:
    """Bound on |fl(Σ t) − Σ t| for the row sums ``rows`` of `_Terms` ``tm`` whose n nonzero
    terms t_j (states of magnitude ≤ ``hmax``) have Σ|t_j| ≤ ``tot`` and |Σ t_j| ≤ ``zmag``,
    evaluated in ``dtype`` in any order, blocked or fused (zero terms add exact zeros). Each
    product is rounded once (≤ u·Σ|t|); the n − 1 additions form a binary tree whose node ν
    rounds by ≤ u·|v_ν|, v_ν the node's computed value: its exact subset sum plus the errors
    below it, so the additions err by E ≤ u·F/(1 − (n − 1)u) with F ≥ Σ_ν |subset sum of ν|.
    Two bounds on F, the smaller is used (the classical γₙ·Σ|t| of Higham §3.1 charges every
    node Σ|t| instead):

    - every subset sum lies in [−N, P] (P, N the positive and negative parts, P + N = Σ|t|,
      P − N = Σ t), so F ≤ (n − 1)·(Σ|t| + |Σ t|)/2;
    - single out the term b of largest magnitude bound and let a bound every other term: the
      nodes holding b form a path, each of value Σ t minus the terms outside it, and every
      other node lies in a subtree of k terms joined to the path, of value ≤ k·a; with k_ℓ
      the terms joined at the path's ℓ-th node from b (Σ k_ℓ = n − 1, k_ℓ ≥ 1)
      F ≤ (n − 1)·|Σ t| + a·(Σ_ℓ k_ℓ·(ℓ − 1) + Σ_ℓ k_ℓ(k_ℓ + 1)/2) ≤ (n − 1)·|Σ t| +
      a·(n − 1)·n/2.

    The second is what saves rows of thousands of equal terms that cancel a large bias (γₙ
    charges every addition the full Σ|t|; a chain that starts at the bias loses it linearly).
    Rounded products enter both with a factor 1 + u; the bounds are evaluated in float64 and
    widened by its own rounding."""
    u = iv.unit_roundoff(dtype)
    n = tm.n[rows].astype(np.float64)
    m = np.maximum(n - 1, 0)
    if (m * u >= 0.5).any():
        return np.full(np.shape(tot), np.nan)
    hw = tm.absW[rows] * hmax
    cands = np.stack([tm.bias[rows, 0], tm.bias[rows, 1], tm.inmax[rows],
                      np.where(tm.two_in[rows], tm.inmax[rows], 0.0), hw,
                      np.where(tm.two_w[rows], hw, 0.0)], -1)
    a = np.sort(cands, -1)[..., -2] * (1 + u)                        # second largest bound
    tot_h = tot * (1 + u)
    z_h = zmag + u * tot
    F = np.minimum(m * (tot_h + z_h) / 2, m * z_h + a * m * n / 2)
    err = u * F / (1 - m * u) + u * tot + n * iv.tiny(dtype)
    return err * (1 + 2.0**-40) + iv.gamma(2 * (n + 8), _U64) * (tot + F)


def _pass(md: _Model, W: RecurrentBlocks, vs: _Views, R: np.ndarray, dtype: torch.dtype,
          kernel: str, exact_rows: np.ndarray | None = None, terms: _Terms | None = None
          ) -> _Pass:
    """Enclose one step of every view at radii R; ``exact_rows`` (Lemma 4): rows computed
    without rounding from states that are exactly their centres (no spread, no rounding).
    Rounding: the smaller of the classical γₙ bound (n all terms) and `_sum_error` on the
    row's nonzero terms (``terms``, `_terms` of the recurrence)."""
    H = md.H
    S = 2 * H if md.lstm else H
    Rh = R[:H, 0]
    n_terms = W.weight_hh.shape[1] + W.weight_ih.shape[1] + 2
    spread, absum, coef = _rounding(W.weight_hh, np.abs(W.bias_ih) + np.abs(W.bias_hh), Rh,
                                    md.on, n_terms, dtype)
    if terms is None:
        terms = _terms(W.weight_hh, [W.bias_ih, W.bias_hh], W.weight_ih, W.embedding)
    G = vs.zlo.shape[1]
    rows = vs.unit[:, None] + H * np.arange(G)[None, :]
    tot = absum[rows] + vs.absin
    zmag = np.maximum(np.abs(vs.zlo), np.abs(vs.zhi)) * (1 + iv.gamma(4, _U64)) + spread[rows]
    sharp = _sum_error(terms, rows, tot, zmag, abs(md.on) + float(Rh.max(initial=0.0)), dtype)
    rad = spread[rows] + np.fmin(coef * tot + n_terms * iv.tiny(dtype), sharp)
    rad = rad + iv.gamma(4, _U64) * np.maximum(np.abs(vs.zlo), np.abs(vs.zhi))
    rad = np.where(overflow_free(tot, coef, dtype), rad, np.nan)
    if exact_rows is not None:
        rad = np.where(exact_rows[rows], 0.0, rad)
    z = iv.Interval(vs.zlo, vs.zhi).widen(rad)
    drift = np.zeros(S)
    settled = np.zeros(S)
    if not md.lstm:
        out = iv.tanh(z[:, 0], dtype, kernel)
        T = np.where(vs.target, md.on, md.off)
        dcase = np.maximum(out.hi - T, T - out.lo)[:, None]
        lo_, hi_ = out.lo[:, None], out.hi[:, None]
        units = vs.unit[:, None]
    else:
        Th = np.where(vs.target, md.on, md.off)
        Tc = np.where(vs.target, md.con, md.coff)
        own = np.zeros(len(vs.unit))                  # own cell: anywhere in [−1 − R, 1 + R]
        rho = max(abs(md.con), abs(md.coff)) + R[H + vs.unit, 0]
        im = lstm_image(tuple(z[:, g] for g in range(4)), own, rho, Tc, R[H + vs.unit, 0],
                        dtype, kernel)
        np.maximum.at(settled, H + vs.unit, im.settled)
        np.maximum.at(drift, H + vs.unit, im.drift)
        dcase = np.stack([np.maximum(im.h.hi - Th, Th - im.h.lo), im.d_box], 1)
        lo_, hi_ = np.stack([im.h.lo, im.c.lo], 1), np.stack([im.h.hi, im.c.hi], 1)
        units = np.stack([vs.unit, H + vs.unit], 1)
    dev = np.zeros((S, 1))
    for col in range(dcase.shape[1]):
        np.maximum.at(dev[:, 0], units[:, col], dcase[:, col])
    return _Pass(dev, drift, settled, len(vs.unit), dcase, lo_, hi_)


# --- readout ------------------------------------------------------------------------------------

def _expected(md: _Model, cs: _Cases) -> np.ndarray:
    """The machine's output in each case: accept (bool) or the output index (−1: none)."""
    if md.tab.output == "symbol":
        return cs.out2
    if md.tab.empty_stack:
        return (cs.d + DELTA[cs.op2]) == 0
    return np.asarray(md.tab.accepting, bool)[cs.q2]


def _readout(md: _Model, masks: _Masks, cs: _Cases, W: RecurrentBlocks, R: np.ndarray,
             dtype: torch.dtype, exact_rows: np.ndarray | None = None
             ) -> tuple[FailingCase | None, float, int]:
    """Lemma 3: every logit on every case's box (``exact_rows``: logits computed without
    rounding from exact states, Lemma 4)."""
    H = md.H
    A, a = W.readout_weight, W.readout_bias
    rows = _Rows(md, masks, cs, A, a, None, None, md.on, md.off)
    n = A.shape[1] + 1
    spread, absum, coef = _rounding(A, np.abs(a), R[:H, 0], md.on, n, dtype)
    terms = _terms(A, [a])
    hmax = abs(md.on) + float(R[:H, 0].max(initial=0.0))
    allc = np.arange(len(cs))
    none = np.full(len(cs), -1)
    O = A.shape[0]
    lo = np.empty((len(cs), O))
    hi = np.empty((len(cs), O))
    for r in range(O):
        zl, zh = rows.centre(r, allc, none, none)
        zmag = np.maximum(np.abs(zl), np.abs(zh)) * (1 + iv.gamma(4, _U64)) + spread[r]
        sharp = _sum_error(terms, np.full(len(zl), r), np.full(len(zl), absum[r]), zmag, hmax,
                           dtype)
        rad = spread[r] + np.fmin(coef * absum[r] + n * iv.tiny(dtype), sharp)
        rad = rad + iv.gamma(4, _U64) * np.maximum(np.abs(zl), np.abs(zh))
        if not overflow_free(absum[r], coef, dtype):
            rad = np.nan
        if exact_rows is not None and exact_rows[r]:
            rad = 0.0
        lo[:, r], hi[:, r] = zl - rad, zh + rad
    exp = _expected(md, cs)
    if md.tab.output == "symbol":
        y = np.where(exp < 0, O - 1, exp)
        others = hi.copy()
        others[allc, y] = -np.inf
        slack = lo[allc, y] - others.max(1)
        row, req = y, lambda i: (float(others[i].max()), math.inf)
    else:
        slack = np.where(exp, lo[:, 0], -hi[:, 0])
        row = np.zeros(len(cs), np.int64)
        req = lambda i: (0.0, math.inf) if exp[i] else (-math.inf, 0.0)
    worst = nan_min(float(slack.min()), math.inf)
    if not worst > 0:
        i = int(np.argmax(~(slack > 0)))
        r = int(row[i])
        return (FailingCase("readout", _describe(md, masks, cs, i), None, r, f"logit {r}",
                            (float(lo[i, r]), float(hi[i, r])), req(i)), worst, len(cs))
    return None, worst, len(cs)


def _describe(md: _Model, masks: _Masks, cs: _Cases, i: int) -> str:
    if cs.lookup[i] < 0:
        return "the start configuration"
    tops = np.nonzero(masks.rows[cs.xm[i]])[0]
    shown = ", ".join(md.stack_name(int(x)) for x in tops[:4]) + (" …" if len(tops) > 4 else "")
    inner = md.machine.machine
    return (f"{md.case_label(int(cs.lookup[i]))} with stack depth {cs.d[i]} and top in {{{shown}}}"
            f" before the step, then state {inner.states[cs.q2[i]]!r} after {OPS[cs.op2[i]]}")


# --- exact rows (Lemma 4) ---------------------------------------------------------------------------

def grid_rows(blocks: list[np.ndarray], dtype: torch.dtype) -> np.ndarray:
    """Per row of the column-stacked ``blocks`` (weights and biases of one affine map): whether
    the module computes it without rounding when every state it reads is ±1 and the input a
    code in {0, ±1}: all entries are multiples of one 2^−k and Σ|entries|·2^k < 2^p (p the
    dtype's significand bits), so every product and partial sum, in any order of summation
    and with or without fused multiply-adds, is a representable multiple of 2^−k."""
    M = np.concatenate([np.asarray(b, np.float64).reshape(len(blocks[0]), -1) for b in blocks], 1)
    vals = np.unique(np.abs(M[np.isfinite(M) & (M != 0)]))
    kv = np.full(len(vals), 64, np.int64)
    for k in range(61):
        sc = vals * 2.0**k
        hit = (sc == np.round(sc)) & (kv == 64)
        kv[hit] = k
    kent = np.zeros(M.shape, np.int64)
    nz = np.isfinite(M) & (M != 0)
    kent[nz] = kv[np.searchsorted(vals, np.abs(M[nz]))]
    kent[~np.isfinite(M)] = 64
    k = kent.max(1)
    p = 1 - round(math.log2(torch.finfo(dtype).eps))
    total = np.abs(np.where(np.isfinite(M), M, np.inf)).sum(1)
    return (k < 61) & (total * 2.0**np.minimum(k, 60) < 2.0**p)


# --- the family -----------------------------------------------------------------------------------

class Compact:
    """The local-view family of one compact network: a `pdanet.verify.certify.induction.BoxFamily`
    with radii per unit (one abstract state)."""

    states = 1
    initial = 0
    initial_config = "the start configuration (state q0, empty stack)"
    growth = (1.0, 2.0, 3.0)

    def __init__(self, md: _Model, W: RecurrentBlocks, dtype: torch.dtype,
                 progress: Progress | None):
        self.md, self.W, self.dtype, self.progress = md, W, dtype, progress
        self.masks = _Masks(md.G)
        self.cs = _cases(md, self.masks)
        self.vs = _build_views(md, self.masks, self.cs, W, progress)
        H = md.H
        E0 = np.full(H, md.off)
        E0[md.abst.start] = md.on
        if md.lstm:
            C0 = np.full(H, md.coff)
            C0[md.abst.start] = md.con
            self.s0, self.E0 = np.concatenate([W.h0, W.c0]), np.concatenate([E0, C0])
        else:
            self.s0, self.E0 = W.h0, E0
        self.cells = np.zeros(len(self.E0), bool)
        self.cells[H:] = md.lstm
        self.terms = _terms(W.weight_hh, [W.bias_ih, W.bias_hh], W.weight_ih, W.embedding)
        self.exact: np.ndarray | None = None
        emb = np.asarray(W.embedding)
        if not md.lstm and dtype == torch.float32 and np.isin(emb, (-1.0, 0.0, 1.0)).all():
            self.grid = grid_rows([W.weight_hh, W.weight_ih, W.bias_ih, W.bias_hh], dtype)
            self.grid_out = grid_rows([W.readout_weight, W.readout_bias], dtype)
            self.reads = W.weight_hh != 0
        else:
            self.grid = None

    def label(self, j: int) -> str:
        return self.md.label(j)

    def _exact_set(self, R: np.ndarray, kernel: str) -> np.ndarray | None:
        """Lemma 4's exact units X (greatest fixed point): h0 is exactly its centre on X, and
        every view of a unit of X, whose row reads only units of X and is computed without
        rounding, has an image that the checked saturation of the kernel makes exactly its
        target. Then h_t = E(σ_t) on X at every step (by induction), and those rows and the
        readout rows reading only X carry neither spread nor rounding."""
        if self.grid is None or kernel != "saturating":
            return None
        X = self.s0 == self.E0
        while True:
            rows = self.grid & ~(self.reads[:, ~X].any(1))
            ps = _pass(self.md, self.W, self.vs, R, self.dtype, kernel, rows, self.terms)
            T = np.where(self.vs.target, self.md.on, self.md.off)
            point = (ps.lo[:, 0] == ps.hi[:, 0]) & (ps.lo[:, 0] == T) & rows[self.vs.unit]
            ok = X.copy()
            np.logical_and.at(ok, self.vs.unit, point)
            if (ok == X).all():
                return X
            X = ok

    def step(self, R: np.ndarray, kernel: str, stage: str) -> _Pass:
        self.exact = self._exact_set(R, kernel)
        rows = None if self.exact is None else (self.grid & ~(self.reads[:, ~self.exact].any(1)))
        ps = _pass(self.md, self.W, self.vs, R, self.dtype, kernel, rows, self.terms)
        notify(self.progress, f"compact {stage}", 1, 1)
        return ps

    def readout(self, R: np.ndarray) -> tuple[FailingCase | None, float, int]:
        rows = None
        if self.exact is not None:
            A = self.W.readout_weight
            rows = self.grid_out & ~((A[:, ~self.exact] != 0).any(1))
        return _readout(self.md, self.masks, self.cs, self.W, R, self.dtype, rows)

    def failing(self, kind: str, j: int, ps: _Pass, R: np.ndarray) -> FailingCase:
        """The local view where unit j (≥ H: its cell) exceeds its radius most."""
        md, vs = self.md, self.vs
        H = md.H
        v, col = (j - H, 1) if j >= H else (j, 0)
        mine = np.nonzero(vs.unit == v)[0]
        if not len(mine):
            return FailingCase(kind, "every configuration", None, j, md.label(j),
                               (math.nan, math.nan), (math.nan, math.nan))
        excess = ps.dcase[mine, col] - R[j, 0]
        k = int(mine[np.nanargmax(np.where(np.isnan(excess), np.inf, excess))])
        cfg = _describe(md, self.masks, self.cs, int(vs.case[k]))
        if vs.pin[k] >= 0:
            held = np.nonzero(self.masks.rows[vs.pid[k]])[0]
            cfg += (f"; slot {vs.pin[k] + 1} holds one of "
                    + ", ".join(md.stack_name(int(x)) for x in held[:4])
                    + (" …" if len(held) > 4 else ""))
        syms = md.machine.alphabet.symbols
        a = int(vs.acls[k])
        sym = (None if a == -1 else repr(syms[a]) if a >= 0 else f"any symbol but {syms[-2 - a]!r}")
        tgt = (md.on if vs.target[k] else md.off) if col == 0 else \
            (md.con if vs.target[k] else md.coff)
        r = float(R[j, 0])
        return FailingCase(kind, cfg, sym, j, md.label(j), (float(ps.lo[k, col]),
                                                              float(ps.hi[k, col])),
                           (tgt - r, tgt + r))


def config_bound(machine: BoundedPDA) -> int:
    """|Q|·Σ_{i≤m}|Γ|ⁱ: an upper bound on the configurations a compact certificate covers."""
    inner = machine.machine
    G = len(inner.stack_alphabet)
    return len(inner.states) * sum(G**i for i in range(machine.m + 1))


def uses_structural(machine: Machine, net: CompiledNetwork, max_configs: int) -> bool:
    """Compact networks of machines with more (configuration, symbol) cases than
    ``max_configs`` (by `config_bound`) are certified by local views, never by enumeration."""
    return (isinstance(machine, BoundedPDA) and isinstance(net.abstraction, CompactSlots)
            and config_bound(machine) * len(machine.alphabet) > max_configs)


def _structural(machine: BoundedPDA, net: CompiledNetwork, dtype: torch.dtype | None,
                kernel: str, eps: float | None, progress: Progress | None, retry: bool
                ) -> Certificate:
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    run = replace(run, configs=config_bound(machine))
    md = _model(machine, run.net)
    bad = _coverage(md)
    if bad is not None:
        return run.refused(bad, "the lookup units do not stand for the machine's configurations "
                           "one to one")
    fam = Compact(md, run.net.module.blocks(numpy=True), run.dtype, progress)
    notify(progress, "compact cases", len(fam.vs.unit), len(fam.vs.unit))
    run = replace(run, notes=(LIVE_NOTE, (
        f"compact: {len(fam.cs):,} cases (lookup unit, previous operation, tops, depth) and "
        f"{len(fam.vs.unit):,} merged local unit views cover all "
        f"{run.configs:,} configurations; see pdanet.verify.certify.compact")))
    return prove(fam, run, eps, retry=retry)


def certify_structural(machine: BoundedPDA, net: CompiledNetwork,
                       dtype: torch.dtype | None = None, kernel: str = "ulp",
                       eps: float | None = None, progress: Progress | None = None) -> Certificate:
    """Certify a compact network (Elman, or the LSTM carrying saturated Elman units) for every
    string whose prefixes are live, by local views (module docstring), under the kernel model
    ``kernel`` alone, whatever the number of configurations.

    Same `Certificate` as `pdanet.certify`; ``configs`` is |Q|·Σ_{i≤m}|Γ|ⁱ (covered, not
    visited) and ``cases`` the number of merged local views plus readout cases. Arguments are
    validated as in `certify` (InputError); a network compiled for another machine, or one
    without a `CompactSlots` layout, raises CertificationError; a non-finite weight, or a NaN
    met on the way, gives a NOT CERTIFIED certificate that names it."""
    check_arguments(eps=eps, kernel=kernel, dtype=dtype, progress=progress)
    if not isinstance(machine, BoundedPDA):
        raise CertificationError(f"the compact certificate is for a BoundedPDA, got "
                                 f"{type(machine).__name__}")
    check_pair(machine, net)
    return _structural(machine, net, dtype, kernel, eps, progress, retry=False)


def certify(machine: Machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """A `CompactSlots` network: by local views when `uses_structural`, else by the box family
    (`pdanet.verify.certify.box`); retried under the saturating kernel model when the ulp
    model proves less than every length. Arguments are checked by `pdanet.verify.certify.certify`
    (and here, when called directly)."""
    check_arguments(eps=eps, chunk=chunk, max_configs=max_configs, kernel=kernel, dtype=dtype,
                    progress=progress)
    if not uses_structural(machine, net, max_configs):
        return box.certify(machine, net, dtype=dtype, eps=eps, max_configs=max_configs,
                           chunk=chunk, kernel=kernel, progress=progress)
    check_pair(machine, net)
    return _structural(machine, net, dtype, kernel, eps, progress, retry=True)


__all__ = ["Compact", "certify", "certify_structural", "config_bound", "grid_rows",
           "uses_structural"]
