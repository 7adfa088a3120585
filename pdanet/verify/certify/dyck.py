"""All-lengths certificates for the Dyck-(k, m) stack networks (`DyckSlots`) without enumerating
configurations.

The box family (`pdanet.verify.certify.box`) explores every (configuration, network state) node:
Σ kⁱ of them, ≈ 10¹⁵ for Dyck-(100000, 3). This module proves the same statement — every state
within its box is mapped into the box of the successor configuration, and every box reads out the
machine's output — by checking each *unit* on its *local view* instead of each global
configuration; `certify` uses it when the machine has more than ``max_configs`` (configuration,
symbol) cases (`uses_structural`), and the box family below that.

The semantic encoding E (the box centres) is derived from the machine, not from the weights: the
network's abstraction (`DyckSlots`: ``kind``, ``units``, ``signs``, ``code``) says which unit
holds which coordinate of which stack slot, and its slot code gives φ_t ∈ {−1, 0, 1}^d for bracket type t. A configuration is (depth δ, slot
contents, last operation ∈ {none, push, pop}); unit u of slot s, coordinate j has the ideal value
E_u = a_u(δ, last)·φ_{t_s}[j] + c_u(δ, last) when slot s is filled (s < δ) and e_u(δ, last) when
it is empty (affine in the bit; see `_Model.coef`). Elman (push/pop copies): g = 2·sign_j·φ[j] − 1
in the copy the last operation wrote, −1 elsewhere. LSTM: c = φ; h = tanh(φ) = tanh(1)·φ in the
top slot, 0 elsewhere.

Lemma 1 (locality). The enclosure of unit u's next value depends on the global case (c, a) only
through the centres of the units in its fan-in N(u) (nonzeros of its rows of W_hh), its own
cell (LSTM), the input term W_ih·emb[a] of its rows, and its target E_u(δ(c, a)). Proof: the
interval pre-activation is W·E(c) ± (|W|·R + rounding), with R and the rounding bound the same
for every case; W·E(c) = Σ_slots W[·, slot]·E_slot.

Lemma 2 (covering). The *local view* of u is (δ, last, kind of a; the coordinate-j bits of the
"pinned" slots: u's own slot and the slot its new value is copied from; φ_a[j] for an open a).
Its target is a function of the local view (the machine's step moves slot contents by one
position, writes φ_a, or clears a slot: `_Model.source`). For each local view the certifier
encloses Σ_slots W[ρ, slot]·E_slot over *every* assignment of contents consistent with it: each
slot independently (in Dyck-(k, m) the contents of the δ filled slots range over all of [k]^δ, a
product), a pinned slot over the types t with φ_t[j] equal to its bit, another filled slot over
all k types, an empty slot at its constant. So every reachable (configuration, symbol) projects
onto an enumerated local view whose pre-activation range contains its own (the joint values are
contained in the product), and one check per local view covers them all. Ranges over a set of
types are exact (`_Ranges`: the distinct projections of the codes onto the bits a row reads, or
all k codes).

Lemma 3 (readout). A logit row is an affine function of E, hence a sum over slots of functions of
one slot's content (plus a constant and a radius that do not depend on the case). For each depth
its extreme over all stacks is the sum of per-slot extremes. For the close logit c with top type
t: positive at t = c is evaluated exactly; for t ≠ c the row is affine in the input bits
b = inputs(t) ∈ {0, 1}^q (checked: the code's input words are distinct binary vectors), and
max over b ≠ inputs(c) of w·b is the best vertex, or — when the best vertex is inputs(c) itself —
the best vertex less min_i |w_i| (the second-best vertex differs from the best in one bit): O(q)
per logit, no k² work. Other rows use hypercube bounds, refined to exact ranges where needed.

Radii are per unit *and* per abstract state (depth, last operation) — a box family indexed by a
function of the configuration is as good an induction hypothesis as a uniform one, and it lets
an LSTM h unit be wide only while its slot is the top. The fixed point of the radii and the
cells' drift bound are `pdanet.verify.certify.induction`'s (cells at radius ε; other units ≤ ε,
LSTM h units ≤ 2ε); this module supplies the local-view enclosure and the readout.

Lemma 4 (exact rows). A pre-activation row with no recurrent weight, integer weights, biases and
input codes, and Σ|terms| < 2^p (p significand bits) is computed without rounding in any order of
summation (every partial sum is a representable integer); its rounding bound is 0.

Interval arithmetic is `pdanet.verify.intervals` in the module's dtype; every other rounding
bound is as in the box family (γₙ·Σ|terms|, with the input term's Σ|terms| taken over the case's
symbols).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from pdanet.automata.base import Machine
from pdanet.automata.bounded import DyckConfig, DyckKM
from pdanet.constructions.abstraction import DyckSlots
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.modules import RecurrentBlocks
from pdanet.errors import CertificationError
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
NONE, PUSH, POP = 0, 1, 2
_LAST = ("start", "push", "pop")
TANH1 = math.tanh(1.0)
HIDDEN_CAP = 2.0   # LSTM: h radii may grow to 2ε (h = o·tanh(c) moves as much as a cell at φ = 0)


# --- the semantic model ---------------------------------------------------------------------------

@dataclass
class _Model:
    """The construction's state, described from the machine's side (layout + slot code)."""

    machine: DyckKM
    kind: str                 # "push_pop" (Elman) or "cell_stack" (LSTM)
    code: object
    H: int
    slot: np.ndarray          # (H,) slot of each hidden unit (Elman: 0 = top; LSTM: 0 = bottom)
    coord: np.ndarray         # (H,) code coordinate j
    role: np.ndarray          # (H,) Elman: 0 = P (push copy), 1 = Q (pop copy); LSTM: 0
    signs: np.ndarray         # (d,)
    phi: np.ndarray           # (k, d) φ_t, int8
    bits: np.ndarray          # (k, q+1) [inputs(t); 1], float64
    Phi: np.ndarray           # (d, q+1) φ = Phi·[inputs; 1]

    @property
    def k(self) -> int:
        return self.machine.k

    @property
    def m(self) -> int:
        return self.machine.m

    @property
    def q(self) -> int:
        return self.Phi.shape[1] - 1

    def states(self) -> list[tuple[int, int]]:
        """Reachable (depth, last operation): the start, after a push (δ ≥ 1), after a pop
        (δ ≤ m − 1). The LSTM's encoding ignores the last operation."""
        if self.kind == "cell_stack":
            return [(d, NONE) for d in range(self.m + 1)]
        return ([(0, NONE)] + [(d, PUSH) for d in range(1, self.m + 1)]
                + [(d, POP) for d in range(self.m)])

    def step(self, depth: int, last: int, push: bool) -> tuple[int, int]:
        nl = NONE if self.kind == "cell_stack" else (PUSH if push else POP)
        return depth + (1 if push else -1), nl

    def top(self, depth: int) -> int:
        return 0 if self.kind == "push_pop" else depth - 1

    def source(self, s: int, depth: int, push: bool) -> tuple[str, int]:
        """Where slot s's content comes from after a push/pop at this depth (machine semantics):
        ("slot", s0), ("x", -1) the pushed symbol, or ("empty", -1)."""
        if self.kind == "push_pop":                      # top first: contents shift
            if push:
                return ("x", -1) if s == 0 else ("slot", s - 1)
            return ("slot", s + 1) if s + 1 < self.m else ("empty", -1)
        if push:                                         # bottom first: written in place
            return ("x", -1) if s == depth else ("slot", s)
        return ("empty", -1) if s == depth - 1 else ("slot", s)

    def coef(self, depth: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, c, e) over hidden units: centre a·φ[j] + c in a filled slot, e in an empty one;
        for the LSTM also the cells (indices H..2H−1): c = φ."""
        H = self.H
        if self.kind == "push_pop":
            wrote = np.where(self.role == 0, last == PUSH, last == POP)
            a = np.where(wrote, 2.0 * self.signs[self.coord], 0.0)
            return a, -np.ones(H), -np.ones(H)
        a = np.concatenate([np.where(self.slot == depth - 1, TANH1, 0.0), np.ones(H)])
        z = np.zeros(2 * H)
        return a, z, z.copy()

    def label(self, u: int) -> str:
        H = self.H
        cell = u >= H
        v = u - H if cell else u
        s, j = int(self.slot[v]), int(self.coord[v])
        if self.kind == "push_pop":
            return f"{'PQ'[self.role[v]]}[slot {s + 1} from top, coordinate {j}]"
        return f"{'c' if cell else 'h'}[slot {s + 1} from bottom, coordinate {j}]"

    def witness(self, depth: int, last: int, pins: dict[int, int], j: int) -> str:
        """A concrete configuration with this local view (pinned slots get a type with the
        given φ[j]; others type 0), with a string reaching it."""
        slots = [0] * depth
        for s, b in pins.items():
            if s < depth:
                slots[s] = int(np.nonzero(self.phi[:, j] == b)[0][0])
        stack = tuple(reversed(slots)) if self.kind == "push_pop" else tuple(slots)
        mach = self.machine
        string = [mach.opens[t] for t in stack]
        if last == POP:
            string += [mach.opens[0], mach.closes[0]]
        return f"{DyckConfig(stack)!r} (reached by {mach.alphabet.format(tuple(string))!r})"


def _model(machine: DyckKM, net: CompiledNetwork) -> _Model:
    """The semantic model from the network's `DyckSlots` abstraction and its slot code."""
    lay = net.abstraction
    if not isinstance(lay, DyckSlots) or lay.kind not in ("push_pop", "cell_stack"):
        raise CertificationError(
            f"{net.construction} has no stack layout (a DyckSlots abstraction); use pdanet.certify")
    code = lay.code
    units = np.asarray(lay.units)
    H = net.module.blocks(numpy=True).h0.shape[0]
    if units.size != H or sorted(units.ravel().tolist()) != list(range(H)):
        raise CertificationError("the DyckSlots units must list every hidden unit once")
    slot, coord, role = (np.zeros(H, np.int64) for _ in range(3))
    for idx in np.ndindex(units.shape):
        u = units[idx]
        if lay.kind == "push_pop":
            role[u], slot[u], coord[u] = idx
        else:
            slot[u], coord[u] = idx
    ids = np.arange(machine.k)
    inputs = np.asarray(code.inputs(ids), np.int64)
    if not np.isin(inputs, (0, 1)).all():
        raise CertificationError("structural readout needs binary input words")
    if len(np.unique(inputs, axis=0)) != machine.k:
        raise CertificationError("the code gives two bracket types the same input word")
    bits = np.concatenate([inputs, np.ones((machine.k, 1), np.int64)], 1).astype(np.float64)
    phi = np.asarray(code.phi(ids), np.int8)
    signs = np.asarray(lay.signs if lay.signs is not None else np.ones(code.d), np.float64)
    return _Model(machine, lay.kind, code, H, slot, coord, role, signs, phi, bits,
                  np.asarray(code.Phi, np.float64))


# --- exact ranges of affine functions of one slot's content -----------------------------------------

class _Ranges:
    """min/max over bracket types t (optionally those with φ_t[j] = b) of w·[inputs(t); 1]."""

    def __init__(self, model: _Model):
        self.md = model
        self.cache: dict = {}
        self.proj: dict = {}
        self.full: dict = {}

    def _projection(self, supp: tuple[int, ...]) -> np.ndarray:
        if supp not in self.proj:
            b = self.md.bits[:, list(supp)].astype(np.int64)
            keys = np.unique(b @ (1 << np.arange(len(supp), dtype=np.int64)))
            self.proj[supp] = ((keys[:, None] >> np.arange(len(supp))) & 1).astype(np.float64)
        return self.proj[supp]

    def __call__(self, w: np.ndarray, j: int | None = None, b: int | None = None
                 ) -> tuple[float, float] | None:
        key = (w.tobytes(), j, b)
        if key in self.cache:
            return self.cache[key]
        q, Phi = self.md.q, self.md.Phi
        supp = set(np.nonzero(w[:q])[0].tolist())
        if j is not None:
            supp |= set(np.nonzero(Phi[j, :q])[0].tolist())
        supp_t = tuple(sorted(supp))
        if len(supp_t) <= 16:
            P = self._projection(supp_t)
            vals = P @ w[list(supp_t)] + w[q]
            if j is not None:
                phij = P @ Phi[j, list(supp_t)] + Phi[j, q]
                vals = vals[phij == b]
        else:
            wk = w.tobytes()
            if wk not in self.full:
                self.full[wk] = self.md.bits @ w
            vals = self.full[wk]
            if j is not None:
                vals = vals[self.md.phi[:, j] == b]
        out = (float(vals.min()), float(vals.max())) if len(vals) else None
        self.cache[key] = out
        return out


# --- local cases ----------------------------------------------------------------------------------

@dataclass
class _Cases:
    """One row per local case: the local unit, the pre-activation centre range of each of its
    rows, its own cell centre (LSTM), its target(s), and a description."""

    unit: np.ndarray          # (N,) hidden unit index v
    state: np.ndarray         # (N,) index of (depth, last) in `_Model.states`
    succ: np.ndarray          # (N,) index of the successor's (depth, last)
    zlo: np.ndarray           # (N, G) G = 1 (Elman) or 4 (LSTM gates i, f, g, o)
    zhi: np.ndarray
    absin: np.ndarray         # (N, G) max over the case's symbols of |W_ih[row]|·|emb[x]|
    own: np.ndarray           # (N,) own cell centre (LSTM)
    target: np.ndarray        # (N, 1 or 2) target of h (and c)
    views: list               # (depth, last, push, pins, bx)


def _build_cases(md: _Model, W: RecurrentBlocks, rng: _Ranges) -> _Cases:
    H = md.H
    lstm = md.kind == "cell_stack"
    Whh, Wih, bias, emb = W.weight_hh, W.weight_ih, W.bias, W.embedding
    k = md.k
    G = 4 if lstm else 1
    rows_of = (lambda v: [v + g * H for g in range(4)]) if lstm else (lambda v: [v])
    # input term: exact ranges over opens conditioned on φ_x[j], and over all closes
    in_open: dict = {}
    uniq_ih, inv_ih = np.unique(Wih, axis=0, return_inverse=True)
    inv_ih = np.asarray(inv_ih).reshape(-1)
    open_vals = np.ascontiguousarray((emb[:k] @ uniq_ih.T).T)          # (#unique rows, k)
    open_abs = np.ascontiguousarray((np.abs(emb[:k]) @ np.abs(uniq_ih).T).T)
    sel_of: dict = {}                                                   # (j, b) -> (mask, any)
    close_vals = emb[k:2 * k] @ uniq_ih.T
    close_rng = np.stack([close_vals.min(0), close_vals.max(0),
                          (np.abs(emb[k:2 * k]) @ np.abs(uniq_ih).T).max(0)], 1)

    def input_open(row: int, j: int, b: int) -> tuple[float, float, float] | None:
        key = (inv_ih[row], j, b)
        if key not in in_open:
            if (j, b) not in sel_of:
                mask = md.phi[:, j] == b
                sel_of[j, b] = (mask, bool(mask.any()))
            sel, nonempty = sel_of[j, b]
            v, va = open_vals[inv_ih[row]], open_abs[inv_ih[row]]       # contiguous rows
            in_open[key] = ((float(np.min(v, where=sel, initial=np.inf)),
                             float(np.max(v, where=sel, initial=-np.inf)),
                             float(np.max(va, where=sel, initial=-np.inf))) if nonempty else None)
        return in_open[key]

    bitvals = [np.unique(md.phi[:, j]).tolist() for j in range(md.code.d)]
    units_of = [np.nonzero(md.slot == s)[0] for s in range(md.m)]
    unit_l, zlo_l, zhi_l, abs_l, own_l, tgt_l, views = [], [], [], [], [], [], []
    st_l, su_l = [], []
    index = {sv: i for i, sv in enumerate(md.states())}
    for depth, last in md.states():
        a, c, e = md.coef(depth, last)
        # per slot: rows of W_hh composed with the centre map, in input-bit space
        V, const = [], np.zeros(Whh.shape[0])
        for s in range(md.m):
            us = units_of[s]
            Wb = Whh[:, us]
            if s < depth:
                V.append((Wb * a[us]) @ md.Phi[md.coord[us]])
                V[-1][:, -1] += Wb @ c[us]
            else:
                V.append(None)
                const += Wb @ e[us]
        for push in (True, False):
            if (push and depth >= md.m) or (not push and depth == 0):
                continue
            d2, l2 = md.step(depth, last, push)
            a2, c2, e2 = md.coef(d2, l2)
            for v in range(H):
                j, s = int(md.coord[v]), int(md.slot[v])
                kind, s0 = md.source(s, depth, push)
                pinned = sorted({s} | ({s0} if kind == "slot" else set()))
                pinned = [p for p in pinned if p < depth]
                rows = rows_of(v)
                opts = [bitvals[j]] * len(pinned) + [bitvals[j] if push else [None]]
                for combo in itertools.product(*opts):
                    pins = dict(zip(pinned, combo[:-1]))
                    bx = combo[-1]
                    lo = np.empty(G)
                    hi = np.empty(G)
                    absin = np.empty(G)
                    ok = True
                    for g, r in enumerate(rows):
                        zl = zh = bias[r] + const[r]
                        for sl in range(depth):
                            w = V[sl][r]
                            if not w.any():
                                continue
                            rg = rng(w, j, pins[sl]) if sl in pins else rng(w)
                            if rg is None:
                                ok = False
                                break
                            zl, zh = zl + rg[0], zh + rg[1]
                        if not ok:
                            break
                        if push:
                            rg = input_open(r, j, bx)
                            if rg is None:
                                ok = False
                                break
                        else:
                            rg = close_rng[inv_ih[r]]
                        lo[g], hi[g], absin[g] = zl + rg[0], zh + rg[1], rg[2]
                    if not ok:
                        continue
                    # target: the machine's successor, read through the same encoding
                    if kind == "x":
                        bit = bx
                    elif kind == "slot" and s0 < depth:
                        bit = pins[s0]
                    else:
                        bit = None
                    filled2 = bit is not None
                    th = a2[v] * bit + c2[v] if filled2 else e2[v]
                    if lstm:
                        tc = a2[H + v] * bit + c2[H + v] if filled2 else e2[H + v]
                        own = a[H + v] * pins[s] + c[H + v] if s in pins else e[H + v]
                        tgt_l.append((th, tc))
                    else:
                        own = 0.0
                        tgt_l.append((th,))
                    unit_l.append(v)
                    zlo_l.append(lo)
                    zhi_l.append(hi)
                    abs_l.append(absin)
                    own_l.append(own)
                    views.append((depth, last, push, pins, bx))
                    st_l.append(index[(depth, last)])
                    su_l.append(index[(d2, l2)])
    return _Cases(np.array(unit_l), np.array(st_l), np.array(su_l), np.array(zlo_l), np.array(zhi_l), np.array(abs_l),
                  np.array(own_l),
                  np.array(tgt_l), views)


# --- one pass at radii R --------------------------------------------------------------------------

@dataclass
class _Pass:
    dev: np.ndarray           # (S, states) worst deviation from the target, by successor state
    drift: np.ndarray         # (S,) cells: worst point-image deviation where the box is not kept
    settled: np.ndarray       # (S,) cells: worst box-image deviation where the box is kept
    cases: int                # local unit cases enclosed
    dcase: np.ndarray         # (N, 1 or 2) deviation of each case's image (h, and c)
    lo: np.ndarray            # (N, 1 or 2) the image intervals
    hi: np.ndarray


def _hmax(md: _Model, R: np.ndarray) -> np.ndarray:
    """max |h| over the boxes of each abstract state (H, states): centre magnitude + radius."""
    H = md.H
    vals = np.array([-1.0, 0.0, 1.0])
    present = np.stack([(md.phi == b).any(0) for b in (-1, 0, 1)], 1)[md.coord]   # (H, 3)
    out = np.empty((H, R.shape[1]))
    for i, (depth, last) in enumerate(md.states()):
        a, c, e = md.coef(depth, last)
        cand = np.where(present, np.abs(a[:H, None] * vals + c[:H, None]), 0.0).max(1)
        out[:, i] = np.where(md.slot < depth, cand, np.abs(e[:H])) + R[:H, i]
    return out


def _exact_rows(W: RecurrentBlocks, dtype: torch.dtype) -> np.ndarray:
    """Rows whose pre-activation the module computes exactly: no recurrent weight (the h terms
    are exact zeros), and integer weights, biases and input codes whose absolute sum stays below
    2^p (p = the dtype's significand bits), so every partial sum, in any order, is an integer
    that the dtype represents — no rounding at all."""
    Whh, Wih, bi, bh, emb = W.weight_hh, W.weight_ih, W.bias_ih, W.bias_hh, W.embedding
    integral = lambda a: np.all(a == np.round(a), axis=-1)
    p = 1 - round(math.log2(torch.finfo(dtype).eps))
    total = np.abs(Wih) @ np.abs(emb).max(0) + np.abs(bi) + np.abs(bh)
    return ((Whh == 0).all(1) & integral(Wih) & integral(bi[:, None]) & integral(bh[:, None])
            & bool(integral(emb.ravel())) & (total < 2.0**p))


def _pass(md: _Model, W: RecurrentBlocks, cs: _Cases, R: np.ndarray, dtype: torch.dtype,
          kernel: str) -> _Pass:
    """Enclose one step of every local case with the boxes of radii R (S, states)."""
    H = md.H
    lstm = md.kind == "cell_stack"
    S = 2 * H if lstm else H
    u = iv.unit_roundoff(dtype)
    Whh, Wih, b = W.weight_hh, W.weight_ih, W.bias
    n_terms = Whh.shape[1] + Wih.shape[1] + 2
    coef = iv.gamma(n_terms, u) + iv.gamma(2 * (n_terms + md.q + 4), _U64)
    absum = np.abs(Whh) @ _hmax(md, R) + np.abs(b)[:, None]        # (rows, states)
    spread = np.abs(Whh) @ R[:H]                                    # (rows, states)
    G = cs.zlo.shape[1]
    rows = cs.unit[:, None] + H * np.arange(G)[None, :]
    st = cs.state[:, None]
    rad = spread[rows, st] + coef * (absum[rows, st] + cs.absin) + n_terms * iv.tiny(dtype)
    rad = rad + iv.gamma(2, _U64) * np.maximum(np.abs(cs.zlo), np.abs(cs.zhi))
    rad = np.where(_exact_rows(W, dtype)[rows], 0.0, rad)
    # a row whose partial sums could overflow the dtype has no rounding bound: NaN fails
    rad = np.where(overflow_free(absum[rows, st] + cs.absin, coef, dtype), rad, np.nan)
    z = iv.Interval(cs.zlo, cs.zhi).widen(rad)
    drift = np.zeros(S)
    settled = np.zeros(S)
    if not lstm:
        out = iv.tanh(z[:, 0], dtype, kernel)
        T = cs.target[:, 0]
        dcase = np.maximum(out.hi - T, T - out.lo)[:, None]
        lo_, hi_ = out.lo[:, None], out.hi[:, None]
        units = cs.unit[:, None]
    else:
        Th, Tc = cs.target[:, 0], cs.target[:, 1]
        im = lstm_image(tuple(z[:, g] for g in range(4)), cs.own, R[H + cs.unit, cs.state], Tc,
                        R[H + cs.unit, cs.succ], dtype, kernel)
        np.maximum.at(settled, H + cs.unit, im.settled)
        np.maximum.at(drift, H + cs.unit, im.drift)
        dcase = np.stack([np.maximum(im.h.hi - Th, Th - im.h.lo), im.d_box], 1)
        lo_, hi_ = np.stack([im.h.lo, im.c.lo], 1), np.stack([im.h.hi, im.c.hi], 1)
        units = np.stack([cs.unit, H + cs.unit], 1)
    dev = np.zeros((S, R.shape[1]))
    for col in range(dcase.shape[1]):
        np.maximum.at(dev, (units[:, col], cs.succ), dcase[:, col])
    return _Pass(dev, drift, settled, len(cs.unit), dcase, lo_, hi_)


# --- readout ----------------------------------------------------------------------------------------

def _readout(md: _Model, W: RecurrentBlocks, R: np.ndarray, rng: _Ranges, dtype: torch.dtype
             ) -> tuple[FailingCase | None, float, int]:
    """Check every logit's sign on every box (Lemma 3); returns (failing case, slack, cases)."""
    H, k, m, q = md.H, md.k, md.m, md.q
    u = iv.unit_roundoff(dtype)
    tiny = iv.tiny(dtype)
    A1, a1 = W.readout_weight, W.readout_bias
    two = W.out_weight is not None
    absA1 = np.abs(A1)                                    # hoisted: (2k+1)-row matrices
    absA2 = np.abs(W.out_weight) if two else None
    hmax_all = _hmax(md, R)
    n1 = A1.shape[1] + 1
    opens, closes, end = np.arange(k), np.arange(k, 2 * k), 2 * k
    n_out = 2 * k + 1
    slack_min, cases = math.inf, 0
    units_of = [np.nonzero(md.slot == s)[0] for s in range(m)]
    for si, (depth, last) in enumerate(md.states()):
        hmax = hmax_all[:, si]
        coef1 = iv.gamma(n1, u) + iv.gamma(2 * (n1 + q + 4), _U64)
        A1h = absA1 @ hmax + np.abs(a1)
        rho1 = absA1 @ R[:H, si] + coef1 * A1h + n1 * tiny
        safe = overflow_free(A1h, coef1, dtype).all()
        if two:
            A2, a2 = W.out_weight, W.out_bias
            ymax = A1h + rho1
            n2 = A2.shape[1] + 1
            coef2 = iv.gamma(n2, u) + iv.gamma(2 * (n2 + q + 4), _U64)
            A2y = absA2 @ ymax + np.abs(a2)
            rad = absA2 @ rho1 + coef2 * A2y + n2 * tiny
            safe = safe and overflow_free(A2y, coef2, dtype).all()
        else:
            rad = rho1
        if not safe:  # a logit could overflow the dtype: no rounding bound, NaN fails
            rad = np.full_like(rad, np.nan)
        a, c, e = md.coef(depth, last)
        const1 = a1.copy()
        V = []
        for s in range(m):
            us = units_of[s]
            if s < depth:
                M = (A1[:, us] * a[us]) @ md.Phi[md.coord[us]]
                M[:, -1] += A1[:, us] @ c[us]
                V.append(A2 @ M if two else M)
            else:
                const1 += A1[:, us] @ e[us]
        const = (A2 @ const1 + a2) if two else const1
        top = md.top(depth) if depth else None
        slots = list(range(depth))
        # hypercube bounds per slot, then exact ranges where a row needs them
        lo = const - rad
        hi = const + rad
        for s in slots:
            w = V[s]
            lo = lo + np.minimum(w[:, :q], 0).sum(1) + w[:, q]
            hi = hi + np.maximum(w[:, :q], 0).sum(1) + w[:, q]
        want = np.zeros(n_out, dtype=bool)
        want[opens] = depth < m
        want[end] = depth == 0
        bad = np.where(want, ~(lo > 0), ~(hi < 0))       # NaN is bad
        bad[closes] = False
        for r in np.nonzero(bad)[0]:                  # refine: exact range per slot
            lo_r, hi_r = const[r] - rad[r], const[r] + rad[r]
            for s in slots:
                mn, mx = rng(V[s][r])
                lo_r, hi_r = lo_r + mn, hi_r + mx
            lo[r], hi[r] = lo_r, hi_r
        # close logits: the other slots by hypercube (refined below), the top as in Lemma 3
        clo, chi = const[closes] - rad[closes], const[closes] + rad[closes]
        for s in slots:
            if s == top:
                continue
            w = V[s][closes]
            clo = clo + np.minimum(w[:, :q], 0).sum(1) + w[:, q]
            chi = chi + np.maximum(w[:, :q], 0).sum(1) + w[:, q]
        if depth:
            wt = V[top][closes]
            pos = clo + np.einsum("ij,ij->i", wt, md.bits)        # top = c itself
            best_bits = wt[:, :q] > 0
            best = np.maximum(wt[:, :q], 0).sum(1) + wt[:, q]
            same = (best_bits == (md.bits[:, :q] > 0)).all(1)
            second = np.where(same, best - np.abs(wt[:, :q]).min(1), best)
            neg = chi + second
            c_bad_pos, c_bad_neg = ~(pos > 0), ~(neg < 0)
            for i in np.nonzero(c_bad_pos | c_bad_neg)[0]:   # refine other slots exactly
                for s in slots:
                    if s == top:
                        continue
                    w = V[s][closes[i]]
                    mn, mx = rng(w)
                    pos[i] += mn - (np.minimum(w[:q], 0).sum() + w[q])
                    neg[i] += mx - (np.maximum(w[:q], 0).sum() + w[q])
            slack = np.minimum(pos, -neg)
            lo[closes], hi[closes] = pos, neg
            want[closes] = False
            cases += 2 * k
        else:
            slack = -chi
            lo[closes], hi[closes] = clo, chi
            cases += k
        s_other = np.where(want, lo, -hi)
        s_other[closes] = np.inf
        cases += k + 1
        worst = nan_min(float(slack.min()), float(s_other.min()))
        slack_min = nan_min(slack_min, worst)
        if not worst > 0:
            if not float(slack.min()) > 0:
                i = int(np.argmin(slack))
                row = int(closes[i])
                if depth and not lo[row] > 0:               # the matching close, top = i
                    stack = [0] * depth
                    stack[top] = i
                    st = tuple(reversed(stack)) if md.kind == "push_pop" else tuple(stack)
                    cfg = f"{DyckConfig(st)!r} ({_LAST[last]})"
                    req = (0.0, math.inf)
                else:
                    cfg = (f"depth {depth} ({_LAST[last]}) with top ≠ type {i}, e.g. "
                           + md.witness(depth, last, {}, 0))
                    req = (-math.inf, 0.0)
            else:
                row = int(np.argmin(s_other))
                cfg = f"depth {depth} ({_LAST[last]}), e.g. " + md.witness(depth, last, {}, 0)
                req = (0.0, math.inf) if want[row] else (-math.inf, 0.0)
            sym = md.machine.output_alphabet.symbols[row]
            return (FailingCase("readout", cfg, None, row, f"logit {row} ({sym})",
                                (float(lo[row]), float(hi[row])), req), slack_min, cases)
    return None, slack_min, cases


# --- the certificate ----------------------------------------------------------------------------

def _centre(md: _Model, depth: int, last: int, stack: tuple[int, ...]) -> np.ndarray:
    """E of one configuration (stack bottom first) after the given last operation."""
    a, c, e = md.coef(depth, last)
    slots = stack[::-1] if md.kind == "push_pop" else stack
    n = len(a)
    v = np.arange(n) % md.H
    filled = md.slot[v] < depth
    bit = np.zeros(n)
    idx = np.nonzero(filled)[0]
    bit[idx] = md.phi[np.asarray(slots, np.int64)[md.slot[v[idx]]], md.coord[v[idx]]]
    return np.where(filled, a * bit + c, e)


def _check_encoding(md: _Model, net: CompiledNetwork, samples: int = 32) -> FailingCase | None:
    """Sanity check of the layout against the construction's own decoder: E of random stacks
    at every (depth, last) must decode to those stacks (not part of the proof's logic)."""
    rng = np.random.default_rng(0)
    for depth, last in md.states():
        for _ in range(samples if depth else 1):
            stack = tuple(int(t) for t in rng.integers(0, md.k, depth))
            fields = net.decode(_centre(md, depth, last, stack)[None, None, :])
            got = fields["stack"].reshape(-1)
            want = np.full(md.m, -1)
            want[:depth] = stack
            if not np.array_equal(got, want):
                return FailingCase("encoding", f"{DyckConfig(stack)!r} ({_LAST[last]})", None,
                                   -1, f"decoded stack {got.tolist()}", (math.nan, math.nan),
                                   (math.nan, math.nan))
    return None


def _initial_centre(md: _Model) -> np.ndarray:
    return md.coef(0, NONE)[2]


class Slots:
    """The structural family of one Dyck network: the semantic model, its local cases and the
    weights by meaning (`RecurrentNet.blocks`). A `pdanet.verify.certify.induction.BoxFamily`
    whose radii are per unit and per abstract state (depth, last operation)."""

    initial_config = "DyckConfig(stack=())"

    def __init__(self, md: _Model, W: RecurrentBlocks, dtype: torch.dtype,
                 progress: Progress | None):
        self.md, self.W, self.dtype, self.progress = md, W, dtype, progress
        self.rng = _Ranges(md)
        self.cs = _build_cases(md, W, self.rng)
        lstm = md.kind == "cell_stack"
        self.s0 = np.concatenate([W.h0, W.c0]) if lstm else W.h0
        self.E0 = _initial_centre(md)
        self.cells = np.zeros(len(self.E0), dtype=bool)
        self.cells[md.H:] = lstm
        states = md.states()
        self.states, self.initial = len(states), states.index((0, NONE))
        self.growth = (1.0, HIDDEN_CAP) if lstm else (1.0,)

    def label(self, j: int) -> str:
        return self.md.label(j)

    def step(self, R: np.ndarray, kernel: str, stage: str) -> _Pass:
        ps = _pass(self.md, self.W, self.cs, R, self.dtype, kernel)
        notify(self.progress, f"structural {stage}", 1, 1)
        return ps

    def readout(self, R: np.ndarray) -> tuple[FailingCase | None, float, int]:
        return _readout(self.md, self.W, R, self.rng, self.dtype)

    def failing(self, kind: str, j: int, ps: _Pass, R: np.ndarray) -> FailingCase:
        """The local case where unit j (≥ H: its cell) exceeds its successor's radius most,
        with a concrete configuration and symbol that have that local view."""
        md, cs = self.md, self.cs
        H = md.H
        v, col = (j - H, 1) if j >= H else (j, 0)
        mine = np.nonzero(cs.unit == v)[0]
        if len(mine) == 0:  # a unit without local cases (its deviation is its radius's)
            return FailingCase(kind, "every configuration", None, j, md.label(j),
                               (math.nan, math.nan), (math.nan, math.nan))
        excess = ps.dcase[mine, col] - R[j, cs.succ[mine]]
        i = int(mine[np.argmax(excess)])
        depth, last, push, pins, bx = cs.views[i]
        jj = int(md.coord[v])
        cfg = md.witness(depth, last, pins, jj)
        if push:
            sym = md.machine.opens[int(np.nonzero(md.phi[:, jj] == bx)[0][0])]
        else:
            top = md.top(depth)
            t = int(np.nonzero(md.phi[:, jj] == pins[top])[0][0]) if top in pins else 0
            sym = md.machine.closes[t]
        tgt, r = float(cs.target[i, col]), float(R[j, cs.succ[i]])
        return FailingCase(kind, cfg, sym, j, md.label(j),
                           (float(ps.lo[i, col]), float(ps.hi[i, col])), (tgt - r, tgt + r))


def uses_structural(machine: Machine, net: CompiledNetwork, max_configs: int) -> bool:
    """Dyck-(k, m) networks (`DyckSlots`) with more (configuration, symbol) cases than
    `max_configs` are certified structurally, never by enumeration."""
    return (isinstance(machine, DyckKM) and isinstance(net.abstraction, DyckSlots)
            and machine.configs_exceed(max_configs // max(1, len(machine.alphabet))))


def _structural(machine: DyckKM, net: CompiledNetwork, dtype: torch.dtype | None, kernel: str,
                eps: float | None, progress: Progress | None, retry: bool) -> Certificate:
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    run = replace(run, configs=machine.num_configs)
    md = _model(machine, run.net)
    bad = _check_encoding(md, run.net)
    if bad is not None:
        return run.refused(bad, "the layout's encoding disagrees with the decoder")
    fam = Slots(md, run.net.module.blocks(numpy=True), run.dtype, progress)
    notify(progress, "structural cases", len(fam.cs.unit), len(fam.cs.unit))
    run = replace(run, notes=(LIVE_NOTE, (
        f"structural: {len(fam.cs.unit):,} local unit cases (depth, last operation, symbol kind, "
        "pinned slot bits) cover all configurations; see pdanet.verify.certify.dyck")))
    return prove(fam, run, eps, retry=retry)


def certify_structural(machine: DyckKM, net: CompiledNetwork, dtype: torch.dtype | None = None,
                       kernel: str = "ulp", eps: float | None = None,
                       progress: Progress | None = None) -> Certificate:
    """Certify a Dyck-(k, m) stack network (Elman push/pop or LSTM cell stack) for every string
    (LSTM: every length ≤ L, reported) by local views (see the module docstring's lemmas),
    under the kernel model ``kernel`` alone.

    Same `Certificate` as `pdanet.certify`; ``configs`` is Σ kⁱ (covered, not visited) and
    ``cases`` the number of local cases checked (unit cases plus logit checks). ``eps`` caps the
    box radius (None: searched over `EPS_LADDER`); ``progress`` as in `certify` (called once
    per pass). Arguments are validated as in `certify` (InputError); a non-finite weight, or a
    NaN met on the way (every comparison is written so that NaN fails), gives a NOT CERTIFIED
    certificate that names it.
    """
    check_arguments(eps=eps, kernel=kernel, dtype=dtype, progress=progress)
    if not isinstance(machine, DyckKM):
        raise CertificationError(f"structural certification is for DyckKM, got "
                                 f"{type(machine).__name__}")
    if net.machine != machine:
        raise CertificationError(f"network compiled for {net.machine!r}, not {machine!r}")
    return _structural(machine, net, dtype, kernel, eps, progress, retry=False)


def certify(machine: Machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """A `DyckSlots` network: structurally when `uses_structural`, else by the box family;
    retried under the saturating kernel model when the ulp model proves less than every length.
    Arguments are checked by `pdanet.verify.certify.certify`."""
    if not uses_structural(machine, net, max_configs):
        return box.certify(machine, net, dtype=dtype, eps=eps, max_configs=max_configs,
                           chunk=chunk, kernel=kernel, progress=progress)
    check_pair(machine, net)
    return _structural(machine, net, dtype, kernel, eps, progress, retry=True)


__all__ = ["Slots", "certify", "certify_structural", "uses_structural"]
