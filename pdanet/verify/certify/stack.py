"""Certificates for the compiled stack RNNs (`ControllerMemory`: an Elman or linear controller
driving a differentiable stack).

**Stack RNNs** (`pdanet.constructions.controllers`; memories
``grefenstette`` (Grefenstette et al. 2015, Eqs. 1–3), ``joulin_mikolov`` and ``suzgun``
(the superposition update of DuSell & Chiang 2022, App. A.2)). The proof is an induction over
time steps whose hypothesis is *exactness*: after step t the controller state h_t is exactly the
ideal ±1 vector (one unit on), the memory's strengths are exactly 0 or 1 and its values exactly
symbol codes, and the reading r_t is exactly the code of the memory's top (0 when empty).

Abstract configurations are κ = (c, j, R): the controller state c = (machine state, mode) of the
construction, the unit j that is on, and the reading R (a store symbol, or "empty"). They are
derived from the machine's real-time transition table (`pdanet.constructions.realtime.table`,
the one the compiler builds from), not from the weights; the reachable set is
over-approximated by a fixpoint in which the part of the memory below its top is an unknown
ρ (after a pop the new top is any symbol ever pushed, or empty). The machine's top X is R in
mode U and the held symbol in a mode H_X (one-operation memories).

*Lemma 0 (simulation invariant).* Memory contents ++ held symbol = the machine's stack (without
⊥). For every case, the memory operation the controller must emit is given by the machine's move
(`realtime.one_op` for the one-operation memories) and the invariant is re-checked
symbolically on [ρ, R] (memory) and the held symbol: the machine's stack after its move equals
the memory after its operation plus the new held symbol, token for token.

*Lemma 1 (controller).* For every case (κ, a) with a live machine move, with inputs exactly
[onehot(a); code(R)] and h = ideal(j): the pre-activation z is enclosed soundly (Lemma E below
where it applies, else `intervals.affine`); the tanh enclosure in the dtype must be the single
point ±1 of the target (the unit of the move taken on, every other unit off). The actions, pushed
vector and output logits are affine in the exact h' and r' (Lemma E), and must equal exactly
the 0/1 strengths of the memory operation (the store's own encoding, `Store.actions`, whose
discrete step `Store.apply` must be the one Lemma 0 assumes) and the code of the pushed symbol
(targets from the machine's move), and put the machine's output strictly on top (the readout
margin).

*Lemma E (exact sums).* If every term of a sum is a float of the dtype that is an integer multiple
of 2^g and Σ|terms| ≤ 2^(p+g) (p = 24 significand bits for float32, 53 for float64), every
sub-sum is such a multiple of magnitude ≤ 2^(p+g), hence representable: every evaluation order
(blocked, pairwise, fused multiply-add) is exact. Products with a factor in {0, ±1} are exact.

*Lemma 2 (memory exactness).* If the actions are exactly 0/1 (one-hot for the superposition
stacks) and pushed values exactly 0/1 codes, the memory is the discrete stack: Grefenstette —
every strength is 0 or 1, the sums Σ_{j>i} s_j are integers ≤ the depth, u − Σ, the clamps,
s − max(0, ·) and min(s, max(0, 1 − Σ)) are integers in {−n, …, 1}, so exact while the depth is
< 2^p (2^24 = 16,777,216 cells in float32); the read weights are one 1 at the top live cell and 0
elsewhere, so r = code(top) exactly (0·v = 0, 1·v = v). Superposition — each new cell is
push·down + noop·old + pop·up with one weight 1 and the others 0: exact, with no counts, at any
depth. With exact saturated actions this needs no ε: the strengths are exactly 0/1 for every
length (ε' = ε'' = 0). The certificate also runs the network's store itself on every saturated
action sequence of a few steps and checks it bit-for-bit against the discrete stack
(`memory_check`, `protocol.check_store`).

*Induction.* The initial state is exact (checked); Lemma 1 + Lemma 2 map an exact state of κ
to an exact state of a successor κ' in the fixpoint, and the output at every step is the
machine's. Hence agreement at every length, on every unpadded string all of whose prefixes are
live (and, for the Grefenstette memory, whose depth stays below 2^p — automatic for strings of
length ≤ 2^p).

Exact saturation needs tanh(βz) to *round to exactly ±1*: the "ulp" kernel model (tanh within a
few ulps of the true value) can never prove that, so under ``kernel="ulp"`` the certifier falls
back to the "saturating" model (the ulp model plus exact saturation: tanh(z) = ±1 for |z| beyond
a threshold checked on this build's kernels, `intervals.saturation`) and says so in a note
(`core.ulp_then_saturating`). Under the ulp model alone strengths would only be within ~1e-6 of {0, 1}, and ghost strengths pushed on no-op steps accumulate
without re-saturating (their sum grows linearly in the length): no length-free bound holds there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import torch

from pdanet.constructions.abstraction import BufferedController, ControllerMemory
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.realtime import RealtimeTable, U, one_op, op_name, store_codes, table
from pdanet.constructions.stacks.protocol import Store, check_store, holds_top
from pdanet.errors import CertificationError, CompileError
from pdanet.verify import intervals as iv
from pdanet.verify.certify.core import (
    Certificate,
    FailingCase,
    Progress,
    Run,
    begin,
    check_arguments,
    check_pair,
    notify,
    overflow_free,
    ulp_then_saturating,
)

RHO = "ρ"  # the unknown rest of the memory below its top


# --- the machine, as its real-time table ---------------------------------------------------------
class Move(NamedTuple):
    """One entry of the real-time table: successor state, output (−1 none), the ends popped and
    pushed (None or "top"), pushed / replacing store code (−1 none)."""

    p2: int
    out: int
    pop_end: str | None
    push_end: str | None
    y: int

    @property
    def op(self) -> str:
        return op_name(self.pop_end, self.push_end)


@dataclass(frozen=True)
class _Machine:
    """The machine as the certificate reads it: its real-time table and names for messages."""

    tab: RealtimeTable
    states: tuple
    symbols: tuple
    store: tuple           # store symbols by code, then "⊥"

    def move(self, p: int, a: int, X: int) -> Move | None:
        m = self.tab.trans.get((p, a, X))
        return None if m is None else Move(*m)


def _machine(machine) -> _Machine:
    """`realtime.table` of a real-time DPDA, DPDT, DFA, Mealy machine or stack transducer (its
    CompileError as a CertificationError), refusing what the stack memory cannot hold."""
    try:
        tab = table(machine)
    except CompileError as exc:
        raise CertificationError(str(exc)) from None
    if tab.kind != "stack":
        raise CertificationError(
            f"{machine!r} has a {tab.kind}; the stack certificate covers stacks only — check "
            "queues and deques with pn.verify")
    states, symbols = tuple(machine.states), tuple(machine.alphabet.symbols)
    alphabet = machine.store_alphabet if tab.fields == "store" else (
        machine.stack_alphabet if tab.G else ())
    store = tuple(repr(s) for s in alphabet) + ("⊥",)
    for (p, a, x), mv in tab.trans.items():
        if x == tab.G and Move(*mv).pop_end is not None:
            raise CertificationError(f"transition ({states[p]!r}, {symbols[a]!r}, ⊥) pops ⊥; "
                                     "the stack_rnn memory has no ⊥")
    return _Machine(tab, states, symbols, store)


# --- Lemma 0: the simulation invariant, symbolically ---------------------------------------------
def _memory_op(store: Store, G: int, mode: int, R: int, mv: Move) -> tuple[int, str, int]:
    """(new mode, memory op, pushed code): a store with a one-step replace (the Grefenstette
    stack: pop + push in one step, Eq. 2) does the machine's op; one-operation stacks hold the
    top in the controller (`realtime.one_op`)."""
    if not holds_top(store):
        return U, mv.op, mv.y
    return one_op("noop" in store.ops, mode, G, R, (mv.pop_end, mv.push_end, mv.y))


def memory_of(R: int, G: int) -> list:
    """The symbolic memory whose top reads R: empty (R = G), or an unknown rest ρ under R."""
    return [] if R == G else [RHO, R]


def _with_held(mem: list, mode: int, G: int) -> list:
    held = None if mode == U else mode - 1
    return mem + ([held] if held is not None and held != G else [])


def _apply(stack: list, op: str, y: int) -> list | None:
    """A stack op on a token list (None: popping an empty list)."""
    if op in ("pop", "replace"):
        if not stack:
            return None if op == "replace" else []
        stack = stack[:-1]
    if op in ("push", "replace"):
        stack = stack + [y]
    return stack


def step_invariant(store: Store, G: int, mode: int, R: int, mv: Move
                    ) -> tuple[int, str, int, list] | str:
    """The memory op for a case and the symbolic memory after it, or why the invariant fails."""
    mem = memory_of(R, G)
    if mode != U and mode - 1 == G and mem:
        return "mode H_⊥ with a non-empty memory"
    machine_stack = _with_held(mem, mode, G)
    mode2, op, code = _memory_op(store, G, mode, R, mv)
    m2 = _apply(machine_stack, mv.op, mv.y)
    if m2 is None or (machine_stack and machine_stack[-1] == RHO):
        return "the machine pops into the unknown part of its stack"
    if op == "replace":
        mem2 = _apply(mem, "pop", -1) + [code]
    else:
        mem2 = _apply(mem, op, code)
    if _with_held(mem2, mode2, G) != m2:
        return (f"memory {mem2} with held symbol of mode {mode2} is not the machine's stack {m2}")
    return mode2, op, code, mem2


# --- Lemma E: exact sums -------------------------------------------------------------------------
def _lsb_exponent(t: np.ndarray) -> np.ndarray:
    """For nonzero floats t: the exponent g of their lowest set bit (t is an odd multiple of 2^g)."""
    m, e = np.frexp(t)
    M = np.abs(m * 2.0**53).astype(np.int64)
    low = M & -M
    return e - 53 + np.round(np.log2(np.maximum(low, 1))).astype(np.int64)


def exact_terms_sum(terms: np.ndarray, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Rows of terms (float64, each a float of the dtype): (sum, ok) where ``ok`` says Lemma E
    applies to the row, so the dtype computes the sum exactly in any order."""
    p = {torch.float32: 24, torch.float64: 53}[dtype]
    total = np.abs(terms).sum(-1)
    nz = terms != 0
    g = np.where(nz, _lsb_exponent(np.where(nz, terms, 1.0)), 10**6).min(-1)
    cast = terms.astype(np.float32) if dtype == torch.float32 else terms
    representable = (cast.astype(np.float64) == terms).all(-1)   # NaN is not representable
    ok = representable & ((total == 0) | (total <= np.ldexp(1.0, np.minimum(p + g, 1000))))
    ok &= total < float(torch.finfo(dtype).max)                   # no partial sum overflows
    return terms.sum(-1), ok


def affine_point(blocks: list[tuple[np.ndarray, np.ndarray]], biases: list[np.ndarray],
                  dtype: torch.dtype) -> iv.Interval:
    """Enclosure of fl(Σ_k W_k x_k + Σ b) at exact points x_k: a point by Lemma E where every x
    entry is 0 or ±1, else `intervals.affine`."""
    xs = np.concatenate([x for _, x in blocks])
    W = np.concatenate([w for w, _ in blocks], axis=1)
    b = np.sum(biases, axis=0) if biases else np.zeros(W.shape[0])
    unit = np.isin(np.abs(xs), (0.0, 1.0)).all()
    if unit:
        terms = np.concatenate([W * xs[None, :]] + [bb[:, None] for bb in biases], axis=1)
        value, ok = exact_terms_sum(terms, dtype)
        if ok.all():
            return iv.Interval.point(value)
    else:
        ok = np.zeros(W.shape[0], dtype=bool)
        value = np.zeros(W.shape[0])
    n_extra = max(len(biases) - 1, 0)
    enc = iv.affine(W, iv.Interval.point(xs), b, dtype, extra_terms=n_extra)
    # a sum that could overflow the dtype has no rounding bound: NaN, which every check fails
    n = W.shape[1] + n_extra + 1
    absum = np.abs(W) @ np.abs(xs) + sum((np.abs(bb) for bb in biases), np.zeros(W.shape[0]))
    coef = iv.gamma(n, iv.unit_roundoff(dtype)) + iv.gamma(n + 2, 2.0**-53)
    safe = ok | overflow_free(absum, coef, dtype)
    lo, hi = np.where(ok, value, enc.lo), np.where(ok, value, enc.hi)
    return iv.Interval(np.where(safe, lo, np.nan), np.where(safe, hi, np.nan))


# --- Lemma 2's check: the memory module on saturated action sequences ----------------------------
def memory_check(net: CompiledNetwork, steps: int | None = None, limit: int = 20_000
                 ) -> str | None:
    """Run the network's store (``net.module.store``, with the module's symbol codes) on every
    sequence of saturated ops (exact 0/1 actions, exact codes) of ``steps`` steps (default: as
    many as keep ≤ ``limit`` sequences, at least 2) and compare each reading and read-back, bit
    for bit, with the discrete store (`protocol.check_store`). Returns None, or a description of
    the first mismatch."""
    return check_store(net.module.store, net.module.codes, net.dtype, steps, limit)


# --- the stack-RNN certificate ----------------------------------------------------------------------
def certify_stack_rnn(machine, net: CompiledNetwork, dtype: torch.dtype | None = None,
                      kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Prove that a compiled stack RNN (a `ControllerMemory` network) agrees with `machine` at
    every length by exact saturation (module docstring). ``kernel="ulp"`` cannot prove exact
    saturation and falls back to the "saturating" kernel model, with a note; the returned
    certificate's ``kernel`` names the model the proof used. ``progress`` as in `certify`
    (called every few hundred cases and before the memory check). A non-finite weight gives a
    NOT CERTIFIED certificate naming it; every check is an equality or ``slack > 0``, which NaN
    fails."""
    check_arguments(kernel=kernel, dtype=dtype, progress=progress)
    abst = net.abstraction
    if not isinstance(abst, ControllerMemory) or isinstance(abst, BufferedController):
        raise CertificationError(
            f"certify_stack_rnn needs a stack_rnn network, got {net.construction}")
    if abst.store != "stack":
        raise CertificationError(
            f"{net.construction} drives a {abst.store}; the stack certificate covers "
            "stacks only — check queues and deques with pn.verify")
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    mc = _machine(machine)
    codes = np.asarray(run.net.module.codes.codes, dtype=np.float64)
    if codes.shape != store_codes(mc.tab.G, abst.code).shape:
        raise CertificationError("the network's symbol codes do not fit the machine's stack "
                                 "alphabet")
    return ulp_then_saturating(
        lambda k: _prove(mc, Run(machine, run.net, k, run.t0), codes, progress), kernel,
        run.dtype, curable=_tanh_failure)


def _tanh_failure(cert: Certificate) -> bool:
    """Only a controller unit's tanh may need exact saturation."""
    return not cert.ok and cert.failing is not None and cert.failing.unit_label.startswith("tanh")


def _prove(mc: _Machine, run: Run, codes: np.ndarray, progress: Progress | None
           ) -> Certificate:
    """The induction over controller configurations κ = (c, j, R) under ``run.kernel``."""
    net, kernel, dtype = run.net, run.kernel, run.dtype
    abst = net.abstraction
    tab = mc.tab
    module = net.module
    memory, linear = abst.memory, abst.linear
    G, K = tab.G, tab.K
    modes = G + 2 if holds_top(module.store) else 1
    W = module.blocks(numpy=True)
    start = abst.start
    shift = 0 if start is None else 1          # units[j] is controller unit j + shift
    units = {(u.c, u.a, u.R): j + shift for j, u in enumerate(abst.units)}
    names = tuple(abst.labels)
    label = lambda j: names[j] if j < len(names) else f"h{j}"
    H = net.hidden_units
    on, off = (1.0, 0.0) if linear else (1.0, -1.0)
    store = module.store
    chans = tuple(store.channels)
    width = codes.shape[1]
    z_sat = iv.saturation(dtype).tanh
    notes = ["agreement covers every unpadded string whose prefixes are all live",
             "boxes are points (ε = 0): every state, strength and reading is exact (Lemmas 1, 2, E)"]
    if memory == "grefenstette":
        p = 24 if dtype == torch.float32 else 53
        notes.append(f"Grefenstette memory: live-cell counts are exact while the stack depth is "
                     f"< 2^{p} = {2**p:,}, which every string of length ≤ 2^{p} satisfies")
    stats = {"state_margin": math.inf, "readout_margin": math.inf}
    done: set = set()

    def result(ok: bool, failing: FailingCase | None, n_configs: int) -> Certificate:
        return replace(run, configs=n_configs).certificate(
            ok, eps=0.0, state_margin=stats["state_margin"] if ok else 0.0,
            readout_margin=stats["readout_margin"] if ok else 0.0, cases=len(done),
            failing=failing, extra=tuple(notes))

    def desc(node: tuple) -> str:
        c, j, R = node
        p, mode = divmod(c, modes)
        held = "" if mode == U else f", holding {mc.store[mode - 1]}"
        unit = "h0" if j is None else label(j)
        return (f"controller state (q={mc.states[p]!r}{held}) with unit {unit} on and memory "
                f"top {mc.store[R] if R != G else 'empty'}")

    def ideal(j: int | None) -> np.ndarray:
        h = np.full(H, off)
        if j is not None:
            h[j] = on
        return h

    def expected_output(mv: Move | None, c: int, mem: list) -> int | bool:
        if tab.output == "symbol":
            return -1 if mv is None else mv.out
        p, mode = divmod(c, modes)
        if tab.empty_stack:
            return not _with_held(mem, mode, G)
        return tab.accepting[p]

    def readout(node: tuple, h: np.ndarray, R: int, want, symbol: str | None
                ) -> FailingCase | None:
        r = codes[R]
        z = affine_point([(W.out_h_weight, h), (W.out_r_weight, r)], [W.out_h_bias], dtype)
        if tab.output == "symbol":
            y = tab.n_out if want < 0 else want
            others = np.delete(z.hi, y)
            slack = z.lo[y] - others.max()
            req = (float(others.max()), math.inf)
            j = y
        else:
            slack = z.lo[0] if want else -z.hi[0]
            req = (0.0, math.inf) if want else (-math.inf, 0.0)
            j = 0
        stats["readout_margin"] = min(stats["readout_margin"], float(slack))
        if not slack > 0:
            return FailingCase("readout", desc(node), symbol, int(j), f"logit {j}",
                               (float(z.lo[j]), float(z.hi[j])), req)
        return None

    # the initial state
    h0 = W.h0
    start_node = (tab.q0 * modes, start, G)
    want0 = ideal(start)
    if not np.array_equal(h0, want0):
        j = int(np.nonzero(h0 != want0)[0][0])
        return result(False, FailingCase("initial", desc(start_node), None, j, label(j),
                                         (float(h0[j]), float(h0[j])),
                                         (float(want0[j]), float(want0[j]))), 1)
    fc = readout(start_node, h0, G, expected_output(None, start_node[0], []), None)
    if fc is not None:
        return result(False, fc, 1)
    seen = {start_node}
    frontier = [start_node]
    pushed: set[int] = set()
    prev_pushed = -1
    while frontier or len(pushed) != prev_pushed:
        if not frontier:  # new pushed symbols widen what a pop may reveal: revisit all nodes
            prev_pushed = len(pushed)
            frontier = sorted(seen, key=repr)
        node = frontier.pop()
        c, j, R = node
        p, mode = divmod(c, modes)
        X = R if mode == U else mode - 1
        h = ideal(j)
        for a in range(K):
            mv = mc.move(p, a, X)
            if mv is None:
                continue  # the machine dies: outside the prefix language
            sym = str(mc.symbols[a])
            inv = step_invariant(store, G, mode, R, mv)
            if isinstance(inv, str):
                return result(False, FailingCase("invariant", desc(node), sym, -1, "memory",
                                                 (math.nan, math.nan), (math.nan, math.nan)),
                              len(seen))
            mode2, op, code, mem2 = inv
            if op not in store.ops or store.apply(tuple(memory_of(R, G)), op, code) != tuple(mem2):
                return result(False, FailingCase("invariant", desc(node), sym, -1,
                                                 f"memory op {op} ({type(store).__name__})",
                                                 (math.nan, math.nan), (math.nan, math.nan)),
                              len(seen))
            c2 = mv.p2 * modes + mode2
            j2 = units.get((c, a, R), units.get((c, a, None)))
            if j2 is None:
                return result(False, FailingCase("encoding", desc(node), sym, -1,
                                                 "no unit for this move",
                                                 (math.nan, math.nan), (math.nan, math.nan)),
                              len(seen))
            done.add((node, a))
            if len(done) % 256 == 0:
                notify(progress, f"stack cases ({kernel} kernels)", len(done),
                       max(len(done), len(seen) * K))
            # Lemma 1: the controller
            target = ideal(j2)
            x = W.embedding[a]
            if linear:
                h2 = iv.Interval.point(x)
            else:
                zi = affine_point([(W.weight_ih, np.concatenate([x, codes[R]])),
                                    (W.weight_hh, h)], [W.bias_ih, W.bias_hh], dtype)
                h2 = iv.tanh(zi, dtype, kernel)
                stats["state_margin"] = min(stats["state_margin"],
                                            float(np.min(np.minimum(np.abs(zi.lo), np.abs(zi.hi))
                                                         - z_sat)))
            bad = ~((h2.lo == target) & (h2.hi == target))
            if bad.any():
                u = int(np.nonzero(bad)[0][0])
                return result(False, FailingCase(
                    "step", desc(node), sym, u, label(u) if linear else f"tanh {label(u)}",
                    (float(h2.lo[u]), float(h2.hi[u])), (float(target[u]), float(target[u]))),
                    len(seen))
            # actions and pushed vector
            act = affine_point([(W.actions_weight, target)], [W.actions_bias], dtype)
            want_act = np.asarray(store.actions(op), dtype=np.float64)  # the store's encoding
            val = affine_point([(W.values_weight, target)], [W.values_bias], dtype)
            checks = [(f"action {ch}", act.lo[k], act.hi[k], want_act[k])
                      for k, ch in enumerate(chans)]
            if op in ("push", "replace"):
                checks += [(f"pushed value bit {b}", val.lo[b], val.hi[b], codes[code][b])
                           for b in range(width)]
            elif not (np.isfinite(val.lo).all() and np.isfinite(val.hi).all()):
                checks.append(("pushed value (unused)", val.lo[0], val.hi[0], 0.0))
            for what, lo, hi, want in checks:
                if not (lo == hi == want):
                    return result(False, FailingCase("step", desc(node), sym, -1, what,
                                                     (float(lo), float(hi)),
                                                     (float(want), float(want))), len(seen))
            if op in ("push", "replace"):
                pushed.add(code)
            # Lemma 2: the memory is the discrete stack; its possible readings
            if not mem2:
                readings = {G}
            elif mem2[-1] == RHO:
                readings = set(pushed) | {G}
            else:
                readings = {mem2[-1]}
            for R2 in sorted(readings):
                mem_c = mem2 if (mem2 and mem2[-1] != RHO) else memory_of(R2, G)
                node2 = (c2, j2, R2)
                fc = readout(node2, target, R2, expected_output(mv, c2, mem_c), sym)
                if fc is not None:
                    return result(False, fc, len(seen))
                if node2 not in seen:
                    seen.add(node2)
                    frontier.append(node2)
    notify(progress, f"stack cases ({kernel} kernels)", len(done), len(done))
    msg = memory_check(net)
    if msg is not None:
        return result(False, FailingCase("memory", msg, None, -1, "memory module",
                                         (math.nan, math.nan), (math.nan, math.nan)), len(seen))
    notes.append("memory module checked bit-exact against the discrete stack on every saturated "
                 "action sequence of a few steps")
    if linear:
        stats["state_margin"] = math.inf
        notes.append("linear controller: h_t is an embedding row, copied exactly")
    return result(True, None, len(seen))


def certify(machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """A `ControllerMemory` network: `certify_stack_rnn` (boxes are points: ``eps``,
    ``max_configs`` and ``chunk`` do not apply). Arguments are checked by
    `pdanet.verify.certify.certify`."""
    check_pair(machine, net)
    return certify_stack_rnn(machine, net, dtype=dtype, kernel=kernel, progress=progress)


__all__ = ["Move", "affine_point", "certify", "certify_stack_rnn", "exact_terms_sum", "memory_check",
           "memory_of", "step_invariant"]
