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
a rigorous bound on each float operation), so the proof covers the float32 (or float64) module
that actually runs, not an idealised real-valued one. Nothing is sampled.

LSTM cells (c = f·c + i·g) are not contracting where the forget gate is saturated at 1: each step
may move a cell by the gates' rounding error. When the box is not invariant for that reason alone,
the certificate bounds the drift D per step (the own-cell term enters with a factor ≤ 1) and
proves agreement for every length L with ρ₀·(1+2u)^L + L·D·(1+2u)^L ≤ ε, and says so.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.sparse as sps
import torch

from pdanet.automata.base import Machine
from pdanet.constructions.base import CompiledNetwork
from pdanet.errors import CertificationError
from pdanet.verify import intervals as iv


@dataclass(frozen=True)
class FailingCase:
    """Where the induction breaks: the configuration, the symbol, the unit and its interval."""

    kind: str  # "initial", "step", "readout", "encoding"
    config: str
    symbol: str | None
    unit: int
    unit_label: str
    interval: tuple[float, float]
    required: tuple[float, float]

    def __str__(self) -> str:
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
            f"  dtype {self.dtype}, β = {self.scale}, ε = {self.eps:g}",
            (f"  {self.configs:,} abstract configurations, {self.cases:,} (configuration, symbol) "
            f"cases, {self.seconds:.2f} s"),
            f"  smallest slack: state {self.state_margin:.3g}, readout {self.readout_margin:.3g}",
        ]
        if self.failing is not None:
            lines.append(f"  failing case: {self.failing}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> str:
        d = asdict(self)
        return json.dumps(d, indent=2, default=str)


# --- abstract configurations ------------------------------------------------------------------

@dataclass(frozen=True)
class _Abstraction:
    configs: list                 # machine configurations
    strings: list                 # a shortest string reaching each
    succ: np.ndarray              # (C, |Σ|) successor index, -1 dead
    pair_config: np.ndarray       # (P,) config index of each (config, last symbol) pair
    pair_last: np.ndarray         # (P,) last symbol (-1: none)
    pair_succ: np.ndarray         # (P, |Σ|) successor pair index, -1 dead


def reachable_configurations(machine: Machine, max_configs: int) -> _Abstraction:
    """Breadth-first search over live configurations (machine.step), then the (config, last
    symbol) pairs that networks with a last-symbol memory (e.g. Minsky's) distinguish."""
    syms = machine.alphabet.symbols
    init = machine.initial()
    index = {init: 0}
    configs, strings = [init], [()]
    succ_rows: list[list[int]] = []
    queue = deque([0])
    while queue:
        i = queue.popleft()
        row = []
        for a in syms:
            c2 = machine.step(configs[i], a)
            if machine.is_dead(c2):
                row.append(-1)
                continue
            j = index.get(c2)
            if j is None:
                if len(configs) >= max_configs:
                    raise CertificationError(
                        f"more than {max_configs:,} reachable configurations: raise max_configs, "
                        "or certify a construction with a structural method"
                    )
                j = index[c2] = len(configs)
                configs.append(c2)
                strings.append(strings[i] + (a,))
                queue.append(j)
            row.append(j)
        succ_rows.append(row)
    succ = np.array(succ_rows, dtype=np.int64).reshape(len(configs), len(syms))
    C, S = succ.shape
    # pairs: (c0, -1) and (succ[c, a], a)
    keys = np.unique(np.concatenate([[[0, -1]],
                                     np.stack([succ.ravel(), np.tile(np.arange(S), C)], 1)]),
                     axis=0)
    keys = keys[keys[:, 0] >= 0]
    pair_of = {(int(c), int(a)): p for p, (c, a) in enumerate(keys)}
    pair_succ = np.full((len(keys), S), -1, dtype=np.int64)
    for p, (c, _) in enumerate(keys):
        for a in range(S):
            if succ[c, a] >= 0:
                pair_succ[p, a] = pair_of[(int(succ[c, a]), a)]
    return _Abstraction(configs, strings, succ, keys[:, 0].copy(), keys[:, 1].copy(), pair_succ)


def _config_fields(machine: Machine, strings: list) -> tuple[dict, np.ndarray]:
    ids, lengths = machine.encode([list(s) for s in strings])
    trace = machine.run_batch(ids, lengths)
    rows = np.arange(len(strings))
    fields = {k: v[rows, lengths] for k, v in trace.fields.items()}
    return fields, lengths


# --- one network step over boxes -------------------------------------------------------------

def _pair_states(net: CompiledNetwork, machine: Machine, abst: _Abstraction) -> np.ndarray:
    """Box centres E(c, ℓ): the network's own state, computed in float64, after a string that
    reaches configuration c with last symbol ℓ. Any choice of centres is sound (the induction only
    needs the initial state in its box and every box mapped into its successor's box); states of
    the network itself are the natural ones."""
    P = len(abst.pair_config)
    reps: list[tuple] = []
    for c, last in zip(abst.pair_config, abst.pair_last):
        if last < 0:
            reps.append(())
            continue
        prev = int(np.nonzero(abst.succ[:, last] == c)[0][0])
        reps.append(abst.strings[prev] + (machine.alphabet.symbols[last],))
    ids, lengths = machine.encode([list(r) for r in reps])
    module = net.with_scale(dtype=torch.float64).module
    H = module.hidden_size
    with torch.no_grad():
        h = module.h0.detach().view(1, -1).expand(P, H).clone()
        state = h if module.cell == "rnn" else (h, module.c0.detach().view(1, -1).expand(P, H).clone())
        ids_t = torch.as_tensor(ids)
        for t in range(ids.shape[1]):
            new = module.step(state, ids_t[:, t])
            keep = torch.as_tensor(t < lengths).view(P, 1)
            if module.cell == "rnn":
                state = torch.where(keep, new, state)
            else:
                state = (torch.where(keep, new[0], state[0]), torch.where(keep, new[1], state[1]))
    if module.cell == "rnn":
        return state.numpy().astype(np.float64)
    return torch.cat(state, dim=1).numpy().astype(np.float64)


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


EPS_LADDER = (0.25, 0.1, 0.03, 0.01, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5)


def certify(machine: Machine, net: CompiledNetwork, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024
            ) -> Certificate:
    """Prove that `net` agrees with `machine` on every string (see the module docstring).

    With ``eps=None`` the box radius is searched over `EPS_LADDER` (largest first) and the first
    radius that certifies is reported; the failing case of the largest radius is reported when
    none does. LSTM certificates keep searching for the radius that proves the longest length.
    """
    if eps is not None:
        return _certify(machine, net, dtype, float(eps), max_configs, chunk)
    first: Certificate | None = None
    best: Certificate | None = None
    for e in EPS_LADDER:
        cert = _certify(machine, net, dtype, e, max_configs, chunk)
        first = first or cert
        if cert.ok and cert.all_lengths:
            return cert
        if cert.ok and (best is None or (cert.max_length or 0) > (best.max_length or 0)):
            best = cert
    return best or first  # type: ignore[return-value]


def _certify(machine: Machine, net: CompiledNetwork, dtype: torch.dtype | None,
             eps: float, max_configs: int, chunk: int) -> Certificate:
    t0 = time.perf_counter()
    if net.steps_per_symbol != 1:
        raise CertificationError("only real-time networks (steps_per_symbol = 1) are certified")
    if dtype is not None and dtype != net.dtype:
        net = net.with_scale(dtype=dtype)
    dtype = net.dtype
    module = net.module
    cell = getattr(module, "cell", None)
    if cell not in ("rnn", "lstm"):
        raise CertificationError(f"certify supports RecurrentNet modules; got {type(module)}")
    abst = reachable_configurations(machine, max_configs)
    fields, _ = _config_fields(machine, abst.strings)
    P = len(abst.pair_config)
    pf = {k: v[abst.pair_config] for k, v in fields.items()}
    E = _pair_states(net, machine, abst)  # (P, S): box centres
    W = _weights(net)
    H = module.hidden_size
    emb = W["embedding.weight"]
    u = iv.unit_roundoff(dtype)
    labels = list(net.unit_labels) or [f"h{j}" for j in range(H)]
    if cell == "lstm":
        labels = labels[:H] + [f"c:{lab}" for lab in labels[:H]]
    desc = [repr(abst.configs[c]) for c in range(len(abst.configs))]

    def pair_desc(p: int) -> str:
        last = abst.pair_last[p]
        tail = "" if last < 0 else f" after {machine.alphabet.symbols[last]!r}"
        return f"{desc[abst.pair_config[p]]}{tail}"

    notes: list[str] = [
        "agreement covers every string whose prefixes are all live (the machine's prefix language)"
    ]
    failing: FailingCase | None = None
    state_margin, readout_margin = math.inf, math.inf
    cases = 0

    # ---- decoder consistency on the centres ----
    width = net.forward(torch.zeros((1, 1), dtype=torch.long))[0].shape[-1]
    dec = net.decode(E[:, None, :width])
    for k, v in dec.items():
        if k in pf and not np.array_equal(v[:, 0], pf[k]):
            p = int(np.nonzero((v[:, 0] != pf[k]).reshape(P, -1).any(1))[0][0])
            failing = FailingCase("encoding", pair_desc(p), None, -1, k, (math.nan, math.nan),
                                  (math.nan, math.nan))
            break

    # ---- initial state ----
    init_pair = int(np.nonzero((abst.pair_config == 0) & (abst.pair_last == -1))[0][0])
    s0 = W["h0"] if cell == "rnn" else np.concatenate([W["h0"], W["c0"]])
    # box radii: ε for every unit of an Elman network; for an LSTM ε for cells and 2ε for h
    # (h = o·tanh(c) moves at most as far as c, so h needs the wider box)
    eps_h = eps if cell == "rnn" else 2 * eps
    radius = np.full(E.shape[1], eps_h)
    radius[H:] = eps
    dev0 = np.abs(s0 - E[init_pair])
    rho0 = float(dev0[H:].max()) if cell == "lstm" else float(dev0.max())
    if failing is None and (dev0 > radius).any():
        j = int((dev0 - radius).argmax())
        failing = FailingCase("initial", pair_desc(init_pair), None, j, labels[j],
                              (float(s0[j]), float(s0[j])),
                              (E[init_pair, j] - radius[j], E[init_pair, j] + radius[j]))

    base = np.median(E, axis=0)
    hmax = np.abs(E).max(axis=0) + radius
    rho = radius
    drift = 0.0
    cells_invariant = True

    if cell == "rnn":
        W_hh, W_ih = W["rnn.weight_hh_l0"], W["rnn.weight_ih_l0"]
        b = W["rnn.bias_ih_l0"] + W["rnn.bias_hh_l0"]
        n_terms = W_hh.shape[1] + W_ih.shape[1] + 2
        cr = _CenterRadius(W_hh, base)
        zrad = cr.radius(rho)
    else:
        W_hh, W_ih = W["rnn.weight_hh_l0"], W["rnn.weight_ih_l0"]
        b = W["rnn.bias_ih_l0"] + W["rnn.bias_hh_l0"]
        n_terms = W_hh.shape[1] + W_ih.shape[1] + 2
        cr = _CenterRadius(W_hh, base[:H])
        zrad = cr.radius(rho[:H])
    absWhh_h = np.abs(W_hh) @ (hmax[:H] if cell == "lstm" else hmax)
    err_coef = iv.gamma(n_terms, u) + iv.gamma(n_terms + 2, 2.0**-53)

    for start in range(0, P, chunk):
        if failing is not None:
            break
        sl = slice(start, min(P, start + chunk))
        Ec = E[sl]
        delta = sps.csr_matrix(Ec[:, :H] - (base[:H] if cell == "lstm" else base))
        zc_h = cr.center(delta)  # (n, rows)
        for a in range(len(machine.alphabet)):
            tgt = abst.pair_succ[sl, a]
            live = tgt >= 0
            if not live.any():
                continue
            x = emb[a]
            xin = W_ih @ x + b
            err = err_coef * (absWhh_h + np.abs(W_ih) @ np.abs(x) + np.abs(b)) + n_terms * iv.tiny(dtype)
            mid = zc_h[live] + xin[None, :]
            rad = zrad[None, :] + err[None, :]
            z = iv.Interval(mid - rad, mid + rad).widen(iv.gamma(2, 2.0**-53) * np.abs(mid))
            T = E[tgt[live]]
            rows = np.nonzero(live)[0] + start
            cases += int(live.sum())
            if cell == "rnn":
                hn = iv.tanh(z, dtype)
                slack = np.minimum(hn.lo - (T - eps_h), (T + eps_h) - hn.hi)
            else:
                zi, zf, zg, zo = (z[:, k * H:(k + 1) * H] for k in range(4))
                gi, gf, go = iv.sigmoid(zi, dtype), iv.sigmoid(zf, dtype), iv.sigmoid(zo, dtype)
                gg = iv.tanh(zg, dtype)
                cbox = iv.Interval.around(E[rows, H:], eps)
                cn = iv.add(iv.mul(gf, cbox, dtype), iv.mul(gi, gg, dtype), dtype)
                hn = iv.mul(go, iv.tanh(cn, dtype), dtype)
                slack_h = np.minimum(hn.lo - (T[:, :H] - eps_h), (T[:, :H] + eps_h) - hn.hi)
                # own-cell term as a point: drift per step (the factor f ≤ 1 carries the radius)
                cpt = iv.add(iv.mul(gf, iv.Interval.point(E[rows, H:]), dtype),
                             iv.mul(gi, gg, dtype), dtype)
                d = np.maximum(cpt.hi - T[:, H:], T[:, H:] - cpt.lo)
                drift = max(drift, float(d.max()))
                slack_c = np.minimum(cn.lo - (T[:, H:] - eps), (T[:, H:] + eps) - cn.hi)
                if (slack_c < 0).any():
                    cells_invariant = False
                slack = np.concatenate([slack_h, np.maximum(slack_c, eps - d)], axis=1)
                hn = iv.Interval(np.concatenate([hn.lo, cn.lo], 1),
                                 np.concatenate([hn.hi, cn.hi], 1))
            bad = slack < 0
            if bad.any():
                r, j = map(int, np.argwhere(bad)[0])
                p = int(rows[r])
                failing = FailingCase("step", pair_desc(p), str(machine.alphabet.symbols[a]), j,
                                      labels[j] if j < len(labels) else f"unit {j}",
                                      (float(hn.lo[r, j]), float(hn.hi[r, j])),
                                      (float(T[r, j] - radius[j]), float(T[r, j] + radius[j])))
                break
            state_margin = min(state_margin, float(slack.min()))

        if failing is None:
            fail, rm = _check_readout(net, W, machine, fields, abst, sl, E, eps_h, dtype, H, cell,
                                      pair_desc)
            readout_margin = min(readout_margin, rm)
            failing = fail

    max_length = None
    all_lengths = True
    if cell == "lstm" and failing is None:
        # cells: ρ_{t+1} ≤ (1+2u)·ρ_t + D; all lengths when the cell box itself is invariant
        if not cells_invariant:
            all_lengths = False
            1 + 2 * u
            L = 0
            lo_L, hi_L = 0, 10**12
            while lo_L < hi_L:  # largest L with (ρ0 + L·D)·growth^L ≤ ε
                mid = (lo_L + hi_L + 1) // 2
                if math.log(rho0 + mid * drift) + mid * math.log1p(2 * u) <= math.log(eps):
                    lo_L = mid
                else:
                    hi_L = mid - 1
            L = lo_L
            max_length = L
            notes.append(
                f"LSTM cells with saturated forget gates are not contracting: drift ≤ {drift:.3g} "
                f"per step in {str(dtype).replace('torch.', '')}, so the ε-box holds for {L:,} steps"
            )
    ok = failing is None and (all_lengths or (max_length or 0) > 0)
    return Certificate(
        ok=ok, all_lengths=bool(ok and all_lengths), max_length=max_length if ok else None,
        eps=float(eps), scale=str(net.scale), dtype=str(dtype).replace("torch.", ""),
        state_margin=float(state_margin if state_margin != math.inf else 0.0),
        readout_margin=float(readout_margin if readout_margin != math.inf else 0.0),
        configs=P, cases=cases, seconds=time.perf_counter() - t0,
        construction=net.construction, machine=repr(machine), failing=failing, notes=tuple(notes),
    )


def _check_readout(net, W, machine, fields, abst, sl, E, eps, dtype, H, cell, pair_desc):
    """Readout enclosure on the boxes of a chunk of pairs; returns (failing case or None, slack)."""
    rows = np.arange(sl.start, sl.stop)
    h = iv.Interval.around(E[rows, :H], eps)
    z = iv.affine(W["readout.weight"], h, W["readout.bias"], dtype)
    if "out_embedding.weight" in W:
        z = iv.affine(W["out_embedding.weight"], z, W["out_embedding.bias"], dtype)
    expected = fields["output"][abst.pair_config[rows]]
    kind = machine.output_kind
    if kind in ("accept", "next_set"):
        exp = expected.reshape(len(rows), -1).astype(bool)
        slack = np.where(exp, z.lo, -z.hi)
    else:  # symbol: index y (-1 = none → last logit) must be the strict argmax
        y = np.where(expected < 0, z.lo.shape[1] - 1, expected)
        r = np.arange(len(rows))
        others = z.hi.copy()
        others[r, y] = -np.inf
        slack = (z.lo[r, y] - others.max(axis=1))[:, None]
    bad = slack <= 0
    if bad.any():
        r, j = map(int, np.argwhere(bad)[0])
        p = int(rows[r])
        return (FailingCase("readout", pair_desc(p), None, j, f"logit {j}",
                            (float(z.lo[r, j]), float(z.hi[r, j])),
                            (0.0, math.inf) if slack.shape[1] > 1 and expected.reshape(len(rows), -1)[r, j] else (-math.inf, 0.0)),
                float(slack.min()))
    return None, float(slack.min())


__all__ = ["Certificate", "FailingCase", "certify", "reachable_configurations"]
