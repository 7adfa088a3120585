"""Certificates for the compiled stack RNNs (controller + differentiable stack) and the NS-RNN.

**Stack RNNs** (`pdanet.constructions.controllers`, target ``"stack_rnn"``; memories
``grefenstette`` (Grefenstette et al. 2015, Eqs. 1–3), ``joulin_mikolov`` and ``suzgun``
(the superposition update of DuSell & Chiang 2022, App. A.2)). The proof is an induction over
time steps whose hypothesis is *exactness*: after step t the controller state h_t is exactly the
ideal ±1 vector (one unit on), the memory's strengths are exactly 0 or 1 and its values exactly
symbol codes, and the reading r_t is exactly the code of the memory's top (0 when empty).

Abstract configurations are κ = (c, j, R): the controller state c = (machine state, mode) of the
construction, the unit j that is on, and the reading R (a store symbol, or "empty"). They are
derived from the machine's transition table, not from the weights; the reachable set is
over-approximated by a fixpoint in which the part of the memory below its top is an unknown
ρ (after a pop the new top is any symbol ever pushed, or empty). The machine's top X is R in
mode U and the held symbol in a mode H_X (one-operation memories).

*Lemma 0 (simulation invariant).* Memory contents ++ held symbol = the machine's stack (without
⊥). For every case, the memory operation the controller must emit is given by the machine's move
(`controllers._one_op` for the one-operation memories) and the invariant is re-checked
symbolically on [ρ, R] (memory) and the held symbol: the machine's stack after its move equals
the memory after its operation plus the new held symbol, token for token.

*Lemma 1 (controller).* For every case (κ, a) with a live machine move, with inputs exactly
[onehot(a); code(R)] and h = ideal(j): the pre-activation z is enclosed soundly (Lemma E below
where it applies, else `intervals.affine`); the tanh enclosure in the dtype must be the single
point ±1 of the target (the unit of the move taken on, every other unit off). The actions, pushed
vector and output logits are affine in the exact h' and r' (Lemma E), and must equal exactly
the 0/1 strengths of the memory operation and the code of the pushed symbol (targets from the
machine's move), and put the machine's output strictly on top (the readout margin).

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
length (ε' = ε'' = 0). The certificate also runs the memory module itself on every saturated
action sequence of a few steps and checks it bit-for-bit against the discrete stack.

*Induction.* The initial state is exact (checked); Lemma 1 + Lemma 2 map an exact state of κ
to an exact state of a successor κ' in the fixpoint, and the output at every step is the
machine's. Hence agreement at every length, on every unpadded string all of whose prefixes are
live (and, for the Grefenstette memory, whose depth stays below 2^p — automatic for strings of
length ≤ 2^p).

Exact saturation needs tanh(βz) to *round to exactly ±1*: the "ulp" kernel model (tanh within a
few ulps of the true value) can never prove that, so under ``kernel="ulp"`` the certifier falls
back to the "saturating" model (the ulp model plus exact saturation: tanh(z) = ±1 for |z| beyond
a threshold checked on this build's kernels, `intervals.saturation`) and says so in a note. Under the ulp model alone strengths
would only be within ~1e-6 of {0, 1}, and ghost strengths pushed on no-op steps accumulate
without re-saturating (their sum grows linearly in the length): no length-free bound holds there.

**NS-RNN** (`pdanet.constructions.ns`): the network runs Lang's algorithm with the stand-in −L
for log 0. Its reading differs from the exact one only through runs that use a missing
transition (relative mass ≤ ``error_bound(machine, n)`` = exp(n·log(K·w_max/w_min) − L)) and float
rounding. The bound grows exponentially in n, so no length-free bound exists for this argument:
the certificate proves the reading error ≤ bound(n) for n ≤ max_length, the largest n for which
the bound stays below the decision tolerance.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA
from pdanet.automata.pdt import DPDT
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.realtime import U as _U
from pdanet.constructions.realtime import one_op as _one_op
from pdanet.constructions.realtime import store_codes as _codes
from pdanet.errors import CertificationError, InputError
from pdanet.verify import intervals as iv
from pdanet.verify.certificate import (
    Certificate,
    FailingCase,
    Progress,
    check_arguments,
    nonfinite_weights,
    notify,
    overflow_free,
    rejected,
)

_OPS = {"noop": (None, None), "push": (None, "top"), "pop": ("top", None),
        "replace": ("top", "top")}
RHO = "ρ"  # the unknown rest of the memory below its top


# --- the machine, as a table ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Move:
    p2: int
    out: int        # output symbol index, -1 none (transducers)
    op: str         # noop / push / pop / replace
    y: int          # pushed / replacing store code, -1 none


@dataclass(frozen=True)
class _Spec:
    """A real-time DPDA/DPDT as tables: ``moves[(p, a, X)]`` with X a store code (G = ⊥)."""

    Q: int
    K: int
    G: int
    q0: int
    moves: dict
    output: str            # "symbol" or "accept"
    accepting: tuple
    empty_stack: bool
    n_out: int
    states: tuple
    symbols: tuple
    store: tuple           # store symbols by code, then "⊥"


def _spec_dfa(machine: DFA) -> _Spec:
    """A DFA / Mealy machine: no store (G = 0), every move a no-op on the empty memory."""
    if machine.output_kind not in ("accept", "symbol"):
        raise CertificationError(f"{machine!r} has output kind {machine.output_kind!r}; the "
                                 "stack_rnn target compiles recognisers and Mealy machines")
    moves = {}
    for p in range(len(machine.states)):
        for a in range(len(machine.alphabet)):
            p2 = int(machine.table[p, a])
            if p2 >= 0:
                out = int(machine.out_table[p, a]) if machine.output_kind == "symbol" else -1
                moves[(p, a, 0)] = _Move(p2, out, "noop", -1)
    n_out = len(machine.output_alphabet) if machine.output_kind == "symbol" else 0
    return _Spec(len(machine.states), len(machine.alphabet), 0, machine.state_index(machine.start),
                 moves, machine.output_kind, tuple(q in machine.accepting for q in machine.states),
                 False, n_out, tuple(machine.states), tuple(machine.alphabet.symbols), ("⊥",))


def _spec(machine) -> _Spec:
    if isinstance(machine, DFA):
        return _spec_dfa(machine)
    if not isinstance(machine, (DPDA, DPDT)):
        raise CertificationError(
            f"certify_stack_rnn covers real-time DPDAs, DPDTs and DFAs; got {machine!r}. "
            "Check other machines with pn.verify")
    is_pdt = isinstance(machine, DPDT)
    if not machine.is_realtime:
        raise CertificationError(f"{machine!r} has ε-moves; only real-time networks are certified")
    G = len(machine.stack_alphabet)
    moves = {}
    for key, value in machine.transitions.items():
        q, a, x = key
        op, y = machine.op(key)
        if x is BOTTOM and op in ("pop", "replace"):
            raise CertificationError(f"transition {key!r} pops ⊥; the stack_rnn memory has no ⊥")
        out = value[1] if is_pdt else ()
        moves[(machine.state_index(q), machine.alphabet.index(a), machine.stack_code(x))] = _Move(
            machine.state_index(value[0]), machine.output_alphabet.index(out[0]) if out else -1,
            op, -1 if y is None else machine.stack_code(y))
    store = tuple(repr(s) for s in machine.stack_alphabet) + ("⊥",)
    return _Spec(len(machine.states), len(machine.alphabet), G, machine.state_index(machine.start),
                 moves, "symbol" if is_pdt else "accept",
                 tuple(q in machine.accepting for q in machine.states),
                 (not is_pdt) and machine.acceptance == "empty_stack",
                 len(machine.output_alphabet) if is_pdt else 0,
                 tuple(machine.states), tuple(machine.alphabet.symbols), store)


# --- Lemma 0: the simulation invariant, symbolically ---------------------------------------------
def _memory_op(memory: str, G: int, mode: int, R: int, mv: _Move) -> tuple[int, str, int]:
    """(new mode, memory op, pushed code): the Grefenstette stack does the machine's op (a
    replace is pop + push in one step, Eq. 2); one-operation memories use `_one_op`."""
    if memory == "grefenstette":
        return _U, mv.op, mv.y
    return _one_op(memory, mode, G, R, _OPS[mv.op] + (mv.y,))


def _with_held(mem: list, mode: int, G: int) -> list:
    held = None if mode == _U else mode - 1
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


def _step_invariant(memory: str, G: int, mode: int, R: int, mv: _Move
                    ) -> tuple[int, str, int, list] | str:
    """The memory op for a case and the symbolic memory after it, or why the invariant fails."""
    mem = [] if R == G else [RHO, R]
    if mode != _U and mode - 1 == G and mem:
        return "mode H_⊥ with a non-empty memory"
    machine_stack = _with_held(mem, mode, G)
    mode2, op, code = _memory_op(memory, G, mode, R, mv)
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


def _exact_terms_sum(terms: np.ndarray, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
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


def _affine_point(blocks: list[tuple[np.ndarray, np.ndarray]], biases: list[np.ndarray],
                  dtype: torch.dtype) -> iv.Interval:
    """Enclosure of fl(Σ_k W_k x_k + Σ b) at exact points x_k: a point by Lemma E where every x
    entry is 0 or ±1, else `intervals.affine`."""
    xs = np.concatenate([x for _, x in blocks])
    W = np.concatenate([w for w, _ in blocks], axis=1)
    b = np.sum(biases, axis=0) if biases else np.zeros(W.shape[0])
    unit = np.isin(np.abs(xs), (0.0, 1.0)).all()
    if unit:
        terms = np.concatenate([W * xs[None, :]] + [bb[:, None] for bb in biases], axis=1)
        value, ok = _exact_terms_sum(terms, dtype)
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
    """Run the network's memory module on every sequence of saturated actions (exact 0/1
    strengths, exact codes) of ``steps`` steps (default: as many as keep ≤ ``limit``
    sequences, at least 2) and compare each reading, bit for bit, with the discrete stack.
    Returns None, or a description of the first mismatch."""
    module = net.module
    codes = np.asarray(module.codes.codes, dtype=np.float64)
    G = codes.shape[0] - 1
    chans = module.channels
    ops: list[tuple[str, int]] = [("noop", -1), ("pop", -1)] + [("push", y) for y in range(G)]
    if net.method == "grefenstette":
        ops += [("replace", y) for y in range(G)]
    if net.method == "suzgun":
        ops = [op for op in ops if op[0] != "noop"]
    if steps is None:
        steps = 4 if len(ops) < 2 else max(2, int(math.log(limit) // math.log(len(ops))))
    seqs = list(itertools.product(range(len(ops)), repeat=steps))
    B, dtype = len(seqs), net.dtype
    like = torch.zeros(B, 1, dtype=dtype)
    mem = module._memory(B, steps, like)
    stacks: list[list[int]] = [[] for _ in range(B)]
    width = codes.shape[1]
    for t in range(steps):
        act = torch.zeros(B, len(chans), dtype=dtype)
        val = torch.zeros(B, module.values.out_features, dtype=dtype)
        for b, s in enumerate(seqs):
            op, y = ops[s[t]]
            if op in ("push", "replace"):
                val[b, :width] = torch.as_tensor(codes[y])
            for k, ch in enumerate(chans):
                if ch == op or (op == "replace" and ch in ("push", "pop")):
                    act[b, k] = 1.0
            st = stacks[b]
            if op in ("pop", "replace") and st:
                st.pop()
            if op in ("push", "replace"):
                st.append(y)
        with torch.no_grad():
            r = mem.step(act, val, None)
        if mem.k == mem.BLOCK:
            mem.flush()
        want = torch.as_tensor(np.stack([codes[st[-1] if st else G] for st in stacks]), dtype=dtype)
        bad = (r[:, :width] != want).any(1)
        if bad.any():
            b = int(bad.nonzero()[0, 0])
            seq = [ops[k] for k in seqs[b][:t + 1]]
            return (f"memory {net.method}: after saturated actions {seq} the reading is "
                    f"{r[b].tolist()}, the discrete stack's top code is {want[b].tolist()}")
    return None


# --- the stack-RNN certificate ----------------------------------------------------------------------
def _parse_labels(net: CompiledNetwork, linear: bool) -> tuple[int | None, dict]:
    """(index of the start unit, {(c, a, R or None): unit index}) from the declared labels."""
    start, units = None, {}
    for j, lab in enumerate(net.unit_labels):
        if lab == "start":
            start = j
            continue
        c, a, R = lab.split("·")
        units[(int(c[1:]), int(a), None if R == "*" else int(R))] = j
    if not linear and start is None:
        raise CertificationError(f"{net.construction} declares no start unit")
    return start, units


def certify_stack_rnn(machine, net: CompiledNetwork, dtype: torch.dtype | None = None,
                      kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Prove that a compiled stack RNN (target ``"stack_rnn"``) agrees with `machine` at every
    length by exact saturation (module docstring). ``kernel="ulp"`` cannot prove exact
    saturation and falls back to the "saturating" kernel model, with a note; the returned
    certificate's ``kernel`` names the model the proof used. ``progress`` as in `certify`
    (called every few hundred cases and before the memory check). A non-finite weight gives a
    NOT CERTIFIED certificate naming it; every check is an equality or ``slack > 0``, which NaN
    fails."""
    check_arguments(kernel=kernel, dtype=dtype, progress=progress)
    if net.target != "stack_rnn":
        raise CertificationError(f"certify_stack_rnn needs a stack_rnn network, got {net.construction}")
    if dtype is not None and dtype != net.dtype:
        net = net.with_scale(dtype=dtype)
    if net.info.get("store", "stack") != "stack":
        raise CertificationError(
            f"{net.construction} drives a {net.info.get('store')}; the stack certificate covers "
            "stacks only — check queues and deques with pn.verify")
    t0 = time.perf_counter()
    bad = nonfinite_weights(machine, net, kernel, t0)
    if bad is not None:
        return bad
    cert = _certify_with(machine, net, kernel, t0, progress)
    if kernel == "ulp" and not cert.ok and cert.failing is not None \
            and cert.failing.unit_label.startswith("tanh"):
        ulp_fail = cert.failing
        cert = _certify_with(machine, net, "saturating", t0, progress)
        note = ("the ulp kernel model bounds tanh only within a few ulps of ±1, which cannot "
                "prove exact saturation (first such case: " + str(ulp_fail) + "); the proof "
                "uses the saturating model: tanh(z) is exactly ±1 for |z| ≥ "
                f"{iv.saturation(net.dtype).tanh:.6g} ({iv.saturation(net.dtype).checked})")
        cert = _replace(cert, notes=cert.notes + (note,))
    return cert


def _replace(cert: Certificate, **kw) -> Certificate:
    from dataclasses import replace
    return replace(cert, **kw)


def _certify_with(machine, net: CompiledNetwork, kernel: str, t0: float,
                  progress: Progress | None = None) -> Certificate:
    previous = iv.set_kernel_model(kernel)
    try:
        return _run(machine, net, kernel, t0, progress)
    finally:
        iv.set_kernel_model(previous)


def _run(machine, net: CompiledNetwork, kernel: str, t0: float,
         progress: Progress | None = None) -> Certificate:
    spec = _spec(machine)
    module = net.module
    dtype = net.dtype
    memory = net.method
    linear = bool(module.linear)
    G, K = spec.G, spec.K
    modes = 1 if memory == "grefenstette" else G + 2
    codes = np.asarray(module.codes.codes, dtype=np.float64)
    if codes.shape != _codes(G, net.info.get("code", "binary")).shape:
        raise CertificationError("the network's symbol codes do not fit the machine's stack alphabet")
    W = {k: v.detach().double().cpu().numpy() for k, v in module.state_dict().items()}
    start, units = _parse_labels(net, linear)
    H = net.hidden_units
    on, off = (1.0, 0.0) if linear else (1.0, -1.0)
    chans = tuple(module.channels)
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
        return Certificate(
            ok=ok, all_lengths=ok, max_length=None, eps=0.0, scale=str(net.scale),
            dtype=str(dtype).replace("torch.", ""),
            state_margin=float(stats["state_margin"]) if ok else 0.0,
            readout_margin=float(stats["readout_margin"]) if ok else 0.0,
            configs=n_configs, cases=len(done), seconds=time.perf_counter() - t0,
            construction=net.construction, machine=repr(machine), failing=failing,
            notes=tuple(notes), kernel=kernel)

    def desc(node: tuple) -> str:
        c, j, R = node
        p, mode = divmod(c, modes)
        held = "" if mode == _U else f", holding {spec.store[mode - 1]}"
        unit = "h0" if j is None else net.unit_labels[j]
        return (f"controller state (q={spec.states[p]!r}{held}) with unit {unit} on and memory "
                f"top {spec.store[R] if R != G else 'empty'}")

    def ideal(j: int | None) -> np.ndarray:
        h = np.full(H, off)
        if j is not None:
            h[j] = on
        return h

    def expected_output(mv: _Move | None, c: int, mem: list) -> int | bool:
        if spec.output == "symbol":
            return -1 if mv is None else mv.out
        p, mode = divmod(c, modes)
        if spec.empty_stack:
            return not _with_held(mem, mode, G)
        return spec.accepting[p]

    def readout(node: tuple, h: np.ndarray, R: int, want, symbol: str | None
                ) -> FailingCase | None:
        r = codes[R]
        z = _affine_point([(W["out_h.weight"], h), (W["out_r.weight"], r)], [W["out_h.bias"]],
                          dtype)
        if spec.output == "symbol":
            y = spec.n_out if want < 0 else want
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
    h0 = W["h0"]
    start_node = (spec.q0 * modes, start, G)
    want0 = ideal(start)
    if not np.array_equal(h0, want0):
        j = int(np.nonzero(h0 != want0)[0][0])
        return result(False, FailingCase("initial", desc(start_node), None, j,
                                         net.unit_labels[j] if net.unit_labels else f"h{j}",
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
        X = R if mode == _U else mode - 1
        h = ideal(j)
        for a in range(K):
            mv = spec.moves.get((p, a, X))
            if mv is None:
                continue  # the machine dies: outside the prefix language
            sym = str(spec.symbols[a])
            inv = _step_invariant(memory, G, mode, R, mv)
            if isinstance(inv, str):
                return result(False, FailingCase("invariant", desc(node), sym, -1, "memory",
                                                 (math.nan, math.nan), (math.nan, math.nan)),
                              len(seen))
            mode2, op, code, mem2 = inv
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
            if linear:
                hz = W["embedding.weight"][a]
                h2 = iv.Interval.point(hz)
            else:
                x = W["embedding.weight"][a]
                zi = _affine_point([(W["cell.weight_ih"], np.concatenate([x, codes[R]])),
                                    (W["cell.weight_hh"], h)],
                                   [W["cell.bias_ih"], W["cell.bias_hh"]], dtype)
                h2 = iv.tanh(zi, dtype)
                stats["state_margin"] = min(stats["state_margin"],
                                            float(np.min(np.minimum(np.abs(zi.lo), np.abs(zi.hi))
                                                         - z_sat)))
            bad = ~((h2.lo == target) & (h2.hi == target))
            if bad.any():
                u = int(np.nonzero(bad)[0][0])
                return result(False, FailingCase(
                    "step", desc(node), sym, u, f"tanh {net.unit_labels[u]}"
                    if not linear else net.unit_labels[u],
                    (float(h2.lo[u]), float(h2.hi[u])), (float(target[u]), float(target[u]))),
                    len(seen))
            # actions and pushed vector
            act = _affine_point([(W["actions.weight"], target)], [W["actions.bias"]], dtype)
            want_act = np.array([1.0 if (ch == op or (op == "replace" and ch in ("push", "pop")))
                                 else 0.0 for ch in chans])
            val = _affine_point([(W["values.weight"], target)], [W["values.bias"]], dtype)
            checks = [(f"action {ch}", act.lo[k], act.hi[k], want_act[k]) for k, ch in enumerate(chans)]
            if op in ("push", "replace"):
                checks += [(f"pushed value bit {b}", val.lo[b], val.hi[b], codes[code][b])
                           for b in range(width)]
            elif not (np.isfinite(val.lo).all() and np.isfinite(val.hi).all()):
                checks.append(("pushed value (unused)", val.lo[0], val.hi[0], 0.0))
            for label, lo, hi, want in checks:
                if not (lo == hi == want):
                    return result(False, FailingCase("step", desc(node), sym, -1, label,
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
                mem_c = mem2 if (mem2 and mem2[-1] != RHO) else ([] if R2 == G else [RHO, R2])
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


# --- the NS-RNN certificate -------------------------------------------------------------------
def _edited_weight(net: CompiledNetwork) -> FailingCase | None:
    """The first entry where the module's weights differ from the compiled exact weights."""
    compiled = net.float_weights()
    for name, v in net.module.state_dict().items():
        want = compiled.get(name)
        if want is None or tuple(want.shape) != tuple(v.shape):
            return FailingCase("weights", f"weight block {name!r}", None, 0, "shape",
                               (math.nan, math.nan), (math.nan, math.nan))
        diff = (v.detach().cpu() != want.to(v.dtype).cpu()).reshape(-1)
        if bool(diff.any()):
            flat = int(torch.argmax(diff.to(torch.int8)))
            got, exp = float(v.reshape(-1)[flat]), float(want.reshape(-1)[flat])
            return FailingCase("weights", f"weight block {name!r}", None, flat,
                               f"entry {flat} (flattened) differs from the compiled weight",
                               (got, got), (exp, exp))
    return None


def certify_ns_rnn(machine, net: CompiledNetwork, max_length: int | None = None,
                   dtype: torch.dtype | None = None, tol: float = 1e-5,
                   check_length: int = 6, progress: Progress | None = None) -> Certificate:
    """Bound the NS-RNN's deviation from Lang's exact algorithm caused by the stand-in −L for
    log 0, as a function of the length n (module docstring).

    Lemma N1 (ns.py, `error_bound`): the spurious mass of an n-step prefix relative to its true
    mass is ≤ b(n) = exp(n·log(K·w_max/w_min) − L), K = Q(2G+1). Lemma N2: a relative mass error
    ≤ b in the forward weights α moves the normalised reading α/Σα by ≤ b/(1+b) ≤ b per entry
    (|eA − αE| ≤ A·E for 0 ≤ e ≤ E, 0 ≤ α ≤ A). Lemma N3 (the output decision at −L/2): an
    accepted prefix has log weight ≥ n·log w_min, a rejected one only spurious runs, each with a
    factor e^{−L}: ≤ n·log(K·w_max) − L; both sides of −L/2 while n < L / (2·max(log(K·w_max),
    −log w_min)). ``max_length`` is the largest n with b(n) ≤ ``tol`` and N3 (capped by the given
    ``max_length``). b(n) grows exponentially, so no length-free bound follows (at n ≈ L/log K
    the stand-in's runs can outweigh the true ones). Float rounding is not part of the proof: it
    is checked against Lang's algorithm (float64) on every string of length ≤ ``check_length``
    within ``tol``, and stated as such. A non-finite weight gives a NOT CERTIFIED certificate
    naming it; ``tol`` must be a finite real in (0, 1), ``check_length`` a non-negative int and
    ``max_length`` None or a positive int (InputError); ``progress`` as in `certify`."""
    from pdanet.automata import semiring as srm
    from pdanet.automata.weighted import WeightedPDA
    from pdanet.constructions.ns import compare_readings, error_bound

    t0 = time.perf_counter()
    check_arguments(dtype=dtype, progress=progress)
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)) \
            or not 0 < float(tol) < 1:
        raise InputError(f"`tol` must be a finite real in (0, 1), got {tol!r}")
    for name, v, low in (("check_length", check_length, 0), ("max_length", max_length, 1)):
        if v is None and name == "max_length":
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise InputError(f"`{name}` must be an int ≥ {low}{' or None' if low else ''}, "
                             f"got {v!r}")
    if net.target != "ns_rnn":
        raise CertificationError(f"certify_ns_rnn needs an ns_rnn network, got {net.construction}")
    if dtype is not None and dtype != net.dtype:
        net = net.with_scale(dtype=dtype)
    bad_weight = nonfinite_weights(machine, net, "none", t0)
    if bad_weight is not None:
        return bad_weight
    edited = _edited_weight(net)
    if edited is not None:
        return rejected(machine, net, edited, "none", t0,
                        "the module's weights are not the compiled ones (trained or edited): the "
                        "length bound is derived from the compiled weights; use pn.verify")
    wpda = machine if isinstance(machine, WeightedPDA) else WeightedPDA.from_pda(machine)
    mine = (wpda.num_states, wpda.num_stack, len(wpda.alphabet))
    theirs = (net.module.Q, net.module.G, net.module.embedding.num_embeddings - 1)
    if mine != theirs:
        raise CertificationError(
            f"the network was compiled for a machine with (states, stack symbols, input symbols) "
            f"= {theirs}, not for {machine!r} with {mine}; certify the network with the machine "
            "it was compiled from")
    L = float(net.info.get("neg", 10_000))
    W = wpda.weight_tensor(srm.REAL)
    pos = W[W > 0]
    K = wpda.num_states * (2 * wpda.num_stack + 1)
    growth = math.log(K * pos.max() / pos.min()) if pos.size else 0.0
    decide = max(math.log(K * pos.max()), -math.log(pos.min()), 1e-300) if pos.size else 1e-300
    n_read = int((L + math.log(tol)) / growth) if growth > 0 else 10**18
    while n_read > 0 and error_bound(wpda, n_read, L) > tol:
        n_read -= 1
    while error_bound(wpda, n_read + 1, L) <= tol and n_read < 10**18:
        n_read += 1
    n_dec = math.ceil(L / (2 * decide)) - 1
    n_max = min(n_read, n_dec)
    if max_length is not None:
        n_max = min(n_max, int(max_length))
    strings = [()] + [s for n in range(1, check_length + 1)
                      for s in itertools.product(wpda.alphabet.symbols, repeat=n)]
    notify(progress, "ns readings", 0, len(strings))
    bad = compare_readings(wpda, net, strings, rtol=tol, atol=tol)
    notify(progress, "ns readings", len(strings), len(strings))
    failing = None
    if bad is not None:
        failing = FailingCase("step", f"string {bad.string!r}", None, bad.step, bad.field,
                              (float(np.max(bad.got)), float(np.max(bad.got))),
                              (float(np.max(bad.expected)), float(np.max(bad.expected))))
    bound_n = error_bound(wpda, n_max, L)
    notes = (
        (f"reading error from the stand-in −L = −{L:g} for log 0: ≤ b(n) = "
         f"exp(n·log(K·w_max/w_min) − L) with K = {K}, log(K·w_max/w_min) = {growth:.4g}; "
         f"b({n_max:,}) = e^{n_max * growth - L:.4g} ≤ tol = {tol:g}"),
        f"the accept/reject decision at −L/2 is sound for n < L/(2·{decide:.4g}) = {n_dec + 1:,}",
        ("a length-free bound is not possible for this argument: b(n) grows as "
         "(K·w_max/w_min)^n, and runs through a stand-in transition (weight e^{−L}) can, over "
         "enough steps, carry more mass than the true runs — the reading is exact only for the "
         "real −∞"),
        (f"float rounding is not bounded by this certificate; the {str(net.dtype)[6:]} network "
         f"was checked against Lang's algorithm (float64) on all {len(strings):,} strings of "
         f"length ≤ {check_length} within rtol = atol = {tol:g}"),
    )
    return Certificate(
        ok=bad is None and n_max >= 1, all_lengths=False, max_length=n_max, eps=float(bound_n),
        scale=str(net.scale), dtype=str(net.dtype).replace("torch.", ""),
        state_margin=float(tol - bound_n), readout_margin=float(L / 2 - n_max * decide),
        configs=len(strings), cases=len(strings), seconds=time.perf_counter() - t0,
        construction=net.construction, machine=repr(machine), failing=failing, notes=notes,
        kernel="none")
