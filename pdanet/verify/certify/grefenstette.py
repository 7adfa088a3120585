"""Certificates for the compiled models of Grefenstette et al. (2015) (`GrefenstetteController`:
an Elman or LSTM controller with the paper's sigmoid/tanh heads driving a neural Stack, Queue or
DeQue; `pdanet.models.grefenstette`).

The model (paper §3.4 and Eqs. 1–11): ``h_t = RNN(x_t ⊕ r_{t−1}, h_{t−1})``;
``d_t = σ(W_d h_t + b_d)``, ``u_t = σ(W_u h_t + b_u)``, ``v_t = tanh(W_v h_t + b_v)``,
``o_t = tanh(W_o h_t + b_o)``, logits ``W_y o_t + b_y``; the store steps with (v_t, u_t, d_t)
(Stack Eqs. 1–3, Queue Eqs. 1, 4–5, DeQue Eqs. 6–11) and gives r_t. The output at step t is the
machine's output on its move at step t (acceptance: of the state entered).

The proof is an induction over time steps on the network's weights as they are (compiled,
fine-tuned or perturbed), checked against the machine's real-time table
(`pdanet.constructions.realtime.table`). Abstract configurations are
κ = (p, M, ĥ): the machine state p, the store's *form* M and the controller box ĥ.

- M is the store with only the ends the network reads kept: a stack ``(ρ, T)``, a queue
  ``(F, ρ)``, a deque ``(X)`` or ``(B, ρ, T)``, or empty ``()``; ρ is an unknown, possibly empty,
  sequence of symbols pushed on some earlier step. When a pop uncovers ρ, the form is expanded to
  every possibility (ρ empty, or ρ ending in any symbol ever pushed): an over-approximation of
  the reachable stores, widened until no new symbol is pushed.
- ĥ is an interval box of the controller state (h, and c for the LSTM). The *control* columns
  (start, control units, and the gated units that hold a register, which carry the machine's
  state across steps) are kept as computed; the *data path* columns (``data_units``,
  ``reading_units``: copies of the input's and the reading's symbol bits, and every column that
  the recurrence weighs by at most 1 — gated copies read only by the heads in the same step) are
  widened to [−1, 1]. Widening is sound for any column (every h lies in [−1, 1]); it only costs
  precision. So the cases are over the finite control, not over the symbols those columns held,
  and a |V| = 128 task stays a few thousand configurations.

*Lemma 0 (simulation invariant).* The network's store is, cell for cell, the machine's store
(without ⊥) with every symbol X stored as its ±1 vector vec(X) = 2·code(X) − 1 (`codes`, presence
bit 1), and the reading r_{t−1} is, per slot (stack: top; queue: front; deque: top, bottom), vec
of the symbol at that end (0 when empty). Every store does the machine's noop, push, pop and
(stack, queue) replace in one step (`realtime.op_name`, `protocol.op_of`), so no symbol is held
in the controller.

*Lemma 1 (controller, heads and readout).* For every κ and input symbol a with a live machine
move on (p, a, X) (X the symbol at the end the machine reads in p), with inputs exactly
[emb(a); r(M)] and h ∈ ĥ: the pre-activations are enclosed with rounding (`intervals.affine`, any
summation order), then σ/tanh under the kernel model (`intervals.sigmoid`/`tanh`; the LSTM cell
by `intervals.lstm_cell`, h = o·tanh c by `intervals.mul`). The heads must enclose to the exact
points the memory lemma needs: the actions (d, u per slot, Eq. 1/6–9) exactly the 0/1 encoding
of the machine's op (`Store.actions`), the pushed vector v_t in the pushed slot exactly vec(y);
the logits must put the machine's output strictly on top (acceptance: the sign of the single
logit). The successor κ' = (p', M', ĥ') takes ĥ' from the enclosure (data columns widened; for
the LSTM the cell's data columns must lie in [−1, 1]).

*Lemma 3 (decoded state).* `pn.verify` also compares the controller state its decoder reads
from h_t (the most active unit's state when positive, `controllers.active_units`; a register's
member from its holders' bits > 1/2). For every successor box the most active unit j* of the
lower ends is positive and every unit standing for another state stays below it (or ties it
from a later index, argmax taking the first), and the decoding at both ends of the box (monotone
in each register bit) is the machine's next state. The LSTM's on units are o·tanh c with o and
c exact: tanh of a float32 point is the kernel's own value (`tanh_point`, equal on
``torch.tanh`` and inside ``nn.LSTMCell``), so ties are exact.

*Lemma 2 (memory exactness), per store.* If the actions are exactly 0/1 with at most one push
and one pop per end, and every pushed vector is exactly vec(y), the store is the discrete one:
Stack (Eqs. 1–3): every strength is 0 or 1, the suffix sums Σ_{j>i} s_j are integers ≤ the depth,
``u − Σ``, the clamps and ``min(s_i, max(0, 1 − Σ))`` are integers, so every step is exact while
the depth is < 2^p (p = 24 in float32); the read weights are one 1 at the top live cell and 0
elsewhere, so r = vec(top) exactly (0·v = 0, 1·v = v for finite v). Queue (Eqs. 1, 4–5): the same
with the prefix sums Σ_{j<i} s_j (pops and reads at the front). DeQue (Eqs. 6–11): the top pop
(Eq. 7) uses suffix sums and the bottom pop (Eq. 8) prefix sums, each over 0/1 strengths, and the
two reads (Eqs. 10–11) are one-hot at the top and bottom live cells; a push with strength 0 (the
slot not pushed, or a no-op) adds a cell of strength exactly 0, which no sum or read sees. The
certificate also runs the network's store itself on every saturated action sequence of a few
steps and compares it bit for bit with the discrete store (`stack.memory_check`,
`protocol.check_store`).

*Induction.* The initial state (h_0, c_0, r_0 = 0, empty store) is the start configuration and
its readout is checked; Lemmas 1 and 2 map every concrete state covered by κ to one covered by a
successor in the fixpoint, with the machine's output and decoded state at every step. Hence agreement at every
length on every unpadded string whose prefixes are live and whose store stays shallower than 2^p
(automatic for strings of length ≤ 2^24 in float32).

Kernel facts. Exact 0/1 and ±1 heads need kernels that round to exactly 0, 1 and ±1: the ulp
model can never prove that, so under ``kernel="ulp"`` the certifier retries under "saturating"
(as `core.ulp_then_saturating` would, without the ulp attempt that cannot succeed): σ(z) = 1 and tanh(z) = ±1 beyond the thresholds of
`intervals.saturation`, and σ(−z) = 0 beyond the threshold `sigmoid_zero` finds by evaluating
every float32 of its range on this build's ``torch.sigmoid`` and ``nn.LSTMCell`` gates. Only
float32 is scanned (float64 has too many floats per binade): a float64 network is not certified.
Assumed: the σ = 1 and tanh = ±1 thresholds that `intervals.saturation` scans on
``torch.sigmoid``/``torch.tanh`` and ``nn.LSTM`` hold for ``nn.LSTMCell``'s gates too (ATen's
elementwise kernels on CPU); the σ = 0 facts and the cell's tanh points are probed on
``nn.LSTMCell`` itself.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np
import torch

from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.realtime import RealtimeTable, table
from pdanet.constructions.stacks.protocol import op_of, pushed
from pdanet.errors import CertificationError, CompileError
from pdanet.models.grefenstette import GrefenstetteController
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
)
from pdanet.verify.certify.stack import memory_check

RHO = "ρ"  # an unknown, possibly empty, run of symbols pushed earlier
NAN2 = (math.nan, math.nan)


# --- kernel fact: σ(−z) = 0 exactly ---------------------------------------------------------------
def _bits(x: float) -> int:
    return int(torch.tensor(x, dtype=torch.float32).view(torch.int32))


@functools.cache
def _probes():
    """Four `nn.LSTMCell` probes of width `_N` whose value *is* a kernel's: the forget gate
    (c' = f·1 + σ(64)·tanh(0) = f), the output gate (h = o·tanh(σ(64)·tanh(64)) = o·tanh 1) and
    the input gate (c' = i·tanh 64), unit j's gate reading input j (identity weights); and the
    cell's tanh (c' = σ(64)·c + σ(64)·tanh(0) = c, h = σ(64)·tanh c' = tanh c)."""
    n = _N
    cells = [torch.nn.LSTMCell(n, n) for _ in range(4)]
    eye = torch.eye(n)
    with torch.no_grad():
        for cell in cells:
            for prm in cell.parameters():
                prm.zero_()
        (fw, _, fb, _), (ow, _, ob, _), (iw, _, ib, _), (_, _, tb, _) = (
            tuple(cell.parameters()) for cell in cells)  # weight_ih, weight_hh, bias_ih, bias_hh
        fw[n:2 * n] = -eye                               # gate rows: i, f, g, o
        fb[:n] = 64.0
        ow[3 * n:] = -eye
        ob[:n] = 64.0
        ob[2 * n:3 * n] = 64.0
        iw[:n] = -eye
        ib[2 * n:3 * n] = 64.0
        tb[:2 * n] = 64.0                                # tanh probe: c' = 1·c + 1·tanh(0) = c
        tb[3 * n:] = 64.0                                # h = σ(64)·tanh(c) = tanh(c)
    return cells


_N = 16
_ZERO_FROM = 80.0                 # σ(−z) for z < 80 is a normal float32, never 0
_CHECKED: dict[tuple[int, int], bool] = {}
#: at most this many floats are evaluated for one enclosure (beyond it: not claimed 0)
ZERO_SCAN_LIMIT = 1 << 22


def sigmoid_zero_on(lo: float, hi: float) -> bool:
    """Whether every kernel a float32 `GrefenstetteRNN` runs returns σ(−z) = 0 exactly for every
    float32 z in [lo, hi] (80 ≤ lo ≤ hi): ``torch.sigmoid`` (the heads) and the input, forget and
    output gates of ``nn.LSTMCell`` (`_probes`), every float of the range evaluated (at most
    `ZERO_SCAN_LIMIT`), memoised per range. Assumed, as in `intervals.saturation`: a kernel's
    value depends on its input element alone."""
    if lo > hi:
        return True                                   # no float32 in the range
    if not (_ZERO_FROM <= lo and hi < math.inf):
        return False
    b0, b1 = _bits(lo), _bits(hi)
    if (b0, b1) in _CHECKED:
        return _CHECKED[(b0, b1)]
    if b1 - b0 + 1 > ZERO_SCAN_LIMIT:
        return False
    z = torch.arange(b0, b1 + 1, dtype=torch.int32).view(torch.float32)
    z = torch.cat([z, z[-1:].expand((-len(z)) % _N)])            # _N distinct floats per row
    ok = bool((torch.sigmoid(-z) == 0).all())
    if ok:
        fcell, ocell, icell, _ = _probes()
        with torch.no_grad():
            x = z.reshape(-1, _N)
            zero, one = torch.zeros_like(x), torch.ones_like(x)
            ok = (bool((fcell(x, (zero, one))[1] == 0).all())
                  and bool((ocell(x, (zero, zero))[0] == 0).all())
                  and bool((icell(x, (zero, zero))[1] == 0).all()))
    _CHECKED[(b0, b1)] = ok
    return ok


_TANH_AT: dict[float, float | None] = {}


def tanh_point(c: float) -> float | None:
    """The float32 value of tanh(c) for a float32 c, where ``torch.tanh`` and the tanh of c
    inside ``nn.LSTMCell`` (`_probes`) agree on it (the kernel is a function of its input, as
    `intervals.saturation` assumes), else None. Memoised."""
    if c not in _TANH_AT:
        x = torch.full((1, _N), c, dtype=torch.float32)
        with torch.no_grad():
            cell = _probes()[3](torch.zeros_like(x), (torch.zeros_like(x), x))[0]
        t = torch.tanh(x)
        _TANH_AT[c] = float(t[0, 0]) if bool((cell == t).all()) else None
    return _TANH_AT[c]


def _cell_tanh(c: iv.Interval, dtype: torch.dtype, kernel: str) -> iv.Interval:
    """`intervals.tanh` of the LSTM cell, with the kernel's own value where c is a float32
    point (`tanh_point`), under the "saturating" model."""
    out = iv.tanh(c, dtype, kernel)
    if kernel != "saturating" or dtype != torch.float32:
        return out
    lo, hi = out.lo.copy(), out.hi.copy()
    pts = (c.lo == c.hi) & np.isfinite(c.lo)
    for v in np.unique(c.lo[pts]):
        t = tanh_point(float(v)) if np.float32(v) == v else None
        if t is not None:
            at = pts & (c.lo == v)
            lo[at], hi[at] = t, t
    return iv.Interval(lo, hi)


def _f32_inside(lo: float, hi: float) -> tuple[float, float]:
    """The least and the largest float32 in [lo, hi] (an empty range, lo > hi, when none)."""
    f_lo, f_hi = np.float32(lo), np.float32(hi)
    if f_lo < lo:
        f_lo = np.nextafter(f_lo, np.float32(np.inf))
    if f_hi > hi:
        f_hi = np.nextafter(f_hi, np.float32(-np.inf))
    return float(f_lo), float(f_hi)


def _sigmoid(a: iv.Interval, dtype: torch.dtype, kernel: str) -> iv.Interval:
    """`intervals.sigmoid`, plus σ(z) = 0 exactly where every float32 of the enclosure has been
    evaluated to 0 on this build's kernels (`sigmoid_zero_on`), under the "saturating" model."""
    out = iv.sigmoid(a, dtype, kernel)
    if kernel != "saturating" or dtype != torch.float32:
        return out
    cand = a.hi <= -_ZERO_FROM
    zero = np.zeros(a.lo.shape, dtype=bool)
    if cand.any():
        pairs = np.stack([-a.hi[cand], -a.lo[cand]], 1)
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        ok = np.array([sigmoid_zero_on(*_f32_inside(lo, hi)) for lo, hi in uniq], dtype=bool)
        zero[cand] = ok[inv.reshape(-1)]
    return iv.Interval(np.where(zero, 0.0, out.lo), np.where(zero, 0.0, out.hi))


# --- the store's form -------------------------------------------------------------------------------
def _expand(mem: tuple, reads: frozenset, pushed_syms: set) -> list[tuple]:
    """The forms covering ``mem`` (tokens: store codes and ρ) with every read end known."""
    out: list[tuple] = []
    stack = [mem]
    while stack:
        m = stack.pop()
        m = tuple(t for i, t in enumerate(m) if not (t == RHO and i and m[i - 1] == RHO))
        if "top" in reads and m and m[-1] == RHO:
            stack.append(m[:-1])
            stack.extend(m[:-1] + (RHO, z) for z in sorted(pushed_syms))
            continue
        if "bottom" in reads and m and m[0] == RHO:
            stack.append(m[1:])
            stack.extend((z, RHO) + m[1:] for z in sorted(pushed_syms))
            continue
        out.append(_canon(m, reads))
    return sorted(set(out), key=repr)


def _canon(m: tuple, reads: frozenset) -> tuple:
    """Keep the read ends; everything between becomes ρ."""
    if not m:
        return ()
    if reads == frozenset({"top"}):
        return (RHO, m[-1])
    if reads == frozenset({"bottom"}):
        return (m[0], RHO)
    if len(m) == 1:
        return m
    return (m[0], RHO, m[-1])


def _end(m: tuple, end: str, G: int) -> int:
    if not m:
        return G
    return m[-1] if end == "top" else m[0]


# --- the machine --------------------------------------------------------------------------------
def _table(machine) -> RealtimeTable:
    try:
        tab = table(machine)
    except CompileError as exc:
        raise CertificationError(str(exc)) from None
    return tab


def _weights(module) -> dict[str, np.ndarray]:
    """`GrefenstetteRNN.weight_blocks`, with the action rows in the store's channel order
    (d, u per slot) and the controller's [W_ih | W_hh]."""
    W = module.weight_blocks()
    S = module.slots
    W["act_w"] = np.stack([W[f"{h}_w"][s] for s in range(S) for h in ("push", "pop")])
    W["act_b"] = np.stack([W[f"{h}_b"][s] for s in range(S) for h in ("push", "pop")])
    W["cell_w"] = np.concatenate([W["w_ih"], W["w_hh"]], axis=1)
    return W


# --- the certificate ----------------------------------------------------------------------------
def certify(machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Prove that a compiled Grefenstette model (`GrefenstetteController`) agrees with `machine`
    at every length by exact saturation (module docstring). ``kernel="ulp"`` cannot prove exact
    saturation and falls back to the "saturating" model, with a note; ``max_configs`` bounds
    the abstract configurations explored (beyond it: NOT CERTIFIED); ``eps`` and ``chunk`` do
    not apply (boxes are computed, not searched). CertificationError for another network or a
    machine that is not the one it was compiled from; a non-finite weight gives a NOT CERTIFIED
    certificate naming it."""
    check_arguments(eps=eps, chunk=chunk, max_configs=max_configs, kernel=kernel, dtype=dtype,
                    progress=progress)
    check_pair(machine, net)
    abst = net.abstraction
    if not isinstance(abst, GrefenstetteController):
        raise CertificationError(
            f"the Grefenstette certificate needs a grefenstette_rnn/grefenstette_lstm network, "
            f"got {net.construction}")
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    tab = _table(machine)
    if tab.empty_stack:
        raise CertificationError(f"{machine!r} accepts by empty stack, which model "
                                 f"{net.construction} cannot read (its output precedes r_t)")
    store = run.net.module.store
    if tab.kind != store.kind:
        raise CertificationError(f"{machine!r} has a {tab.kind} but the network drives a "
                                 f"{store.kind}")
    codes = np.asarray(run.net.module.codes.codes, dtype=np.float64)
    if codes.shape[0] != tab.G + 1:
        raise CertificationError("the network's symbol codes do not fit the machine's store "
                                 f"alphabet ({codes.shape[0] - 1} codes, {tab.G} symbols)")
    prove = lambda k: _prove(machine, tab, abst, Run(machine, run.net, k, run.t0), codes,
                             max_configs, chunk, progress)
    if kernel != "ulp":
        return prove(kernel)
    # the ulp model never encloses a head to exactly 0, 1 or ±1, which every step needs: the
    # proof goes straight to the saturating model (what `ulp_then_saturating` would retry)
    z = iv.saturation(run.dtype)
    cert = prove("saturating")
    what = ("would fail at the first head" if cert.ok else "fails as well")
    note = (f"under the ulp kernel model alone the proof {what} (no head is ever exactly 0/1); "
            f"this one adds exact saturation of the kernels (σ(z) = 1 for z ≥ {z.sigmoid:.6g}, "
            f"tanh(z) = ±1 for |z| ≥ {z.tanh:.6g}; checked: {z.checked})")
    return replace(cert, notes=cert.notes + (note,))


def _prove(machine, tab: RealtimeTable, abst: GrefenstetteController, run: Run,
           codes: np.ndarray, max_configs: int, chunk: int, progress: Progress | None
           ) -> Certificate:
    net, kernel, dtype = run.net, run.kernel, run.dtype
    module = net.module
    store = module.store
    lstm = module.controller_kind == "lstm"
    W = _weights(module)
    H, m = net.hidden_units, module.width
    G, K = tab.G, tab.K
    reads = frozenset(store.reads)
    labels = tuple(abst.labels)
    label = lambda j: labels[j] if j < len(labels) else f"h{j}"
    states = tuple(repr(q) for q in machine.states)
    symbols = tuple(str(s) for s in machine.alphabet.symbols) if hasattr(
        machine.alphabet, "symbols") else tuple(str(s) for s in machine.alphabet)
    vec = np.vstack([2.0 * codes[:G] - 1.0, np.zeros((1, m))])          # ±1 vectors, empty 0
    # boxed columns: the data path, and every column the recurrence weighs by at most 1 (the
    # compiled weights are 0 or ≥ β/2 there; any choice is sound, the box only costs precision)
    data = np.abs(W["w_hh"]).max(0) <= 1.0
    data[list(abst.data_units) + list(abst.reading_units)] = True
    emb = W["embedding"]
    b_cell = W["b_ih"] + W["b_hh"]
    sat = iv.saturation(dtype) if dtype == torch.float32 else None
    thr_t = sat.tanh if sat is not None else math.inf
    thr_s = min(sat.sigmoid, _ZERO_FROM) if sat is not None else math.inf
    stats = {"state_margin": math.inf, "readout_margin": math.inf}
    notes = [("agreement covers every unpadded string whose prefixes are all live, and whose "
              "store stays shallower than 2^24 cells in float32 (every string of length ≤ 2^24)"),
             ("data-path columns (copies of symbol bits) are boxed to [−1, 1]: cases range over "
              "the finite control and the store's read ends, not over the symbols copied")]
    if dtype != torch.float32:
        notes.append("exact saturation is checked on the kernels in float32 only: a float64 "
                     "network is not certified")
    cases = [0]

    def result(ok: bool, failing: FailingCase | None, n: int) -> Certificate:
        return replace(run, configs=n).certificate(
            ok, eps=0.0, state_margin=stats["state_margin"] if ok else 0.0,
            readout_margin=stats["readout_margin"] if ok else 0.0, cases=cases[0],
            failing=failing, extra=tuple(notes))

    def show(mem: tuple) -> str:
        return "[" + ", ".join(t if t == RHO else (machine_store[t] if t < G else "⊥")
                               for t in mem) + "]"

    machine_store = _store_names(machine, G)

    def desc(p: int, mem: tuple, h: iv.Interval) -> str:
        on = [label(j) for j in range(H) if not data[j] and h.lo[j] > 0.25]
        return f"state {states[p]}, store {show(mem)}, controller units on {on}"

    def want_out(mv, p2: int | None):
        if tab.output == "symbol":
            return tab.n_out if (mv is None or mv[1] < 0) else mv[1]
        return bool(tab.accepting[p2])

    def readout(h: iv.Interval) -> iv.Interval:
        o = iv.tanh(iv.affine(W["out_w"], h, W["out_b"], dtype), dtype, kernel)
        return iv.affine(W["readout_w"], o, W["readout_b"], dtype)

    def readout_slack(z: iv.Interval, want) -> tuple[np.ndarray, int, tuple]:
        """Slack per row (NaN fails) for the wanted output(s)."""
        if tab.output == "symbol":
            y = np.asarray(want)
            rows = np.arange(len(y))
            others = z.hi.copy()
            others[rows, y] = -np.inf
            best = others.max(1)
            return z.lo[rows, y] - best, y, best
        w = np.asarray(want, dtype=bool)
        return np.where(w, z.lo[:, 0], -z.hi[:, 0]), np.zeros(len(w), dtype=int), None

    # the decoded controller state (`pn.verify` compares it): the most active unit's state when
    # positive (`controllers.active_units`), registers from their holders' bits (> 1/2)
    R_size = module.reading_size

    def decoded(rows: np.ndarray) -> np.ndarray:
        st = np.zeros((len(rows), 1, H + R_size + 2))
        st[:, 0, :H] = rows
        st[:, 0, H + R_size + 1:] = -1
        return np.asarray(net.decoder(st)["state"])[:, 0]

    probe = decoded(2.0 * np.eye(H) - 1.0)          # the state each unit stands for

    def decodes_to(hb: iv.Interval, want: np.ndarray) -> np.ndarray:
        """Rows of ``hb`` every point of which decodes to ``want``: the most active unit j* of
        the lower ends is positive, every other unit of another state stays below it (or ties
        it from a later index: argmax takes the first), and the decoding at both ends — monotone
        in each register bit — is ``want``."""
        rows = np.arange(len(want))
        js = hb.lo.argmax(1)
        L = hb.lo[rows, js]
        idx = np.arange(H)[None, :]
        cols = ((probe[None, :] == probe[js][:, None]) | (hb.hi < L[:, None])
                | ((idx > js[:, None]) & (hb.hi <= L[:, None])))
        return ((L > 0) & cols.all(1) & (decoded(hb.lo) == want) & (decoded(hb.hi) == want))

    # the initial state
    h0 = iv.Interval.point(W["h0"])
    c0 = iv.Interval.point(W["c0"]) if lstm else None
    z0 = readout(iv.Interval(h0.lo[None], h0.hi[None]))
    want0 = want_out(None, tab.q0)
    sl, y, best = readout_slack(z0, [want0])
    start_mem: tuple = ()
    if not sl[0] > 0:
        j = int(y[0])
        req = (float(best[0]), math.inf) if best is not None else (
            (0.0, math.inf) if want0 else (-math.inf, 0.0))
        return result(False, FailingCase("readout", desc(tab.q0, start_mem, h0), None, j,
                                         f"logit {j}", (float(z0.lo[0, j]), float(z0.hi[0, j])),
                                         req), 1)
    stats["readout_margin"] = float(sl[0])
    if not decodes_to(iv.Interval(h0.lo[None], h0.hi[None]), np.array([tab.q0]))[0]:
        j = int(h0.lo.argmax())
        return result(False, FailingCase("initial", desc(tab.q0, start_mem, h0), None, j,
                                         "decoded controller state of h_0",
                                         (float(h0.lo[j]),) * 2, (0.0, math.inf)), 1)

    def key(p: int, mem: tuple, h: iv.Interval, c: iv.Interval | None) -> tuple:
        parts = [h.lo[~data], h.hi[~data]] + ([c.lo[~data], c.hi[~data]] if lstm else [])
        return (p, mem) + tuple(np.ascontiguousarray(x).tobytes() for x in parts)

    nodes: dict = {}
    start_key = key(tab.q0, start_mem, h0, c0)
    nodes[start_key] = (tab.q0, start_mem, h0, c0)
    frontier = [start_key]
    pushed_syms: set[int] = set()
    expansions: dict = {}
    prev_pushed = -1
    x_emb = emb
    while frontier or len(pushed_syms) != prev_pushed:
        if not frontier:  # new pushed symbols widen what a pop may uncover: revisit every node
            prev_pushed = len(pushed_syms)
            frontier = sorted(nodes, key=repr)
        batch = []                                 # nodes enclosed together, ≥ `chunk` cases
        rows = 0
        while frontier and rows < chunk:
            p, mem, h, c = nodes[frontier.pop()]
            X = _end(mem, "top" if tab.reads_top[p] else "bottom", G)
            live = [(a, mv) for a in range(K) if (mv := tab.trans.get((p, a, X))) is not None]
            if live:
                batch.append((p, mem, h, c, live))
                rows += len(live)
        if not batch:
            continue
        node_of = np.repeat(np.arange(len(batch)), [len(b[4]) for b in batch])
        live = [(i, a, mv) for i, b in enumerate(batch) for a, mv in b[4]]
        n = len(live)
        A = np.array([a for _, a, _ in live])
        where = lambda k, batch=batch, node_of=node_of: desc(*batch[node_of[k]][:3])
        r = np.stack([np.concatenate([vec[_end(b[1], e, G)] for e in store.reads])
                      for b in batch])[node_of]
        hlo = np.stack([b[2].lo for b in batch])[node_of]
        hhi = np.stack([b[2].hi for b in batch])[node_of]
        z = iv.affine(W["cell_w"], iv.Interval(np.concatenate([x_emb[A], r, hlo], axis=1),
                                               np.concatenate([x_emb[A], r, hhi], axis=1)),
                      b_cell, dtype, extra_terms=1)
        if lstm:                                    # torch's gate order i, f, g, o
            gi = _sigmoid(z[:, :H], dtype, kernel)
            gf = _sigmoid(z[:, H:2 * H], dtype, kernel)
            gg = iv.tanh(z[:, 2 * H:3 * H], dtype, kernel)
            go = _sigmoid(z[:, 3 * H:], dtype, kernel)
            cb = iv.Interval(np.stack([b[3].lo for b in batch])[node_of],
                             np.stack([b[3].hi for b in batch])[node_of])
            c2 = iv.lstm_cell(gf, cb, gi, gg, dtype)
            tc = _cell_tanh(c2, dtype, kernel)
            h2 = iv.mul(go, tc, dtype)
            # o exactly 0 or 1 times an exact tanh is exact (`mul` widens even exact products)
            ex = (go.lo == go.hi) & np.isin(go.lo, (0.0, 1.0)) & (tc.lo == tc.hi)
            h2 = iv.Interval(np.where(ex, go.lo * tc.lo, h2.lo), np.where(ex, go.lo * tc.lo, h2.hi))
            h2 = iv.Interval(np.maximum(h2.lo, -1.0), np.minimum(h2.hi, 1.0))  # |o·tanh c| ≤ 1
        else:
            c2 = None
            h2 = iv.tanh(z, dtype, kernel)
        za = iv.affine(W["act_w"], h2, W["act_b"], dtype)
        act = _sigmoid(za, dtype, kernel)
        zv = iv.affine(W["value_w"], h2, W["value_b"], dtype)
        val = iv.tanh(zv, dtype, kernel)
        zr = readout(h2)
        # the machine's moves (Lemma 0): store ops, their 0/1 actions, pushed codes per slot
        want_act = np.empty((n, len(store.channels)))
        want_v = np.full((n, val.lo.shape[1]), np.nan)
        ops = []
        for k, (i, a, (_, _, pe, ue, yy)) in enumerate(live):
            op = op_of(store, pe, ue)
            if op is None or (pe is not None and not batch[i][1]):
                what = (f"the machine's op (pop {pe}, push {ue}) is no one-step op of "
                        f"{type(store).__name__}" if op is None else
                        "the machine pops its empty store")
                return result(False, FailingCase("invariant", where(k), symbols[a], -1,
                                                 what, NAN2, NAN2), len(nodes))
            ops.append(op)
            want_act[k] = store.actions(op)
            for sl_, y in enumerate(pushed(store, op, yy)):
                if y >= 0:
                    want_v[k, sl_ * m:(sl_ + 1) * m] = vec[y]
        cases[0] += n
        # Lemma 1: the heads at the exact points Lemma 2 needs
        need_v = ~np.isnan(want_v)
        bad_act = ~((act.lo == want_act) & (act.hi == want_act))
        bad_v = need_v & ~((val.lo == want_v) & (val.hi == want_v))
        for bad, got, what, wants in ((bad_act, act, "action", want_act),
                                      (bad_v, val, "pushed value", want_v)):
            if bad.any():
                k, j = (int(i) for i in np.argwhere(bad)[0])
                name = (f"action {store.channels[j]}" if what == "action"
                        else f"pushed value v[{j}]")
                return result(False, FailingCase("step", where(k), symbols[A[k]], j, name,
                                                 (float(got.lo[k, j]), float(got.hi[k, j])),
                                                 (float(wants[k, j]),) * 2), len(nodes))
        gap_a = np.minimum(np.abs(za.lo), np.abs(za.hi)) - thr_s
        gap_v = np.where(need_v, np.minimum(np.abs(zv.lo), np.abs(zv.hi)) - thr_t, np.inf)
        stats["state_margin"] = min(stats["state_margin"], float(gap_a.min()),
                                    float(gap_v.min()))
        wants_out = [want_out(mv, mv[0]) for _, _, mv in live]
        sl, yv, best = readout_slack(zr, wants_out)
        if not (sl > 0).all():
            k = int(np.nonzero(~(sl > 0))[0][0])
            j = int(yv[k])
            req = (float(best[k]), math.inf) if best is not None else (
                (0.0, math.inf) if wants_out[k] else (-math.inf, 0.0))
            return result(False, FailingCase("readout", where(k), symbols[A[k]], j,
                                             f"logit {j}", (float(zr.lo[k, j]),
                                                            float(zr.hi[k, j])), req),
                          len(nodes))
        stats["readout_margin"] = min(stats["readout_margin"], float(sl.min()))
        bad_state = ~decodes_to(h2, np.array([mv[0] for _, _, mv in live]))
        if bad_state.any():
            k = int(np.nonzero(bad_state)[0][0])
            j = int(h2.lo[k].argmax())
            return result(False, FailingCase(
                "state", where(k), symbols[A[k]], j, "decoded controller state (most active "
                "unit, `pn.verify`'s nearest configuration)", (float(h2.lo[k, j]),
                                                                float(h2.hi[k, j])),
                (0.0, math.inf)), len(nodes))
        # the successors: control columns as computed, data-path columns boxed to [−1, 1]
        if lstm:
            out_box = data[None, :] & ~((c2.lo >= -1.0) & (c2.hi <= 1.0))
            if out_box.any():
                k, j = (int(i) for i in np.argwhere(out_box)[0])
                return result(False, FailingCase("step", where(k), symbols[A[k]], j,
                                                 f"cell {label(j)} (data path)",
                                                 (float(c2.lo[k, j]), float(c2.hi[k, j])),
                                                 (-1.0, 1.0)), len(nodes))
        ctrl = [h2.lo[:, ~data], h2.hi[:, ~data]] + (
            [c2.lo[:, ~data], c2.hi[:, ~data]] if lstm else [])
        _, first, inv = np.unique(np.concatenate(ctrl, 1), axis=0, return_index=True,
                                  return_inverse=True)
        inv = inv.reshape(-1)
        succ = []
        for k in first:
            hk = iv.Interval(np.where(data, -1.0, h2.lo[k]), np.where(data, 1.0, h2.hi[k]))
            ck = (iv.Interval(np.where(data, -1.0, c2.lo[k]), np.where(data, 1.0, c2.hi[k]))
                  if lstm else None)
            succ.append((hk, ck, tuple(x[k].tobytes() for x in ctrl)))
        for k, (i, _, (p2, _, _, ue, yy)) in enumerate(live):
            if ue is not None:
                pushed_syms.add(yy)
            hk, ck, hkey = succ[int(inv[k])]
            mem2 = store.apply(batch[i][1], ops[k], yy)
            ek = (mem2, len(pushed_syms))
            if ek not in expansions:
                expansions[ek] = _expand(mem2, reads, pushed_syms)
            for form in expansions[ek]:
                k2 = (p2, form) + hkey
                if k2 not in nodes:
                    if len(nodes) >= max_configs:
                        return result(False, FailingCase(
                            "configs", f"more than {max_configs:,} abstract configurations",
                            None, -1, "max_configs", (float(len(nodes)),) * 2,
                            (0.0, float(max_configs))), len(nodes))
                    nodes[k2] = (p2, form, hk, ck)
                    frontier.append(k2)
        notify(progress, f"grefenstette cases ({kernel} kernels)", cases[0],
               max(cases[0], len(nodes) * K))
    notify(progress, f"grefenstette cases ({kernel} kernels)", cases[0], cases[0])
    msg = memory_check(net)
    if msg is not None:
        return result(False, FailingCase("memory", msg, None, -1, "memory module", NAN2, NAN2),
                      len(nodes))
    notes.append(f"memory module ({type(store).__name__}) checked bit-exact against the "
                 f"discrete {store.kind} on every saturated action sequence of a few steps")
    if sat is not None and kernel == "saturating":
        notes.append("σ(z) = 0 claimed only on enclosures every float32 of which was evaluated "
                     "to 0 on torch.sigmoid and on nn.LSTMCell's input, forget and output gates")
    return result(True, None, len(nodes))


def _store_names(machine, G: int) -> tuple[str, ...]:
    alph = getattr(machine, "store_alphabet", None)
    if alph is None:
        alph = getattr(machine, "stack_alphabet", ())
    names = tuple(repr(s) for s in alph)
    return names if len(names) == G else tuple(str(i) for i in range(G))


__all__ = ["ZERO_SCAN_LIMIT", "certify", "sigmoid_zero_on"]
