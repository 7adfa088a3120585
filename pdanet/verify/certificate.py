"""All-lengths certificates by an inductive box argument, with sound interval arithmetic.

Let E be the network's encoding of abstract configurations: a pair (machine configuration c,
last symbol read) maps to the ideal recurrent state E(c, a) (``net.encoder``). Fix ε > 0. The
certificate checks, for every reachable pair (c, ℓ) and every input symbol a that keeps the
machine live:

1. *step*: every state h with ‖h − E(c, ℓ)‖∞ ≤ ε is mapped by one network step on a to a state
   within ε of E(δ(c, a), a), and
2. *readout*: every such h gives the machine's output in c (each logit on the right side of 0,
   or the right argmax),

and that the initial state lies within ε of E(c₀, –). By induction the network's state stays in
the ε-box of the machine's configuration on every string all of whose prefixes are live, of every
length, and its outputs agree with the machine's at every step.

Every enclosure is computed by `pdanet.verify.intervals` in the module's dtype (outward rounding,
a rigorous bound on each float operation; the LSTM cell update, whose operations round to
nearest, exactly up to the box), so the proof covers the float32 (or float64) module that
actually runs, not an idealised real-valued one. Nothing is sampled.

LSTM cells (c = f·c + i·g) are not contracting where the forget gate is saturated at 1. Under the
"saturating" kernel model the gate is exactly 1, the increment i·g is below half an ulp of the
box's endpoints, and `intervals.lstm_cell` (exact nearest rounding) maps the box onto itself: the
box is invariant and the proof covers every length. Under the "ulp" model alone f may be 1 − O(u)
and the cell drifts: the certificate bounds the drift D per step (the own-cell term enters with a
factor ≤ 1) and proves agreement for every length L with ρ₀·(1+2u)^L + L·D·(1+2u)^L ≤ ε, and
says so.

Soundness with floats. Every float the proof uses is checked: a weight or bias that is NaN or
±inf fails the certificate before anything else (`weights_failure` names the block and the
entry); every margin, deviation and containment is tested so that NaN fails (``not (x <= r)``,
never ``x > r``); a pre-activation whose terms could overflow the dtype (Σ|terms| beyond its
largest float, where the rounding model no longer holds) fails as non-finite. Arguments are
validated first (`check_arguments`): ``eps`` is a finite float in (0, `EPS_MAX`], ``chunk`` and
``max_configs`` positive ints (not bools), and the machine must be the one the network was
compiled for (the same pair check as `pdanet.verify`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sps
import torch

from pdanet import limits
from pdanet.automata.base import Machine
from pdanet.constructions.base import CompiledNetwork
from pdanet.errors import CertificationError, InputError, PdanetError
from pdanet.verify import intervals as iv

#: ``progress(stage, done, total)``: called at a coarse grain (per pass, per chunk of cases)
Progress = Callable[[str, int, int], None]

#: the largest box radius ε a certificate may use. The certified families are decoded by
#: thresholds at distance ≥ 3/8 from their units' ideal values (Minsky LSTM units: on at
#: tanh 1 ≈ 0.76 against 3/8; Dyck cells φ ∈ {−1, 0, 1} against ±1/2; Dyck Elman copies, read in
#: pairs, against a sum of −1); a radius ≤ 1/4 keeps every point of a box on its centre's side.
EPS_MAX = 0.25


@dataclass(frozen=True)
class FailingCase:
    """Where the induction breaks: the configuration, the symbol, the unit and its interval."""

    kind: str  # "initial", "step", "readout", "encoding", "weights", "nonfinite"
    config: str
    symbol: str | None
    unit: int
    unit_label: str
    interval: tuple[float, float]
    required: tuple[float, float]

    def __str__(self) -> str:
        if self.kind == "weights":
            return (f"non-finite weight: {self.config} {self.unit_label} is {self.interval[0]!r}; "
                    "every weight and bias must be finite (recompile, or reload the weights)")
        sym = f" on symbol {self.symbol!r}" if self.symbol is not None else ""
        return (f"{self.kind} check fails at {self.config}{sym}: unit {self.unit} "
                f"({self.unit_label}) lies in [{self.interval[0]:.6g}, {self.interval[1]:.6g}], "
                f"required within [{self.required[0]:.6g}, {self.required[1]:.6g}]")


@dataclass(frozen=True)
class Certificate:
    """The result of `certify`. ``ok`` means agreement is proven for ``max_length`` (None: every
    length, ``all_lengths``) on every string whose prefixes are live."""

    ok: bool
    all_lengths: bool
    max_length: int | None
    eps: float
    scale: str
    dtype: str
    state_margin: float
    readout_margin: float
    configs: int
    cases: int
    seconds: float
    construction: str
    machine: str
    failing: FailingCase | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    kernel: str = "ulp"

    @property
    def margin(self) -> float:
        return min(self.state_margin, self.readout_margin)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            reach = "every length" if self.all_lengths else f"every length ≤ {self.max_length:,}"
            head = f"CERTIFIED for {reach}"
        else:
            head = "NOT CERTIFIED"
        lines = [
            f"{head}: {self.construction} for {self.machine}",
            f"  dtype {self.dtype}, β = {self.scale}, ε = {self.eps:g}, kernel model {self.kernel}",
            (f"  {self.configs:,} abstract configurations, {self.cases:,} (configuration, symbol) "
            f"cases, {self.seconds:.2f} s"),
            f"  smallest slack: state {self.state_margin:.3g}, readout {self.readout_margin:.3g}",
        ]
        if self.failing is not None:
            lines.append(f"  failing case: {self.failing}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> str:
        """Valid JSON: a non-finite float (a NaN margin, an infinite bound) is written as the
        string "nan", "inf" or "-inf"."""
        return json.dumps(_json_safe(asdict(self)), indent=2, default=str, allow_nan=False)


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


# --- arguments, weights and NaN-safe comparisons --------------------------------------------------

def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_arguments(*, eps: Any = None, chunk: Any = 1, max_configs: Any = 1,
                    kernel: Any = "ulp", dtype: Any = None, progress: Any = None) -> None:
    """Raise InputError naming the first bad argument of a certifier and its allowed range:
    ``eps`` None or a finite real in (0, `EPS_MAX`]; ``chunk``, ``max_configs`` positive ints
    (bools are not ints); ``kernel`` one of `intervals.KERNEL_MODELS`; ``dtype`` None or a
    floating torch dtype; ``progress`` None or a callable ``progress(stage, done, total)``."""
    if eps is not None:
        if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.integer,
                                                                      np.floating)):
            raise InputError(f"`eps` must be a real number in (0, {EPS_MAX}] or None (searched), "
                             f"got {eps!r}")
        if not (math.isfinite(float(eps)) and 0 < float(eps) <= EPS_MAX):
            raise InputError(f"`eps` must be finite and in (0, {EPS_MAX}] (box radius; beyond "
                             f"{EPS_MAX} boxes cross the decoders' thresholds), got {eps!r}")
    for name, v in (("chunk", chunk), ("max_configs", max_configs)):
        if not _is_int(v) or v < 1:
            raise InputError(f"`{name}` must be a positive int, got {v!r}")
    if kernel not in iv.KERNEL_MODELS:
        raise InputError(f"`kernel` must be one of {iv.KERNEL_MODELS}, got {kernel!r}")
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise InputError(f"`dtype` must be None or a floating torch dtype (torch.float32, "
                         f"torch.float64), got {dtype!r}")
    if progress is not None and not callable(progress):
        raise InputError(f"`progress` must be None or a callable progress(stage, done, total), "
                         f"got {progress!r}")


def check_pair(machine: Any, net: Any) -> None:
    """The machine must be the one `net` was compiled for: `pdanet.verify`'s own check,
    raised as a CertificationError (certifying another machine's network cannot be attempted)."""
    from pdanet.verify.lockstep import _compiled_machine

    try:
        _compiled_machine(machine, net)
    except PdanetError as exc:
        raise CertificationError(f"{exc}; certify the network with the machine it was "
                                 "compiled from") from exc


def notify(progress: Progress | None, stage: str, done: int, total: int) -> None:
    """Call ``progress(stage, done, total)`` when given."""
    if progress is not None:
        progress(stage, int(done), int(total))


def weights_failure(W: dict[str, Any]) -> FailingCase | None:
    """The first non-finite entry of any float weight block (state_dict order), named, or None.
    Blocks are arrays or tensors; non-float blocks (integer codes) are skipped."""
    for name, v in W.items():
        a = v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)
        if not np.issubdtype(a.dtype, np.floating) or a.size == 0:
            continue
        bad = ~np.isfinite(a)
        if bad.any():
            flat = int(np.argmax(bad.ravel()))
            idx = tuple(int(i) for i in np.unravel_index(flat, a.shape))
            val = float(a.ravel()[flat])
            return FailingCase("weights", f"weight block {name!r}", None, flat,
                               f"entry {idx if len(idx) != 1 else idx[0]}", (val, val),
                               (-math.inf, math.inf))
    return None


def nonfinite_weights(machine: Any, net: CompiledNetwork, kernel: str, t0: float
                      ) -> Certificate | None:
    """A NOT CERTIFIED certificate naming `net`'s first NaN or infinite weight (see
    `weights_failure`), or None when every weight is finite."""
    bad = weights_failure(net.module.state_dict())
    if bad is None:
        return None
    return rejected(machine, net, bad, kernel, t0,
                    "a weight is NaN or infinite: the network's outputs are undefined")


def nan_min(*xs: float) -> float:
    """min that returns NaN when any argument is NaN (Python's ``min`` may drop it)."""
    vals = [float(x) for x in xs]
    return math.nan if any(math.isnan(v) for v in vals) else min(vals)


def overflow_free(absum: np.ndarray, coef: Any, dtype: torch.dtype) -> np.ndarray:
    """Where a sum whose terms have absolute sum ``absum`` (rounding bound ``coef``·absum) can
    be evaluated in ``dtype`` without overflow: every partial sum then lies below the largest
    float, where the rounding model holds. NaN is not overflow-free."""
    return absum * (1.0 + np.asarray(coef) + 2.0**-52) < float(torch.finfo(dtype).max)


def rejected(machine: Any, net: CompiledNetwork, failing: FailingCase, kernel: str,
             t0: float, note: str) -> Certificate:
    """A NOT CERTIFIED certificate for a failure found before any case was checked."""
    return Certificate(
        ok=False, all_lengths=False, max_length=None, eps=0.0, scale=str(net.scale),
        dtype=str(net.dtype).replace("torch.", ""), state_margin=math.nan,
        readout_margin=math.nan, configs=0, cases=0, seconds=time.perf_counter() - t0,
        construction=net.construction, machine=repr(machine), failing=failing, notes=(note,),
        kernel=kernel)


# --- abstract configurations ------------------------------------------------------------------

@dataclass(frozen=True)
class _Abstraction:
    """The finite abstraction the induction runs over: nodes (machine configuration, network
    centre), found by exploring machine and network together from the initial pair."""

    configs: list                 # distinct machine configurations
    node_config: np.ndarray       # (N,) configuration index of each node
    node_string: list             # a shortest string reaching each node
    node_succ: np.ndarray         # (N, |Σ|) successor node, -1 where the machine dies
    E: np.ndarray                 # (N, S) centres: the network's own state (float64)


QUANTA = (1e-3, 1e-2, 1e-1)


class _TooManyNodes(Exception):
    pass


def explore(machine: Machine, net: CompiledNetwork, max_nodes: int) -> _Abstraction:
    """`explore_at` with the finest quantum (`QUANTA`) whose node count stays within 20 nodes
    per configuration (weakly saturated networks need a coarser one)."""
    for q in QUANTA:
        try:
            return explore_at(machine, net, max_nodes, q, per_config=20 if q < QUANTA[-1] else None)
        except _TooManyNodes:
            continue
    raise AssertionError("unreachable")


def explore_at(machine: Machine, net: CompiledNetwork, max_nodes: int, quantum: float,
               per_config: int | None = None) -> _Abstraction:
    """Breadth-first search over pairs (configuration c, network state h): from each node and
    symbol, the machine steps c and the float64 network steps h; states in the same cell of the
    grid of spacing `quantum` as an existing node's, with the same configuration, join it.

    Any choice of centres and successor nodes is sound: the induction only needs the initial
    state in its box and every box mapped inside its successor's box, which `certify` checks.
    Exploring with the network itself finds the centres for constructions whose state holds
    more than the configuration (e.g. Minsky's (state, symbol) units or push/pop copies).
    """
    module = net.with_scale(dtype=torch.float64).module
    H = module.hidden_size
    lstm = module.cell == "lstm"
    syms = machine.alphabet.symbols
    s0 = module.h0.detach().double()
    if lstm:
        s0 = torch.cat([s0, module.c0.detach().double()])
    configs = [machine.initial()]
    cfg_index = {configs[0]: 0}
    node_config, node_string, centres = [0], [()], [s0.numpy()]
    keys = {(0, _quantise(centres[0], quantum)): 0}
    succ_rows: list[np.ndarray] = []
    frontier = [0]
    while frontier:
        states = torch.as_tensor(np.stack([centres[n] for n in frontier]))
        rows = np.full((len(frontier), len(syms)), -1, dtype=np.int64)
        for a, sym in enumerate(syms):
            ids = torch.full((len(frontier),), a, dtype=torch.long)
            with torch.no_grad():
                if lstm:
                    h2, c2 = module.step((states[:, :H], states[:, H:]), ids)
                    new = torch.cat([h2, c2], dim=1).numpy()
                else:
                    new = module.step(states, ids).numpy()
            for i, n in enumerate(frontier):
                c = machine.step(configs[node_config[n]], sym)
                if machine.is_dead(c):
                    continue
                ci = cfg_index.get(c)
                if ci is None:
                    ci = cfg_index[c] = len(configs)
                    configs.append(c)
                key = (ci, _quantise(new[i], quantum))
                m = keys.get(key)
                if m is None:
                    if per_config is not None and len(node_config) > max(
                            1000, per_config * len(configs)):
                        raise _TooManyNodes
                    if len(node_config) >= max_nodes:
                        raise CertificationError(
                            f"more than {max_nodes:,} (configuration, state) pairs: raise "
                            "max_configs, or certify a construction with a structural method")
                    m = keys[key] = len(node_config)
                    node_config.append(ci)
                    node_string.append(node_string[n] + (sym,))
                    centres.append(new[i])
                rows[i, a] = m
        succ_rows.append(rows)
        frontier = list(range(frontier[-1] + 1, len(node_config)))
    succ = np.concatenate(succ_rows) if succ_rows else np.zeros((0, len(syms)), np.int64)
    return _Abstraction(configs, np.array(node_config), node_string, succ, np.stack(centres))


def _quantise(x: np.ndarray, quantum: float) -> bytes:
    return np.round(x / quantum).astype(np.int64).tobytes()


def _config_fields(machine: Machine, strings: list) -> dict:
    """Machine fields (one row per string) after each string, via the batched simulator."""
    ids, lengths = machine.encode([list(s) for s in strings])
    trace = machine.run_batch(ids, lengths)
    rows = np.arange(len(strings))
    return {k: v[rows, lengths] for k, v in trace.fields.items()}


def _weights(net: CompiledNetwork) -> dict[str, np.ndarray]:
    return {k: v.detach().double().cpu().numpy() for k, v in net.module.state_dict().items()}


class _CenterRadius:
    """Enclosure of fl(W h + rest) for h in a box centred on E with radius ρ (uniform per unit),
    using a sparse E − base so that structured encodings are cheap."""

    def __init__(self, W: np.ndarray, base: np.ndarray):
        self.W = W
        self.absW = np.abs(W)
        self.base_term = W @ base

    def center(self, delta: sps.csr_matrix) -> np.ndarray:
        return self.base_term[None, :] + np.asarray(delta @ self.W.T)

    def radius(self, rho: np.ndarray) -> np.ndarray:
        return self.absW @ rho


EPS_LADDER = (0.25, 0.1, 0.03, 0.01, 3e-3, 1e-3, 3e-4, 1e-4)
MAX_ROUNDS = 12


@dataclass
class _Problem:
    """Everything one certification pass needs (built once per network)."""

    machine: Machine
    net: CompiledNetwork
    abst: _Abstraction
    fields: dict             # machine fields per node
    E: np.ndarray            # (N, S) box centres
    W: dict
    H: int
    cell: str
    dtype: torch.dtype
    labels: list

    def pair_desc(self, p: int) -> str:
        string = self.machine.alphabet.format(self.abst.node_string[p])
        return f"{self.abst.configs[self.abst.node_config[p]]!r} (reached by {string!r})"


@dataclass
class _Pass:
    """One pass over all cases at box radii R: per-unit deviation of the image from its target
    centre, the own-cell drift (LSTM), the readout slack, and where each is worst."""

    dev: np.ndarray
    drift: np.ndarray         # per cell: worst point-image deviation where the box is not kept
    settled: np.ndarray       # per cell: worst box-image deviation where the box is kept
    worst: dict               # unit -> (pair, symbol, lo, hi, target)
    readout_slack: float
    readout_fail: FailingCase | None
    cases: int


def _one_pass(pb: _Problem, R: np.ndarray, chunk: int, progress: Progress | None = None,
              stage: str = "check") -> _Pass:
    """Enclose one step of every (pair, symbol) case with boxes of radii R. A deviation that is
    NaN (a non-finite enclosure, or a sum that could overflow the dtype) propagates into ``dev``
    and is recorded in ``worst``, so the pass fails on it."""
    E, W, H, dtype, cell = pb.E, pb.W, pb.H, pb.dtype, pb.cell
    P, S = E.shape
    abst = pb.abst
    u = iv.unit_roundoff(dtype)
    W_hh, W_ih = W["rnn.weight_hh_l0"], W["rnn.weight_ih_l0"]
    b = W["rnn.bias_ih_l0"] + W["rnn.bias_hh_l0"]
    emb = W["embedding.weight"]
    n_terms = W_hh.shape[1] + W_ih.shape[1] + 2
    base = np.median(E[:, :H], axis=0)
    cr = _CenterRadius(W_hh, base)
    zrad = cr.radius(R[:H])
    hmax = np.abs(E[:, :H]).max(axis=0) + R[:H]
    absWhh_h = np.abs(W_hh) @ hmax
    err_coef = iv.gamma(n_terms, u) + iv.gamma(n_terms + 2, 2.0**-53)
    limits.check(f"certifying {pb.net.construction}: one chunk of {min(chunk, P):,} pairs",
                 24.0 * min(chunk, P) * S * 8 * (4 if cell == "lstm" else 1), "max_bytes",
                 hint="pass a smaller chunk")
    dev = np.zeros(S)
    drift = np.zeros(S)
    settled = np.zeros(S)
    worst: dict = {}
    cases = 0
    readout_slack, readout_fail = math.inf, None
    for start in range(0, P, chunk):
        rows_all = np.arange(start, min(P, start + chunk))
        delta = sps.csr_matrix(E[rows_all, :H] - base)
        zc = cr.center(delta)
        for a in range(len(pb.machine.alphabet)):
            tgt = abst.node_succ[rows_all, a]
            live = tgt >= 0
            if not live.any():
                continue
            rows = rows_all[live]
            x = emb[a]
            absum = absWhh_h + np.abs(W_ih) @ np.abs(x) + np.abs(b)
            err = err_coef * absum + n_terms * iv.tiny(dtype)
            # a row whose partial sums could overflow the dtype has no rounding bound: NaN fails
            err = np.where(overflow_free(absum, err_coef, dtype), err, np.nan)
            mid = zc[live] + (W_ih @ x + b)[None, :]
            rad = zrad[None, :] + err[None, :] + iv.gamma(2, 2.0**-53) * np.abs(mid)
            z = iv.Interval(mid - rad, mid + rad)
            T = E[tgt[live]]
            cases += len(rows)
            if cell == "rnn":
                out = iv.tanh(z, dtype)
            else:
                zi, zf, zg, zo = (z[:, k * H:(k + 1) * H] for k in range(4))
                gi, gf, go = iv.sigmoid(zi, dtype), iv.sigmoid(zf, dtype), iv.sigmoid(zo, dtype)
                gg = iv.tanh(zg, dtype)
                c_box = iv.Interval.around(E[rows, H:], R[H:])
                cn = iv.lstm_cell(gf, c_box, gi, gg, dtype)
                hn = iv.mul(go, iv.tanh(cn, dtype), dtype)
                out = iv.Interval(np.concatenate([hn.lo, cn.lo], 1), np.concatenate([hn.hi, cn.hi], 1))
                # own cell as a point: the radius it carries is multiplied by f ≤ 1
                cpt = iv.lstm_cell(gf, iv.Interval.point(E[rows, H:]), gi, gg, dtype)
                d = np.maximum(cpt.hi - T[:, H:], T[:, H:] - cpt.lo)
                d_box = np.maximum(cn.hi - T[:, H:], T[:, H:] - cn.lo)
                # a case contracts the box (to ≤ R/2) or counts as drift: ρ′ ≤ (1+2u)ρ + d;
                # a NaN box image is not kept, and its NaN also reaches ``dev`` below
                kept = d_box <= 0.5 * R[None, H:]
                settled[H:] = np.maximum(settled[H:], np.where(kept, d_box, 0).max(axis=0))
                drift[H:] = np.maximum(drift[H:], np.where(kept, 0, d).max(axis=0))
            d_all = np.maximum(out.hi - T, T - out.lo)     # NaN where the enclosure is
            j_max = d_all.argmax(axis=0)                   # argmax picks the first NaN
            d_new = d_all[j_max, np.arange(S)]
            new = (d_new > dev) | (np.isnan(d_new) & ~np.isnan(dev))
            for j in np.nonzero(new)[0]:
                r = j_max[j]
                worst[int(j)] = (int(rows[r]), a, float(out.lo[r, j]), float(out.hi[r, j]),
                                 float(T[r, j]))
            dev = np.maximum(dev, d_all.max(axis=0))
        fail, slack = _check_readout(pb, rows_all, R[:H])
        readout_slack = nan_min(readout_slack, slack)
        if fail is not None and readout_fail is None:
            readout_fail = fail
        notify(progress, stage, rows_all[-1] + 1, P)
    return _Pass(dev, drift, settled, worst, readout_slack, readout_fail, cases)


def certify(machine: Machine, net: CompiledNetwork, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Prove that `net` agrees with `machine` on every string (see the module docstring).

    ``eps`` caps the box radius. Radii are per unit: starting from the initial state's own
    deviation, they are widened to the image's deviation until the box family is invariant
    (a fixed point; at most `MAX_ROUNDS` rounds). LSTM cells that still move are bounded by
    their drift per step with their radius capped at ``eps``. With ``eps=None`` the cap is
    searched over `EPS_LADDER` and the best certificate is returned. Dyck-(k, m) networks too
    large to enumerate go to the structural certifier (`uses_structural`).

    ``kernel`` says how tanh and sigmoid kernels are modelled (`intervals.set_kernel_model`):
    ``"ulp"`` (default) bounds their error by a few ulps; ``"saturating"`` adds exact
    saturation (σ = 1, tanh = ±1 beyond thresholds checked on this build's kernels), which is
    what makes a saturated forget gate exactly 1 and an LSTM certificate hold for every length.
    Under ``"ulp"``, a certificate that does not cover every length is retried under
    ``"saturating"``; the returned certificate's ``kernel`` names the model its proof used, and
    a note gives what the ulp model alone proved.

    Bad arguments raise InputError (`check_arguments`: ``eps`` finite in (0, `EPS_MAX`],
    ``chunk`` and ``max_configs`` positive ints); a network compiled for another machine raises
    CertificationError (`check_pair`). A non-finite weight, or any NaN met on the way, gives a
    NOT CERTIFIED certificate whose failing case names it. ``progress``: None or a callable
    ``progress(stage, done, total)``, called per pass or chunk of cases (a CLI draws a bar).
    """
    check_arguments(eps=eps, chunk=chunk, max_configs=max_configs, kernel=kernel, dtype=dtype,
                    progress=progress)
    if getattr(net, "target", None) != "ns_rnn" or type(machine) is type(net.machine):
        # an NS-RNN compiled from a (D)PDA holds the weighted PDA made from it, which
        # certify_ns_rnn makes again and compares reading by reading
        check_pair(machine, net)
    if getattr(net, "target", None) in ("stack_rnn", "ns_rnn"):
        from pdanet.verify import certify_stack

        if net.target == "stack_rnn":
            cert = certify_stack.certify_stack_rnn(machine, net, dtype=dtype, kernel=kernel,
                                                   progress=progress)
        else:
            cert = certify_stack.certify_ns_rnn(machine, net, dtype=dtype, progress=progress)
        return _no_nan_certificate(cert)
    return _no_nan_certificate(_certify_ulp_then_saturating(
        machine, net, dtype, eps, max_configs, chunk, kernel, progress))


def _no_nan_certificate(cert: Certificate) -> Certificate:
    """A last guard: a certificate whose margins are NaN is not a proof."""
    if cert.ok and (math.isnan(cert.state_margin) or math.isnan(cert.readout_margin)):
        fc = FailingCase("nonfinite", "the margins", None, -1, "state/readout margin",
                         (cert.state_margin, cert.readout_margin), (0.0, math.inf))
        return replace(cert, ok=False, all_lengths=False, max_length=None, failing=fc)
    return cert


def _certify_ulp_then_saturating(machine: Machine, net: CompiledNetwork,
                                 dtype: torch.dtype | None, eps: float | None, max_configs: int,
                                 chunk: int, kernel: str, progress: Progress | None
                                 ) -> Certificate:
    cert = _certify_under(machine, net, dtype, eps, max_configs, chunk, kernel, progress)
    final = cert.failing is not None and cert.failing.kind in ("weights", "nonfinite",
                                                               "encoding", "initial")
    if kernel == "ulp" and not (cert.ok and cert.all_lengths) and not final:
        sat = _certify_under(machine, net, dtype, eps, max_configs, chunk, "saturating",
                             progress)
        if sat.ok and (sat.all_lengths or not cert.ok
                       or (sat.max_length or 0) > (cert.max_length or 0)):
            what = ("fails" if not cert.ok else
                    f"holds for every length ≤ {cert.max_length:,}")
            z = iv.saturation(dtype if dtype is not None else net.dtype)
            note = (f"under the ulp kernel model alone the proof {what}; this one adds exact "
                    f"saturation of the kernels (σ(z) = 1 for z ≥ {z.sigmoid:.6g}, tanh(z) = ±1 "
                    f"for |z| ≥ {z.tanh:.6g}; checked: {z.checked})")
            return replace(sat, notes=sat.notes + (note,))
    return cert


def _certify_under(machine: Machine, net: CompiledNetwork, dtype: torch.dtype | None,
                   eps: float | None, max_configs: int, chunk: int, kernel: str,
                   progress: Progress | None = None) -> Certificate:
    if uses_structural(machine, net, max_configs):
        from pdanet.verify.structural import certify_structural

        return certify_structural(machine, net, dtype=dtype, kernel=kernel, eps=eps,
                                  progress=progress)
    t0 = time.perf_counter()
    if dtype is not None and dtype != net.dtype:
        net = net.with_scale(dtype=dtype)
    bad = nonfinite_weights(machine, net, kernel, t0)
    if bad is not None:
        return bad
    previous = iv.set_kernel_model(kernel)
    try:
        pb = _problem(machine, net, dtype, max_configs)
        notify(progress, "explore", len(pb.E), len(pb.E))
        best = best_over_caps(lambda cap: _certify(pb, cap, chunk, t0, progress), eps)
    finally:
        iv.set_kernel_model(previous)
    return replace(best, kernel=kernel)


def best_over_caps(attempt: Callable[[float], Certificate], eps: float | None) -> Certificate:
    """``attempt(cap)`` for the given cap, or down `EPS_LADDER` until a certificate holds for
    every length; otherwise the one proving the longest length (or the first failure)."""
    best: Certificate | None = None
    for cap in ((float(eps),) if eps is not None else EPS_LADDER):
        cert = attempt(cap)
        if cert.ok and cert.all_lengths:
            return cert
        if best is None or (cert.ok and (not best.ok or (cert.max_length or 0)
                                         > (best.max_length or 0))):
            best = cert
    assert best is not None
    return best


def uses_structural(machine: Machine, net: CompiledNetwork, max_configs: int) -> bool:
    """Dyck-(k, m) networks with more configurations than `max_configs` (and a declared unit
    layout) are certified structurally (`pdanet.verify.structural`), never by enumeration."""
    from pdanet.automata.bounded import DyckKM

    return (isinstance(machine, DyckKM) and "layout" in net.info
            and machine.num_configs * len(machine.alphabet) > max_configs)


def min_scale(machine: Machine, construction: CompiledNetwork | str | tuple[str, str],
              dtype: torch.dtype = torch.float32, min_length: int | None = None,
              kernel: str = "ulp", rel_tol: float = 0.01, **options) -> tuple[Any, Certificate]:
    """The smallest saturation scale β (to `rel_tol`) at which the construction certifies, by
    bisection on β with the construction's exact weights; returns (β, its certificate).

    ``construction`` is a compiled network, "target/method", or (target, method). A certificate
    counts when it holds for every length, or (given `min_length`) for at least that many steps.
    ``rel_tol`` is a real in (0, 1); ``min_length`` None or a positive int; other options go
    to `certify` and are validated there. Raises InputError on a bad argument.
    """
    import sympy as sp

    if isinstance(rel_tol, (bool, np.bool_)) or not isinstance(
            rel_tol, (int, float, np.integer, np.floating)) or not 0 < float(rel_tol) < 1:
        raise InputError(f"`rel_tol` must be a real number in (0, 1), got {rel_tol!r}")
    if min_length is not None and (not _is_int(min_length) or min_length < 1):
        raise InputError(f"`min_length` must be None or a positive int, got {min_length!r}")
    check_arguments(kernel=kernel, dtype=dtype, **{k: v for k, v in options.items()
                                                   if k in ("eps", "chunk", "max_configs",
                                                            "progress")})

    from pdanet.constructions.table import compile as compile_machine

    if isinstance(construction, CompiledNetwork):
        check_pair(machine, construction)
        net = construction
    else:
        target, method = (construction.split("/") if isinstance(construction, str)
                          else construction)
        net = compile_machine(machine, target=target, method=method, dtype=dtype)
    net = net.with_scale(dtype=dtype)

    def good(beta) -> Certificate | None:
        try:
            cert = certify(machine, net.with_scale(beta), kernel=kernel, **options)
        except CertificationError:  # e.g. too weakly saturated to have few centres
            return None
        ok = cert.ok and (cert.all_lengths or (min_length is not None
                                               and (cert.max_length or 0) >= min_length))
        return cert if ok else None

    hi = sp.Rational(net.scale)
    cert_hi = good(hi)
    tries = 0
    while cert_hi is None:
        hi, tries = hi * 2, tries + 1
        if tries > 8:
            raise CertificationError(
                f"{net.construction} does not certify even at β = {hi}; see certify()'s failing case")
        cert_hi = good(hi)
    lo = sp.Rational(0)
    while hi - lo > rel_tol * hi:
        mid = sp.nsimplify(round(float((lo + hi) / 2), 4), rational=True)
        if mid <= lo or mid >= hi:
            break
        cert = good(mid)
        if cert is None:
            lo = mid
        else:
            hi, cert_hi = mid, cert
    return hi, cert_hi


certify.min_scale = min_scale  # type: ignore[attr-defined]


def _problem(machine: Machine, net: CompiledNetwork, dtype: torch.dtype | None,
             max_configs: int) -> _Problem:
    if net.steps_per_symbol != 1:
        raise CertificationError("only real-time networks (steps_per_symbol = 1) are certified")
    if dtype is not None and dtype != net.dtype:
        net = net.with_scale(dtype=dtype)
    module = net.module
    cell = getattr(module, "cell", None)
    if cell not in ("rnn", "lstm"):
        raise CertificationError(
            f"certify handles Elman and LSTM networks (RecurrentNet); got {type(module).__name__}")
    abst = explore(machine, net, max_configs)
    fields = _config_fields(machine, abst.node_string)
    E = abst.E
    H = module.hidden_size
    labels = list(net.unit_labels)[:H] or [f"h{j}" for j in range(H)]
    if cell == "lstm":
        labels = labels + [f"c:{lab}" for lab in labels]
    return _Problem(machine, net, abst, fields, E, _weights(net), H, cell, net.dtype, labels)


def _nonfinite_failure(pb: _Problem, ps: _Pass, R: np.ndarray) -> FailingCase | None:
    """The first unit whose deviation, drift or radius is not finite (NaN: a non-finite or
    overflowing enclosure), with the case where it arose, or None."""
    bad = ~(np.isfinite(ps.dev) & np.isfinite(ps.drift) & np.isfinite(ps.settled)
            & np.isfinite(R))
    if not bad.any():
        return None
    j = int(np.argmax(bad))
    lab = pb.labels[j] if j < len(pb.labels) else f"unit {j}"
    if j in ps.worst:
        p, a, lo, hi, tgt = ps.worst[j]
        return FailingCase("nonfinite", pb.pair_desc(p), str(pb.machine.alphabet.symbols[a]), j,
                           lab, (lo, hi), (tgt - R[j], tgt + R[j]))
    return FailingCase("nonfinite", "some (configuration, symbol) case", None, j, lab,
                       (math.nan, math.nan), (-R[j], R[j]))


def _certify(pb: _Problem, cap: float, chunk: int, t0: float,
             progress: Progress | None = None) -> Certificate:
    E, H, W, cell, dtype = pb.E, pb.H, pb.W, pb.cell, pb.dtype
    P, S = E.shape
    u = iv.unit_roundoff(dtype)
    notes: list[str] = [
        "agreement covers every string whose prefixes are all live (the machine's prefix language)"
    ]

    def result(ok, all_lengths, max_length, failing, state_margin, readout_margin, cases,
               extra=()):
        return Certificate(
            ok=ok, all_lengths=all_lengths, max_length=max_length, eps=cap,
            scale=str(pb.net.scale), dtype=str(dtype).replace("torch.", ""),
            state_margin=float(state_margin), readout_margin=float(readout_margin),
            configs=P, cases=cases, seconds=time.perf_counter() - t0,
            construction=pb.net.construction, machine=repr(pb.machine), failing=failing,
            notes=tuple(notes) + tuple(extra))

    if not np.isfinite(E).all():
        p = int(np.argmax(~np.isfinite(E).all(axis=1)))
        fc = FailingCase("nonfinite", pb.pair_desc(p), None, -1, "box centre",
                         (math.nan, math.nan), (math.nan, math.nan))
        return result(False, False, None, fc, math.nan, math.nan, 0)
    # the decoder must read each centre as its configuration
    width = pb.net.forward(torch.zeros((1, 1), dtype=torch.long))[0].shape[-1]
    dec = pb.net.decode(E[:, None, :width])
    pf = pb.fields
    for k, v in dec.items():
        if k in pf:
            bad = (v[:, 0] != pf[k]).reshape(P, -1).any(1)
            if bad.any():
                p = int(np.nonzero(bad)[0][0])
                fc = FailingCase("encoding", pb.pair_desc(p), None, -1, f"decoded {k}",
                                 (math.nan, math.nan), (math.nan, math.nan))
                return result(False, False, None, fc, 0.0, 0.0, 0)

    init_pair = 0
    s0 = W["h0"] if cell == "rnn" else np.concatenate([W["h0"], W["c0"]])
    dev0 = np.abs(s0 - E[init_pair])
    # the induction starts inside the ε-box: every unit, cells included (a cell's radius is the
    # cap whatever its initial deviation, so nothing below would compare it)
    if not (dev0 <= cap).all():
        j = int(np.argmax(~(dev0 <= cap)))
        fc = FailingCase("initial", pb.pair_desc(init_pair), None, j, pb.labels[j],
                         (float(s0[j]), float(s0[j])),
                         (float(E[init_pair, j] - cap), float(E[init_pair, j] + cap)))
        return result(False, False, None, fc, cap - float(dev0[j]), math.nan, 0)
    floor = 1e-3 * cap
    cells = np.zeros(S, dtype=bool)
    if cell == "lstm":
        cells[H:] = True
    # cells keep the cap as their radius; the other units' radii grow to a fixed point
    R = np.where(cells, cap, np.maximum(dev0, floor))
    cases = 0
    # every comparison below is written so that NaN fails: "within" is ``dev <= R``
    for r in range(MAX_ROUNDS):
        ps = _one_pass(pb, R, chunk, progress, f"check ε={cap:g} round {r + 1}")
        cases += ps.cases
        grow = ~(ps.dev <= R) & ~cells
        if not grow.any() or not (ps.dev[~cells] <= cap).all():
            break
        R = np.where(grow, np.minimum(np.maximum(ps.dev * 1.5, R), cap), R)
    fc = _nonfinite_failure(pb, ps, R)
    if fc is not None:
        return result(False, False, None, fc, math.nan, ps.readout_slack, cases)
    # non-cell units must be invariant within the cap
    bad = ~(ps.dev <= np.minimum(R, cap)) & ~cells
    if bad.any():
        j = int(np.argmax(np.where(bad, ps.dev - np.minimum(R, cap), -np.inf)))
        lab = pb.labels[j] if j < len(pb.labels) else f"unit {j}"
        p, a, lo, hi, tgt = ps.worst.get(j, (0, 0, math.nan, math.nan, math.nan))
        fc = FailingCase("step", pb.pair_desc(p), str(pb.machine.alphabet.symbols[a]), j,
                         lab, (lo, hi), (tgt - R[j], tgt + R[j]))
        return result(False, False, None, fc, float(np.min(R - ps.dev)), ps.readout_slack, cases)
    if ps.readout_fail is not None or not ps.readout_slack > 0:
        return result(False, False, None, ps.readout_fail, float(np.min(R - ps.dev)),
                      ps.readout_slack, cases)
    state_margin = float(np.min((R - ps.dev)[~cells])) if (~cells).any() else cap
    if (ps.dev[cells] <= R[cells]).all():
        return result(True, True, None, None, state_margin, ps.readout_slack, cases)
    # LSTM cells still moving: with every box at R (cells at the cap), a cell's radius grows by
    # at most its drift D per step (ρ' ≤ (1+2u)·ρ + D); the ε-box holds while that stays ≤ cap.
    D = float(ps.drift[cells].max())
    # a cell whose box is kept lands within `settled`; one that moves grows by ≤ D per step
    rho0 = max(float(dev0[cells].max()), float(ps.settled[cells].max()))
    if D == 0.0 and rho0 == 0.0:  # points map exactly onto points
        return result(True, True, None, None, state_margin, ps.readout_slack, cases)
    if not D < cap - rho0:
        j = int(np.argmax(np.where(cells, ps.drift, -np.inf)))
        p, a, lo, hi, tgt = ps.worst.get(j, (0, 0, math.nan, math.nan, math.nan))
        fc = FailingCase("step", pb.pair_desc(p), str(pb.machine.alphabet.symbols[a]), j,
                         pb.labels[j], (lo, hi), (tgt - cap, tgt + cap))
        return result(False, False, None, fc, cap - D, ps.readout_slack, cases)
    lo_L, hi_L = 1, 10**15
    while lo_L < hi_L:  # the largest L with (ρ0 + L·D)·(1+2u)^L ≤ cap
        mid = (lo_L + hi_L + 1) // 2
        if math.log(rho0 + mid * D) + mid * math.log1p(2 * u) <= math.log(cap):
            lo_L = mid
        else:
            hi_L = mid - 1
    L = lo_L
    note = (f"LSTM cells are not contracting where forget gates are saturated at 1: each step may "
            f"move a cell by ≤ {D:.3g} in {str(dtype).replace('torch.', '')}, so the cap "
            f"ε = {cap:g} holds for {L:,} steps")
    return result(True, False, L, None, min(state_margin, cap - D), ps.readout_slack, cases,
                  (note,))


def _affine_overflow_free(W: np.ndarray, x: iv.Interval, b: np.ndarray, dtype: torch.dtype
                          ) -> np.ndarray:
    """Where fl(W x + b) over the box x cannot overflow (`overflow_free`), per output."""
    n = W.shape[1] + 1
    coef = iv.gamma(n, iv.unit_roundoff(dtype)) + iv.gamma(n + 2, 2.0**-53)
    return overflow_free(x.mag @ np.abs(W).T + np.abs(b), coef, dtype)


def _check_readout(pb: _Problem, rows: np.ndarray, R_h: np.ndarray
                   ) -> tuple[FailingCase | None, float]:
    """Readout enclosure on the boxes of some pairs; returns (failing case or None, slack)."""
    W, H = pb.W, pb.H
    h = iv.Interval.around(pb.E[rows, :H], R_h)
    z = iv.affine(W["readout.weight"], h, W["readout.bias"], pb.dtype)
    safe = _affine_overflow_free(W["readout.weight"], h, W["readout.bias"], pb.dtype).all(1)
    if "out_embedding.weight" in W:
        A2, b2 = W["out_embedding.weight"], W["out_embedding.bias"]
        safe &= _affine_overflow_free(A2, z, b2, pb.dtype).all(1)
        z = iv.affine(A2, z, b2, pb.dtype)
    expected = pb.fields["output"][rows]
    if pb.machine.output_kind in ("accept", "next_set"):
        exp = expected.reshape(len(rows), -1).astype(bool)
        slack = np.where(exp, z.lo, -z.hi)
        required = lambda r, j: (0.0, math.inf) if exp[r, j] else (-math.inf, 0.0)
    else:  # symbol: index y (-1 = none → last logit) must be the strict argmax
        y = np.where(expected < 0, z.lo.shape[1] - 1, expected)
        r_idx = np.arange(len(rows))
        others = z.hi.copy()
        others[r_idx, y] = -np.inf
        slack = (z.lo[r_idx, y] - others.max(axis=1))[:, None]
        required = lambda r, j: (float(others[r].max()), math.inf)
    # a logit that could overflow the dtype has no rounding bound: its row's slack is NaN
    slack = np.where(safe[:, None], slack, np.nan)
    bad = ~(slack > 0)
    if bad.any():
        r, j = map(int, np.argwhere(bad)[0])
        if pb.machine.output_kind == "symbol":
            j = int(y[r])
        return (FailingCase("readout", pb.pair_desc(int(rows[r])), None, j, f"logit {j}",
                            (float(z.lo[r, j]), float(z.hi[r, j])), required(r, j)),
                float(slack.min()))
    return None, float(slack.min())


__all__ = ["Certificate", "FailingCase", "certify", "explore"]
