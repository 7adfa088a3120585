"""Exact recurrent networks for DFAs and Mealy machines.

Four constructions, all real-time except ``compressed`` (two network steps per symbol):

- ``elman/minsky`` (default for "elman"): Minsky (1967, ch. 3) — one tanh unit per (state
  entered q, last symbol a[, last output]) of a reachable transition, on exactly when the last
  step read a and entered q. Units: ``P ≤ Q*S``; no start unit — when no unit can stand for the
  start (Mealy machines, whose first output is "none"; machines never re-entering the start),
  the all-off state stands for it (see `PairUnits`).
- ``lstm/minsky`` (default for "lstm"): the same units, but the conjunction "in state p and
  reading a" is a *product* of gates: the input gate opens on the symbol, the output gate on the
  state. Units: as for ``elman/minsky``.
- ``second_order/omlin_giles`` (default): Omlin & Giles (1996), ``h_t = σ(β(W[x_t] h_{t-1} + b))``
  with one unit per state (Mealy machines: one per reachable (state, last output) pair).
  Units: ``Q`` (Mealy: ``M ≤ Q*(O+1)``).
- ``elman/compressed``: a binary state code and a two-layer threshold lookup of the transition
  table (in the spirit of Horne & Hush 1996), two network steps per symbol; about
  ``2·sqrt(Q·S·F)`` units for F coded output functions (see `compile_compressed`).

Common conventions. A partial DFA's implicit dead state is "no unit on" (second order; Minsky
unless all-off stands for the start, then a holding dead pair) or an explicit sink code
(compressed); it decodes to state -1. Weights are integers times β (the
saturation scale); β comes from a margin argument written into ``scale_argument``: if every unit
is within ε of its ideal value, every pre-activation is within L·ε of an ideal value of magnitude
≥ 1, where L is the largest L1 norm of a row's coefficients on the hidden units, so a large enough
β restores ε. Readouts: acceptance (one logit, > 0 = accept), next_set (|Σ|+1 logits, > 0 =
allowed), symbol (|Out|+1 logits, argmax, last = none); correct logits are ≥ β·margin and wrong
ones ≤ -β·margin. Padding (-1) is read as symbol 0, so only steps up to each string's length mean
anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp
import torch

from pdanet.automata.dfa import DFA
from pdanet.constructions.abstraction import MAX_LABELS, RecurrentUnits, SteppedUnits
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.modules import RecurrentBlocks, RecurrentNet, recurrent_state_dict
from pdanet.constructions.second_order import (
    SecondOrderBlocks,
    SecondOrderRNN,
    second_order_state_dict,
)
from pdanet.errors import CompileError

Q, S = sp.Symbol("Q"), sp.Symbol("S")
DEFAULT_MAX_DENSE = 1 << 26  # entries of the largest dense weight block we agree to build
DENSE_SECOND_ORDER = 1 << 22  # second order: dense W up to this many entries, sparse beyond


# --- shared helpers ---------------------------------------------------------------------------


def _check(machine: Any, target: str) -> DFA:
    if not isinstance(machine, DFA):
        raise CompileError(
            f"the {target} DFA constructions need a pdanet DFA (deterministic, one target per "
            f"transition), got {type(machine).__name__}; determinise an NFA first"
        )
    if machine.output_kind not in ("accept", "next_set", "symbol"):
        raise CompileError(f"unknown output_kind {machine.output_kind!r} of {machine!r}")
    return machine


def _guard(entries: int, what: str, max_dense: int | None) -> None:
    limit = DEFAULT_MAX_DENSE if max_dense is None else max_dense
    if entries > limit:
        raise CompileError(
            f"{what} needs a dense block of {entries:,} weights (limit {limit:,}): use "
            "target='second_order' (sparse, one unit per state) or method='compressed' for "
            "target='elman', or raise the limit with max_dense=…"
        )


def reachable_states(dfa: DFA) -> np.ndarray:
    """Boolean mask of the states reachable from the start (vectorised breadth-first search)."""
    n = dfa.num_states
    seen = np.zeros(n, dtype=bool)
    frontier = np.array([dfa.state_index(dfa.start)])
    seen[frontier] = True
    table = dfa.table
    while frontier.size:
        nxt = table[frontier].ravel()
        nxt = np.unique(nxt[nxt >= 0])
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        frontier = nxt
    return seen


def num_outputs(dfa: DFA) -> int:
    """Readout width: 1 (accept), |Σ|+1 (next_set), |Out|+1 (symbol, last = none)."""
    if dfa.output_kind == "accept":
        return 1
    if dfa.output_kind == "next_set":
        return len(dfa.output_alphabet)
    return len(dfa.output_alphabet) + 1


def _readout_sets(dfa: DFA, tau: np.ndarray, out: np.ndarray, off: int = -1
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Which configs make each logit positive: (m (O, N) bool, m0 (O,) bool).

    A unit u stands for "now in state tau[u] (-1 dead), the last output was out[u] (-1 none)";
    "every unit off" stands for state `off` (-1 dead) with no output yet. m[o, u] says logit o is
    positive when u is the on unit, m0[o] when every unit is off.
    """
    n = dfa.num_states
    safe_tau = np.where(tau >= 0, tau, n)
    safe_off = off if off >= 0 else n
    if dfa.output_kind == "accept":
        acc = np.append(dfa.accepting_mask, False)
        return acc[safe_tau][None, :], acc[[safe_off]]
    if dfa.output_kind == "next_set":
        ns = np.vstack([dfa.next_set_table[:n], np.zeros((1, len(dfa.output_alphabet)), bool)])
        return ns[safe_tau].T.copy(), ns[safe_off].copy()
    k = len(dfa.output_alphabet)
    m = np.zeros((k + 1, tau.shape[0]), dtype=bool)
    has = out >= 0
    m[out[has], np.nonzero(has)[0]] = True
    m[k] = ~has
    m0 = np.zeros(k + 1, dtype=bool)
    m0[k] = True
    return m, m0


@dataclass(frozen=True)
class OutputReader:
    """Logits → the machine's batch output format (see module docstring)."""

    kind: str

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        if self.kind == "accept":
            return logits[..., 0] > 0
        if self.kind == "next_set":
            return logits > 0
        idx = logits.argmax(axis=-1)
        return np.where(idx == logits.shape[-1] - 1, -1, idx).astype(np.int64)


@dataclass(frozen=True)
class ArgmaxDecoder:
    """States → {"state": label of the most active unit, or `default` (the state that "every
    unit off" stands for; -1 = dead) when none exceeds `threshold`}."""

    labels: np.ndarray
    threshold: float
    default: int = -1

    def __call__(self, states: np.ndarray) -> dict[str, np.ndarray]:
        idx = states.argmax(axis=-1)
        top = np.take_along_axis(states, idx[..., None], axis=-1)[..., 0]
        return {"state": np.where(top > self.threshold, self.labels[idx],
                                  self.default).astype(np.int64)}


def _identity_embedding(k: int) -> ExactWeight:
    return ExactWeight(np.eye(k, dtype=np.int64), 1, scaled=False)


def _scale(value: Any) -> sp.Rational:
    return sp.nsimplify(value, rational=True)


# --- Minsky pair units (Elman and LSTM) -------------------------------------------------------


@dataclass(frozen=True)
class PairUnits:
    """One unit per (state entered, last symbol, last output) triple (q, a, o) of the kept
    transitions: on when the last step read a and entered q emitting o. tau = q (-1 dead), sym =
    a, out = o (-1 none). ``trans_src``/``trans_unit``: each kept transition's source state and
    unit.

    ``off`` is the state that "every unit off" stands for, ``initial`` the unit on in h0 (-1:
    none). Recognisers and generators whose start state is entered by some transition use such a
    unit as the initial one (their readout depends only on tau) and off = -1 (dead), so the
    transitions into the dead state need no unit. Otherwise (Mealy machines, whose initial output
    is "none", and machines that never re-enter the start) all units start off and off = the start
    state; then the transitions into the dead state on a symbol a share one unit (dead, a) that
    *holds* (stays on), so that dead and start are told apart."""

    tau: np.ndarray
    sym: np.ndarray
    out: np.ndarray
    trans_src: np.ndarray
    trans_unit: np.ndarray
    initial: int
    off: int

    @property
    def size(self) -> int:
        return int(self.tau.shape[0])

    @property
    def hold(self) -> np.ndarray:
        """The dead units (present only when off ≠ dead): they stay on once on."""
        return self.tau < 0

    def state_rows(self, num_states: int) -> tuple[np.ndarray, np.ndarray]:
        """(A (N, N) int, c (N,) int): [state ∈ Src(u)] = A[u]·b + c[u] for 0/1 unit values b
        with at most one on, where Src(u) = the sources of u's transitions. [state = p] is the sum
        of the units entering p, plus 1 - Σ b when p is the state `off` stands for."""
        src = np.zeros((self.size, num_states), dtype=bool)
        src[self.trans_unit, self.trans_src] = True
        A = (src[:, np.maximum(self.tau, 0)] & (self.tau >= 0)[None, :]).astype(np.int64)
        c = src[:, self.off].astype(np.int64) if self.off >= 0 else np.zeros(self.size, np.int64)
        return A - c[:, None], c


def pair_units(dfa: DFA, reachable_only: bool = True) -> PairUnits:
    """The units of the transitions from every (``reachable_only``: every reachable) state."""
    n, k = dfa.table.shape
    p, a = np.divmod(np.arange(n * k), k)
    if reachable_only:
        keep = reachable_states(dfa)[p]
        p, a = p[keep], a[keep]
    start = dfa.state_index(dfa.start)
    tau = dfa.table[p, a]
    out = dfa.out_table[p, a] if dfa.out_table is not None else np.full(tau.shape, -1)
    off = -1 if dfa.output_kind != "symbol" and (tau == start).any() else start
    if off < 0:  # entering the dead state = every unit off: no unit needed
        live = tau >= 0
        p, a, tau, out = p[live], a[live], tau[live], out[live]
    triples, unit = np.unique(np.stack([tau, a, out], axis=1).astype(np.int64), axis=0,
                              return_inverse=True)
    unit = unit.reshape(-1)
    initial = int(np.nonzero(triples[:, 0] == start)[0][0]) if off < 0 else -1
    return PairUnits(triples[:, 0].copy(), triples[:, 1].copy(), triples[:, 2].copy(), p, unit,
                     initial, off)


def _pair_bound(dfa: DFA, units: PairUnits):
    """P = the number of (state entered, last symbol, last output) triples, ≤ Q·S."""
    n, k = dfa.table.shape
    return sp.Symbol("P"), {"P": units.size, "Q": n, "S": k}


def _readout_rows(dfa: DFA, units: PairUnits) -> tuple[np.ndarray, np.ndarray]:
    """(O, N) int R and (O,) int m0 with logit_o = 2·[config ∈ S_o] - 1 = 2(R·b + m0) - 1 for 0/1
    unit values b: R = m - m0, where m[o, u] says unit u's config is in S_o and m0[o] says the
    all-off config is."""
    m, m0 = _readout_sets(dfa, units.tau, units.out, units.off)
    return m.astype(np.int64) - m0.astype(np.int64)[:, None], m0.astype(np.int64)


def compile_minsky(machine: DFA, dtype: torch.dtype = torch.float32, scale: Any = None,
                   reachable_only: bool = True, max_dense: int | None = None
                   ) -> CompiledNetwork:
    """Minsky's construction in a tanh ``nn.RNN`` (units ±1), P ≤ Q·S units.

    Unit u = (q, a, o) (Minsky 1967, §3.5: one McCulloch–Pitts cell per state × input; here per
    state entered × last input, so the cells of transitions with one effect are merged) is the
    threshold cell ``[state ∈ Src(u) ∧ x = a]``, i.e. ``2[state ∈ Src(u)] + 2[x = a] - 3 > 0``
    (plus ``4·b_u`` for a holding unit, see `PairUnits`), where ``[state ∈ Src(u)] = A[u]·b +
    c[u]`` is linear in the 0/1 unit values b (`PairUnits.state_rows`). Every ideal
    pre-activation is an odd integer; with b = (h + 1)/2 it becomes an integer row on h ∈ {±1} (the σ(z) =
    (1 + tanh(z/2))/2 image of the cell). Readout: logit_o = 2[config ∈ S_o] - 1, also linear in
    b (`_readout_rows`). ``reachable_only`` (default) drops the transitions of unreachable states;
    transitions into the dead state need no unit unless all-off stands for the start.
    """
    dfa = _check(machine, "elman")
    n, k = dfa.table.shape
    units = pair_units(dfa, reachable_only)
    N = units.size
    _guard(N * N, f"elman/minsky for {dfa!r} ({N:,} units)", max_dense)
    A, c = units.state_rows(n)
    W01 = 2 * A + 4 * np.diag(units.hold.astype(np.int64))  # coefficients on b (all even)
    W = W01 // 2  # on h, since b = (h + 1)/2
    bias = W.sum(axis=1) + 2 * c - 3
    W_ih = np.zeros((N, k), dtype=np.int64)
    W_ih[np.arange(N), units.sym] = 2
    R01, m0 = _readout_rows(dfa, units)  # logit = 2 R01·b + 2 m0 - 1 = R01·h + Σ R01 + 2 m0 - 1
    R = R01
    r = R.sum(axis=1) + 2 * m0 - 1
    L = int(max(np.abs(W).sum(axis=1).max(initial=1), np.abs(R).sum(axis=1).max(initial=1), 1))
    beta_min = sp.log(4 * L - 1)
    beta = _scale(scale) if scale is not None else sp.ceiling(beta_min)
    h0 = -np.ones(N, dtype=np.int64)
    if units.initial >= 0:
        h0[units.initial] = 1
    O = num_outputs(dfa)
    weights = recurrent_state_dict(RecurrentBlocks(
        embedding=_identity_embedding(k),
        weight_ih=ExactWeight(W_ih),
        weight_hh=ExactWeight(W),
        bias_ih=ExactWeight(np.zeros(N, dtype=np.int64)),
        bias_hh=ExactWeight(bias.astype(np.int64)),
        h0=ExactWeight(h0, 1, scaled=False),
        readout_weight=ExactWeight(R),
        readout_bias=ExactWeight(r.astype(np.int64)),
    ))
    module = load_exact(RecurrentNet("rnn", k, k, N, O), weights, beta, dtype)
    bound, params = _pair_bound(dfa, units)
    argument = (
        f"Units are ±1. If each is within ε of ±1, every pre-activation (before β) is within L·ε "
        f"of an odd integer, L = {L} (largest row L1 norm on h, recurrent and readout rows). "
        f"With ε = 1/(2L) its magnitude is ≥ 1/2, and tanh(β/2) ≥ 1 - ε iff β ≥ ln(4L - 1) "
        f"= {float(beta_min):.4f}; so the ε-invariant holds at every step (h0 is exact) and every "
        f"logit has the right sign with |logit| ≥ β/2. Chosen β = {beta}."
    )
    return CompiledNetwork(
        machine=dfa, module=module, target="elman", method="minsky", hidden_units=N,
        bound=bound, params=params, weights=weights, scale=beta,
        decoder=ArgmaxDecoder(units.tau, 0.0, units.off), reader=OutputReader(dfa.output_kind),
        margin=sp.Rational(1, 2), scale_argument=argument,
        abstraction=RecurrentUnits(labels=_pair_labels(dfa, units), cell="rnn"),
        info={"reachable_pairs": int(reachable_states(dfa).sum()) * k, "minsky_bound": n * k,
              "L": L, "beta_min": beta_min, "all_off_state": units.off},
    )


def _pair_labels(dfa: DFA, units: PairUnits) -> tuple[str, ...]:
    if units.size > MAX_LABELS:
        return ()
    syms, states = dfa.alphabet.symbols, dfa.states
    outs = dfa.output_alphabet.symbols if dfa.out_table is not None else ()
    return tuple(("dead" if q < 0 else f"→{states[q]!r}") + f" on {syms[a]!r}"
                 + (f" / {outs[o]!r}" if o >= 0 else "")
                 for q, a, o in zip(units.tau.tolist(), units.sym.tolist(), units.out.tolist()))


def compile_lstm(machine: DFA, dtype: torch.dtype = torch.float32, scale: Any = None,
                 reachable_only: bool = True, max_dense: int | None = None) -> CompiledNetwork:
    """Minsky's units (see `compile_minsky`) in an ``nn.LSTM``, the conjunction done by gate
    products; P ≤ Q·S units.

    For unit u = (q, a, o), with gate order (i, f, g, o) and pre-activations before β:
    ``i = σ(β(2[x=a] - 1 + 4h_u·hold))`` (opens on the symbol), ``f = σ(-β)`` (forget),
    ``g = tanh(β)``, ``o = σ(β(2(A[u]·h + c[u]) - 1 + 4h_u·hold))`` (opens on the state; A, c
    from `PairUnits.state_rows`, so [state ∈ Src(u)] is read with h in place of the 0/1 value).
    So ``c' ≈ [x=a]`` and ``h' = o·tanh(c') ≈ [state ∈ Src(u)]·[x=a]·tanh(1)``; a holding unit
    keeps both gates open while it is on. h0 = 3/4 on the initial unit (if any), else 0; c0 = 0.

    Proof of the invariant "off units |h| ≤ 6δ, the on unit (at most one) h ∈ [3/4 - 6δ, 4/5],
    |c| ≤ 2", where δ ≥ σ(-β/4): |c'| ≤ δ|c| + 1 ≤ 2. On (x = a and state ∈ Src(u), or holding):
    c' ≥ (1-δ)(1-2δ) - 2δ ≥ 1 - 5δ, so h ≥ (1-δ)(tanh 1 - 5δ) ≥ 3/4 - 6δ, and h ≤ tanh(1 + 2δ)
    ≤ 4/5. Off by symbol: |c'| ≤ 3δ; off by state: o ≤ δ; either way |h| ≤ 3δ. Let L be the
    largest row L1 norm on h over 2 (gates and readout). Off units move a row by ≤ 12Lδ, and its
    ideal value (on unit at 3/4 … 4/5) is ≥ 1/2 or ≤ -1/2 (e.g. 2·3/4 - 1, 1 - 2·3/4, -1 + 4·3/4),
    so with δ = 1/(48L) every gate and logit has magnitude ≥ 1/4, and σ(-β/4) ≤ δ iff
    β ≥ 4 ln(48L - 1).
    """
    dfa = _check(machine, "lstm")
    n, k = dfa.table.shape
    units = pair_units(dfa, reachable_only)
    N = units.size
    _guard(4 * N * N, f"lstm/minsky for {dfa!r} ({N:,} units)", max_dense)
    A, c = units.state_rows(n)
    hold = 4 * np.diag(units.hold.astype(np.int64))
    W_hh = np.zeros((4 * N, N), dtype=np.int64)
    W_hh[:N] = hold
    W_hh[3 * N:] = 2 * A + hold
    W_ih = np.zeros((4 * N, k), dtype=np.int64)
    W_ih[np.arange(N), units.sym] = 2
    one = np.ones(N, dtype=np.int64)
    b = np.concatenate([-one, -one, one, 2 * c - 1])
    R01, m0 = _readout_rows(dfa, units)
    R = 2 * R01
    r = 2 * m0 - 1
    L = int(max(np.abs(W_hh).sum(axis=1).max(initial=2), np.abs(R).sum(axis=1).max(initial=2),
                2)) // 2
    beta_min = 4 * sp.log(48 * L - 1)
    beta = _scale(scale) if scale is not None else sp.ceiling(beta_min)
    h0 = np.zeros(N, dtype=object)
    if units.initial >= 0:
        h0[units.initial] = sp.Rational(3, 4)
    O = num_outputs(dfa)
    weights = recurrent_state_dict(RecurrentBlocks(
        embedding=_identity_embedding(k),
        weight_ih=ExactWeight(W_ih),
        weight_hh=ExactWeight(W_hh),
        bias_ih=ExactWeight(np.zeros(4 * N, dtype=np.int64)),
        bias_hh=ExactWeight(b),
        h0=ExactWeight.of(h0, scaled=False),
        c0=ExactWeight(np.zeros(N, dtype=np.int64), 1, scaled=False),
        readout_weight=ExactWeight(R),
        readout_bias=ExactWeight(r.astype(np.int64)),
    ))
    module = load_exact(RecurrentNet("lstm", k, k, N, O), weights, beta, dtype)
    bound, params = _pair_bound(dfa, units)
    argument = (
        f"Gate saturation δ = 1/(48L) with L = {L}; see compile_lstm's docstring: the invariant "
        f"(off |h| ≤ 6δ, on h ∈ [3/4-6δ, 4/5]) holds when β ≥ 4 ln(48L - 1) = "
        f"{float(beta_min):.4f}; every gate and logit then has |pre-activation| ≥ β/4. "
        f"Chosen β = {beta}."
    )
    return CompiledNetwork(
        machine=dfa, module=module, target="lstm", method="minsky", hidden_units=N,
        bound=bound, params=params, weights=weights, scale=beta,
        decoder=ArgmaxDecoder(units.tau, 3 / 8, units.off), reader=OutputReader(dfa.output_kind),
        margin=sp.Rational(1, 4), scale_argument=argument,
        abstraction=RecurrentUnits(labels=_pair_labels(dfa, units), cell="lstm"),
        info={"minsky_bound": n * k, "L": L, "beta_min": beta_min, "all_off_state": units.off},
    )


# --- second order -----------------------------------------------------------------------------


def moore_states(dfa: DFA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reachable (state, last output) pairs of a Mealy machine as (state, out, targets (S, M)).

    ``targets[a, j]`` is the pair entered from pair j on symbol a (-1: dead). Pair 0 is
    (start, none). A recogniser/generator gives its states with out = -1.
    """
    n = dfa.num_states
    if dfa.out_table is None:
        return np.arange(n), np.full(n, -1), dfa.table.T.copy()
    O1 = len(dfa.output_alphabet) + 1
    code = np.where(dfa.table >= 0, dfa.table * O1 + dfa.out_table + 1, -1)  # (n, k)
    seen = np.zeros(n * O1, dtype=bool)
    start = dfa.state_index(dfa.start) * O1
    seen[start] = True
    frontier = np.array([start])
    while frontier.size:
        nxt = code[frontier // O1].ravel()
        nxt = np.unique(nxt[nxt >= 0])
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        frontier = nxt
    ids = np.nonzero(seen)[0]
    ids = np.concatenate([[start], ids[ids != start]])
    index = np.full(n * O1, -1, dtype=np.int64)
    index[ids] = np.arange(ids.size)
    tcode = code[ids // O1]  # (M, k)
    targets = np.where(tcode >= 0, index[np.maximum(tcode, 0)], -1).T.copy()
    return ids // O1, ids % O1 - 1, targets


def compile_second_order(machine: DFA, dtype: torch.dtype = torch.float32, scale: Any = None,
                         sparse: bool | None = None, max_dense: int | None = None
                         ) -> CompiledNetwork:
    """Omlin & Giles (1996): ``h_t = σ(β(W[x_t] h_{t-1} + b))``, one unit per state.

    ``W[a][q, p] = 2`` when δ(p, a) = q, else 0; ``b = -1`` (their +H / -H/2 programming, with
    H = 2β and no negative self-weights), so with one-hot h the pre-activation is ±β. The dead
    state is h = 0 (stays 0). Mealy machines run on their Moore form: one unit per reachable
    (state, last output) pair. ``sparse`` (default: when the dense W would exceed ``max_dense``)
    stores W by its fixed pattern, one weight per (symbol, source unit).
    """
    dfa = _check(machine, "second_order")
    n, k = dfa.table.shape
    state, out, targets = moore_states(dfa)
    M = state.shape[0]
    if sparse is None:  # a dense per-step gather costs B·M² — only worth it for small machines
        sparse = k * M * M > (DENSE_SECOND_ORDER if max_dense is None else max_dense)
    if sparse:
        W = np.where(targets >= 0, 2, 0).astype(np.int64)
    else:
        W = np.zeros((k, M, M), dtype=np.int64)
        a_idx, p_idx = np.nonzero(targets >= 0)
        W[a_idx, targets[a_idx, p_idx], p_idx] = 2
    valid = targets >= 0
    indeg = np.zeros((k, M + 1), dtype=np.int64)
    np.add.at(indeg, (np.nonzero(valid)[0], targets[valid]), 1)
    m, m0 = _readout_sets(dfa, state, out)  # h = 0 everywhere: dead, no output
    R01 = m.astype(np.int64) - m0.astype(np.int64)[:, None]
    R = 2 * R01  # logit = 2(R01·h + m0) - 1
    r = 2 * m0.astype(np.int64) - 1
    L = int(max(2 * indeg.max(initial=1), np.abs(R).sum(axis=1).max(initial=1), 1))
    beta_min = 2 * sp.log(2 * L - 1)
    beta = _scale(scale) if scale is not None else sp.ceiling(beta_min)
    h0 = np.zeros(M, dtype=np.int64)
    h0[0] = 1
    O = num_outputs(dfa)
    weights = second_order_state_dict(SecondOrderBlocks(
        weight=ExactWeight(W),
        bias=ExactWeight(-np.ones(M, dtype=np.int64)),
        h0=ExactWeight(h0, 1, scaled=False),
        readout_weight=ExactWeight(R),
        readout_bias=ExactWeight(r.astype(np.int64)),
    ))
    module = SecondOrderRNN(k, M, O, torch.as_tensor(targets) if sparse else None)
    module = load_exact(module, weights, beta, dtype)
    if dfa.is_mealy:
        bound, params = sp.Symbol("M"), {"M": M, "Q": n, "S": k,
                                          "O": len(dfa.output_alphabet)}
    else:
        bound, params = Q, {"Q": n, "S": k}
    argument = (
        f"Units are in [0, 1]. If each is within ε of 0/1, every pre-activation (before β) is "
        f"within L·ε of ±1, L = {L} (twice the largest in-degree under one symbol or readout set)."
        f" With ε = 1/(2L) its magnitude is ≥ 1/2, and σ(β/2) ≥ 1 - ε iff β ≥ 2 ln(2L - 1) = "
        f"{float(beta_min):.4f}; so the invariant holds at every step and |logit| ≥ β/2. "
        f"Chosen β = {beta}."
    )
    return CompiledNetwork(
        machine=dfa, module=module, target="second_order", method="omlin_giles",
        hidden_units=M, bound=bound, params=params, weights=weights, scale=beta,
        decoder=ArgmaxDecoder(state, 0.5), reader=OutputReader(dfa.output_kind),
        margin=sp.Rational(1, 2), scale_argument=argument,
        abstraction=SteppedUnits(labels=_moore_labels(dfa, state, out)),
        info={"sparse": bool(sparse), "L": L, "beta_min": beta_min,
              "moore_bound": n * (len(dfa.output_alphabet) + 1) if dfa.is_mealy else n},
    )




def _moore_labels(dfa: DFA, state: np.ndarray, out: np.ndarray) -> tuple[str, ...]:
    """Second-order unit j: "in state[j], the last output out[j]" (out −1: none or no outputs)."""
    if state.shape[0] > MAX_LABELS:
        return ()
    outs = dfa.output_alphabet.symbols if dfa.out_table is not None else ()
    return tuple(f"{dfa.states[q]!r}" + (f" / {outs[o]!r}" if o >= 0 else "")
                 for q, o in zip(state.tolist(), out.tolist()))


# --- compressed: binary state code + two-layer threshold lookup -------------------------------


class SteppedRNN(torch.nn.Module):
    """A `RecurrentNet` run for two steps per input symbol: the symbol, then a blank (index |Σ|).

    ``forward(ids)`` returns the states and logits at symbol boundaries only: (B, T+1, ·).
    """

    steps_per_symbol = 2

    def __init__(self, net: RecurrentNet, blank: int):
        super().__init__()
        self.net = net
        self.blank = blank

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(ids)
        B, T = ids.shape
        x = torch.stack([ids.clamp(min=0), torch.full_like(ids, self.blank)], dim=2)
        states, logits = self.net(x.reshape(B, 2 * T))
        return states[:, ::2], logits[:, ::2]

    def blocks(self, numpy: bool = False) -> RecurrentBlocks:
        """The inner `RecurrentNet`'s weights by meaning (see `RecurrentNet.blocks`)."""
        return self.net.blocks(numpy)


def stepped_state_dict(blocks: RecurrentBlocks) -> dict[str, Any]:
    """The blocks keyed as `SteppedRNN`'s ``state_dict`` (the inner net's keys under ``net.``)."""
    return {f"net.{key}": value for key, value in recurrent_state_dict(blocks).items()}


def _bits(values: np.ndarray, width: int) -> np.ndarray:
    """(…, width) 0/1 bits of non-negative ints, least significant first."""
    return (values[..., None] >> np.arange(width)) & 1


def _width(count: int) -> int:
    """Bits needed to write 0..count-1."""
    return int(max(count - 1, 0)).bit_length()


@dataclass(frozen=True)
class _Features:
    """Binary features of every transition, and of the start: (F, Q', S) and (F,)."""

    trans: np.ndarray
    init: np.ndarray
    names: tuple[str, ...]


def _features(dfa: DFA, low: int) -> _Features:
    """Bits of the target's high part and low part, then the readout features of the target."""
    n, k = dfa.table.shape
    partial = not dfa.is_complete
    nq = n + 1 if partial else n
    table = np.vstack([np.where(dfa.table >= 0, dfa.table, n), np.full((1, k), n)])[:nq]
    start = dfa.state_index(dfa.start)
    H = -(-nq // low)
    hb, lb = _width(H), _width(low)
    parts = [_bits(table // low, hb), _bits(table % low, lb)]
    init = [_bits(np.array(start // low), hb), _bits(np.array(start % low), lb)]
    names = [f"high{b}" for b in range(hb)] + [f"low{b}" for b in range(lb)]
    acc = np.append(dfa.accepting_mask, False)
    if dfa.output_kind == "accept":
        parts.append(acc[table][..., None])
        init.append(acc[[start]])
        names.append("accept")
    elif dfa.output_kind == "next_set":
        ns = np.vstack([dfa.next_set_table[:n], np.zeros((1, dfa.next_set_table.shape[1]), bool)])
        parts.append(ns[table])
        init.append(ns[start])
        names += [f"next:{s}" for s in dfa.output_alphabet]
    else:
        ob = _width(len(dfa.output_alphabet) + 1)
        out = np.vstack([np.where(dfa.table >= 0, dfa.out_table, -1), np.full((1, k), -1)])[:nq]
        parts.append(_bits(out + 1, ob))
        init.append(np.zeros(ob, dtype=np.int64))
        names += [f"out{b}" for b in range(ob)]
    trans = np.concatenate(parts, axis=-1).astype(np.int64)  # (nq, k, F)
    return _Features(np.moveaxis(trans, -1, 0), np.concatenate(init).astype(np.int64),
                     tuple(names))


@dataclass(frozen=True)
class _Lookup:
    """Change points of every feature along the low part, per row (high part, symbol).

    ``points[f]`` is (K_f, H*S): the κ-th position in 0..low-1 where feature f of row r flips
    (``low`` = never); the feature is the parity of the number of points ≤ the low part.
    """

    low: int
    H: int
    points: tuple[np.ndarray, ...]

    @property
    def sizes(self) -> list[int]:
        return [p.shape[0] for p in self.points]


def _lookup(feats: _Features, k: int, low: int) -> _Lookup:
    F, nq, _ = feats.trans.shape
    H = -(-nq // low)
    vals = np.zeros((F, H * low, k), dtype=np.int64)
    vals[:, :nq] = feats.trans
    if H * low > nq:  # padding codes repeat the last real value (no extra change points)
        vals[:, nq:] = feats.trans[:, nq - 1: nq]
    vals = vals.reshape(F, H, low, k).transpose(0, 1, 3, 2).reshape(F, H * k, low)  # row = h*k+a
    prev = np.concatenate([np.zeros((F, H * k, 1), np.int64), vals[..., :-1]], axis=-1)
    change = vals != prev
    rank = np.cumsum(change, axis=-1) - 1
    points = []
    for f in range(F):
        K = max(int(change[f].sum(axis=-1).max(initial=0)), int(feats.init[f]))
        t = np.full((K, H * k), low, dtype=np.int64)
        r, v = np.nonzero(change[f])
        t[rank[f, r, v], r] = v
        points.append(t)
    return _Lookup(low, H, tuple(points))


def compile_compressed(machine: DFA, dtype: torch.dtype = torch.float32, scale: Any = None,
                       low: int | None = None, max_dense: int | None = None) -> CompiledNetwork:
    """A binary-coded DFA in a tanh ``nn.RNN`` with two steps per symbol (units ±1).

    The (completed) state q is written q = hi·low + lo. Every *feature* of a transition (p, a) —
    the bits of hi and lo of δ(p, a), and its readout bits (acceptance, next set, or the code
    out+1 of the emitted symbol) — is a 0/1 function of the row (hi(p), a) and of lo(p); along lo
    it is the parity of the number of its *change points* t_κ(row) ≤ lo (a depth-two threshold
    lookup, cf. Horne & Hush 1996). Three unit groups:

    - rows: one unit per (hi, a): ``[hi(q) = hi ∧ x = a]``, on in the symbol step;
    - copies: the bits of lo(q), kept through the symbol step;
    - points: one unit per (feature, κ): ``[lo ≥ t_κ(row)]``, computed in the blank step from the
      rows (t_κ(row) is linear in the one-hot rows) and the copies (lo is linear in its bits);
      each feature bit is then an alternating sum of its point units, so the next step and the
      readout are linear in them.

    In the symbol step the point units are switched off by the symbol's input weight (-2); in
    the blank step rows and copies see all points off and are off by themselves. Every
    pre-activation is an odd integer times β in the ideal run, so the margin argument of
    `compile_minsky` applies with L = the largest row L1 norm. Units: ``H*S + l + K`` for H row
    blocks, l = bits of lo, K = Σ_f K_f point units (K_f ≤ low). ``low`` (default: the best power
    of two) trades rows against points; the optimum is about 2·sqrt(Q·S·F) for F features.
    """
    dfa = _check(machine, "elman")
    n, k = dfa.table.shape
    nq = n + (0 if dfa.is_complete else 1)
    candidates = [low] if low else [1 << e for e in range(_width(nq) + 1)]
    best = None
    for cand in candidates:
        feats = _features(dfa, cand)
        lk = _lookup(feats, k, cand)
        size = lk.H * k + _width(cand) + sum(lk.sizes)
        if best is None or size < best[0]:
            best = (size, feats, lk)
    N, feats, lk = best
    low, H = lk.low, lk.H
    _guard(N * N, f"elman/compressed for {dfa!r} ({N:,} units)", max_dense)
    hb, lb = _width(H), _width(low)
    F, R = len(feats.names), H * k
    sizes = lk.sizes
    # unit layout: rows [0, R), copies [R, R+lb), points after
    p0 = R + lb
    offs = p0 + np.concatenate([[0], np.cumsum(sizes)])
    # phi[f] = 2·feature - 1 = Σ_κ (-1)^κ h_(f,κ) + (K_f mod 2) - 1, as (F, N) coefficients + (F,)
    phi = np.zeros((F, N), dtype=np.int64)
    for f in range(F):
        phi[f, offs[f]:offs[f + 1]] = (-1) ** np.arange(sizes[f])
    phi_c = np.array(sizes, dtype=np.int64) % 2 - 1
    W = np.zeros((N, N), dtype=np.int64)
    bias = np.zeros(N, dtype=np.int64)
    W_ih = np.zeros((N, k + 1), dtype=np.int64)
    # rows (hi, a): Σ_b s_b·phi_high_b + 2[x=a] - (hb + 1)   [the pattern match of hi]
    hi_sign = 2 * _bits(np.arange(H), hb) - 1  # (H, hb)
    row_hi, row_a = np.divmod(np.arange(R), k)
    W[:R] = hi_sign[row_hi] @ phi[:hb]
    bias[:R] = hi_sign[row_hi] @ phi_c[:hb] - (hb + 1)
    W_ih[np.arange(R), row_a] = 2
    # copies: phi of the low bits
    W[R:p0] = phi[hb:hb + lb]
    bias[R:p0] = phi_c[hb:hb + lb]
    # points (f, κ): 2·lo - 2·t_κ(row) + 1 with lo = Σ 2^b (h_b+1)/2, t = Σ t(r)(h_r+1)/2
    pw = 2 ** np.arange(lb, dtype=np.int64)
    allt = np.concatenate(lk.points, axis=0)  # (K, R)
    W[p0:, R:p0] = pw[None, :]
    W[p0:, :R] = -allt
    bias[p0:] = pw.sum() - allt.sum(axis=1) + 1
    W_ih[p0:, :k] = -2
    # readout
    if dfa.output_kind in ("accept", "next_set"):
        feat0 = hb + lb
        Rw, rb = phi[feat0:], phi_c[feat0:]
    else:
        ob = F - hb - lb
        codes = np.append(np.arange(1, len(dfa.output_alphabet) + 1), 0)  # last logit = none
        sgn = 2 * _bits(codes, ob) - 1
        Rw = sgn @ phi[hb + lb:]
        rb = sgn @ phi_c[hb + lb:] - (ob - 1)
    L = int(max(np.abs(W).sum(axis=1).max(), np.abs(Rw).sum(axis=1).max(), 1))
    beta_min = sp.log(4 * L - 1)
    beta = _scale(scale) if scale is not None else sp.Max(sp.ceiling(beta_min), 18)
    h0 = -np.ones(N, dtype=np.int64)
    for f in range(F):
        if feats.init[f]:
            h0[offs[f]] = 1
    O = num_outputs(dfa)
    weights = stepped_state_dict(RecurrentBlocks(
        embedding=_identity_embedding(k + 1),
        weight_ih=ExactWeight(W_ih),
        weight_hh=ExactWeight(W),
        bias_ih=ExactWeight(np.zeros(N, dtype=np.int64)),
        bias_hh=ExactWeight(bias),
        h0=ExactWeight(h0, 1, scaled=False),
        readout_weight=ExactWeight(Rw.astype(np.int64)),
        readout_bias=ExactWeight(np.asarray(rb, dtype=np.int64)),
    ))
    module = SteppedRNN(RecurrentNet("rnn", k + 1, k + 1, N, O), blank=k)
    module = load_exact(module, weights, beta, dtype)
    Hs, ls, Ks = sp.symbols("H l K")
    decoder = CodeDecoder(phi[:hb + lb].astype(np.float64), phi_c[:hb + lb].astype(np.float64),
                          hb, lb, low, n)
    argument = (
        f"Units are ±1; every ideal pre-activation is an odd integer (times β). L = {L} is the "
        f"largest row L1 norm on h (point rows: Σ 2^b + Σ_row t). With ε = 1/(2L) each "
        f"pre-activation keeps magnitude ≥ 1/2 and tanh(β/2) ≥ 1 - ε iff β ≥ ln(4L - 1) = "
        f"{float(beta_min):.4f}. β ≥ 18 is also kept so that float32 tanh saturates to exactly ±1 "
        f"and the large integer sums are exact. Chosen β = {beta}."
    )
    return CompiledNetwork(
        machine=dfa, module=module, target="elman", method="compressed", hidden_units=N,
        bound=Hs * S + ls + Ks, params={"H": H, "S": k, "l": lb, "K": int(sum(sizes)),
                                        "Q": n},
        weights=weights, scale=beta, decoder=decoder, reader=OutputReader(dfa.output_kind),
        margin=sp.Rational(1, 2), steps_per_symbol=2, scale_argument=argument,
        abstraction=SteppedUnits(labels=_compressed_labels(dfa, H, lb, feats.names, sizes)),
        info={"low": low, "features": feats.names, "points_per_feature": sizes,
              "worst_case_bound": H * k + lb + F * low, "minsky_bound": n * k,
              "L": L, "beta_min": beta_min},
    )


def _compressed_labels(dfa: DFA, H: int, lb: int, names: tuple[str, ...], sizes: list[int]
                       ) -> tuple[str, ...]:
    """Row units "hi = h, x = a", copy units "lo bit b", point units "feature ≥ κ-th point"."""
    if H * len(dfa.alphabet) + lb + sum(sizes) > MAX_LABELS:
        return ()
    syms = dfa.alphabet.symbols
    return (tuple(f"hi={h} on {a!r}" for h in range(H) for a in syms)
            + tuple(f"lo bit {b}" for b in range(lb))
            + tuple(f"{name}[{p}]" for name, K in zip(names, sizes) for p in range(K)))


@dataclass(frozen=True)
class CodeDecoder:
    """Boundary states → {"state": hi·low + lo read from the sign of each code bit's phi; -1 for
    the sink (or any code ≥ the number of states)}."""

    phi: np.ndarray
    phi_c: np.ndarray
    hb: int
    lb: int
    low: int
    n: int

    def __call__(self, states: np.ndarray) -> dict[str, np.ndarray]:
        bits = (states.astype(np.float64) @ self.phi.T + self.phi_c) > 0
        w = 2 ** np.arange(max(self.hb, self.lb), dtype=np.int64)
        hi = bits[..., :self.hb].astype(np.int64) @ w[:self.hb]
        lo = bits[..., self.hb:].astype(np.int64) @ w[:self.lb]
        q = hi * self.low + lo
        return {"state": np.where(q < self.n, q, -1).astype(np.int64)}


__all__ = ["ArgmaxDecoder", "CodeDecoder", "OutputReader", "SteppedRNN", "compile_compressed",
           "compile_lstm", "compile_minsky", "compile_second_order", "moore_states",
           "num_outputs", "pair_units", "reachable_states", "stepped_state_dict"]
