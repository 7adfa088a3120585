"""Box-induction certificates for recurrent networks whose state encodes the configuration
(`RecurrentUnits`: the DFA Minsky Elman/LSTM constructions, and small Dyck-(k, m) networks).

The centres E are found by exploring machine and network together (`explore`): nodes are pairs
(machine configuration, network state), each reached by a shortest string. This family supplies
the step enclosure of `pdanet.verify.certify.induction` over every (node, live symbol) case, and
the readout check on every node's box; radii are per unit (one abstract state).

Every enclosure is computed by `pdanet.verify.intervals` in the module's dtype (outward rounding,
a rigorous bound on each float operation; the LSTM cell update, whose operations round to
nearest, exactly up to the box), so the proof covers the float32 (or float64) module that
actually runs, not an idealised real-valued one. Nothing is sampled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sps
import torch

from pdanet import limits
from pdanet.automata.base import Machine
from pdanet.constructions.base import CompiledNetwork
from pdanet.errors import CertificationError
from pdanet.verify import intervals as iv
from pdanet.verify.certify.core import (
    Certificate,
    FailingCase,
    Progress,
    begin,
    check_pair,
    nan_min,
    notify,
    overflow_free,
)
from pdanet.verify.certify.induction import LIVE_NOTE, lstm_image, prove

_U64 = 2.0**-53


# --- abstract configurations ------------------------------------------------------------------

@dataclass(frozen=True)
class Explored:
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


def explore(machine: Machine, net: CompiledNetwork, max_nodes: int) -> Explored:
    """`explore_at` with the finest quantum (`QUANTA`) whose node count stays within 20 nodes
    per configuration (weakly saturated networks need a coarser one)."""
    for q in QUANTA:
        try:
            return explore_at(machine, net, max_nodes, q, per_config=20 if q < QUANTA[-1] else None)
        except _TooManyNodes:
            continue
    raise AssertionError("unreachable")


def explore_at(machine: Machine, net: CompiledNetwork, max_nodes: int, quantum: float,
               per_config: int | None = None) -> Explored:
    """Breadth-first search over pairs (configuration c, network state h): from each node and
    symbol, the machine steps c and the float64 network steps h; states in the same cell of the
    grid of spacing `quantum` as an existing node's, with the same configuration, join it.

    Any choice of centres and successor nodes is sound: the induction only needs the initial
    state in its box and every box mapped inside its successor's box, which the certificate
    checks. Exploring with the network itself finds the centres for constructions whose state
    holds more than the configuration (e.g. Minsky's (state, symbol) units or push/pop copies).
    """
    module = net.with_scale(dtype=torch.float64).module
    blocks = module.blocks(numpy=True)
    H = blocks.h0.shape[0]
    lstm = blocks.c0 is not None
    syms = machine.alphabet.symbols
    s0 = np.concatenate([blocks.h0, blocks.c0]) if lstm else blocks.h0
    configs = [machine.initial()]
    cfg_index = {configs[0]: 0}
    node_config, node_string, centres = [0], [()], [s0]
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
    return Explored(configs, np.array(node_config), node_string, succ, np.stack(centres))


def _quantise(x: np.ndarray, quantum: float) -> bytes:
    return np.round(x / quantum).astype(np.int64).tobytes()


def _config_fields(machine: Machine, strings: list) -> dict:
    """Machine fields (one row per string) after each string, via the batched simulator."""
    ids, lengths = machine.encode([list(s) for s in strings])
    trace = machine.run_batch(ids, lengths)
    rows = np.arange(len(strings))
    return {k: v[rows, lengths] for k, v in trace.fields.items()}


# --- the family -----------------------------------------------------------------------------------

@dataclass
class _Pass:
    """One pass over all cases at radii R: per-unit deviation of the image from its target
    centre, the own-cell drift (LSTM), and where each deviation is worst."""

    dev: np.ndarray           # (S, 1)
    drift: np.ndarray         # (S,) cells: worst point-image deviation where the box is not kept
    settled: np.ndarray       # (S,) cells: worst box-image deviation where the box is kept
    worst: dict               # unit -> (node, symbol, lo, hi, target)
    cases: int


class Boxes:
    """The box family of one network: explored nodes, their centres, and the weights by meaning
    (`RecurrentNet.blocks`). A `pdanet.verify.certify.induction.BoxFamily` with one abstract
    state (radii per unit)."""

    states = 1
    initial = 0
    growth = (1.0,)

    def __init__(self, machine: Machine, net: CompiledNetwork, max_configs: int, chunk: int,
                 progress: Progress | None):
        if net.steps_per_symbol != 1:
            raise CertificationError("only real-time networks (steps_per_symbol = 1) are certified")
        cell = getattr(net.abstraction, "cell", None)
        if cell not in ("rnn", "lstm") or getattr(net.module, "cell", None) != cell:
            raise CertificationError(
                f"certify handles Elman and LSTM networks (RecurrentNet); got "
                f"{type(net.module).__name__}")
        self.machine, self.net, self.cell, self.chunk = machine, net, cell, chunk
        self.progress = progress
        self.dtype = net.dtype
        self.W = net.module.blocks(numpy=True)
        self.H = self.W.h0.shape[0]
        self.abst = explore(machine, net, max_configs)
        self.E = self.abst.E
        self.fields = _config_fields(machine, self.abst.node_string)
        lstm = cell == "lstm"
        self.s0 = np.concatenate([self.W.h0, self.W.c0]) if lstm else self.W.h0
        self.E0 = self.E[0]
        self.cells = np.zeros(self.E.shape[1], dtype=bool)
        self.cells[self.H:] = lstm
        self.initial_config = self.pair_desc(0)
        self.names = tuple(net.abstraction.labels)

    def label(self, j: int) -> str:
        v = j % self.H
        name = self.names[v] if v < len(self.names) else f"h{v}"
        return f"c:{name}" if j >= self.H else name

    def pair_desc(self, p: int) -> str:
        string = self.machine.alphabet.format(self.abst.node_string[p])
        return f"{self.abst.configs[self.abst.node_config[p]]!r} (reached by {string!r})"

    def rejection(self) -> FailingCase | None:
        """A failure before any induction: a non-finite centre, or a centre that the network's
        decoder does not read as its configuration."""
        E, P = self.E, len(self.E)
        if not np.isfinite(E).all():
            p = int(np.argmax(~np.isfinite(E).all(axis=1)))
            return FailingCase("nonfinite", self.pair_desc(p), None, -1, "box centre",
                               (math.nan, math.nan), (math.nan, math.nan))
        width = self.net.forward(torch.zeros((1, 1), dtype=torch.long))[0].shape[-1]
        dec = self.net.decode(E[:, None, :width])
        for k, v in dec.items():
            if k in self.fields:
                bad = (v[:, 0] != self.fields[k]).reshape(P, -1).any(1)
                if bad.any():
                    p = int(np.nonzero(bad)[0][0])
                    return FailingCase("encoding", self.pair_desc(p), None, -1, f"decoded {k}",
                                       (math.nan, math.nan), (math.nan, math.nan))
        return None

    def failing(self, kind: str, j: int, ps: _Pass, R: np.ndarray) -> FailingCase:
        if j not in ps.worst:
            return FailingCase(kind, "some (configuration, symbol) case", None, j, self.label(j),
                               (math.nan, math.nan), (-R[j, 0], R[j, 0]))
        p, a, lo, hi, tgt = ps.worst[j]
        return FailingCase(kind, self.pair_desc(p), str(self.machine.alphabet.symbols[a]), j,
                           self.label(j), (lo, hi), (tgt - R[j, 0], tgt + R[j, 0]))

    def preactivations(self, R: np.ndarray, stage: str):
        """The pre-activation enclosures of one step from every node's box (radii R, shape
        (S,)), by chunk of nodes and live symbol: yields (rows, a, tgt, z) — the nodes, the
        symbol, their successors and the interval z of W_hh h + W_ih x_a + b over the boxes,
        rounding of the network's dtype included (NaN where a row's partial sums could overflow
        the dtype: no rounding bound there)."""
        E, W, H, dtype, chunk = self.E, self.W, self.H, self.dtype, self.chunk
        P = E.shape[0]
        u = iv.unit_roundoff(dtype)
        W_hh, W_ih, b, emb = W.weight_hh, W.weight_ih, W.bias, W.embedding
        n_terms = W_hh.shape[1] + W_ih.shape[1] + 2
        base = np.median(E[:, :H], axis=0)
        base_term = W_hh @ base
        zrad = np.abs(W_hh) @ R[:H]
        hmax = np.abs(E[:, :H]).max(axis=0) + R[:H]
        absWhh_h = np.abs(W_hh) @ hmax
        err_coef = iv.gamma(n_terms, u) + iv.gamma(n_terms + 2, _U64)
        for start in range(0, P, chunk):
            rows_all = np.arange(start, min(P, start + chunk))
            # centres as a sparse offset from their median: structured encodings are cheap
            delta = sps.csr_matrix(E[rows_all, :H] - base)
            zc = base_term[None, :] + np.asarray(delta @ W_hh.T)
            for a in range(len(self.machine.alphabet)):
                tgt = self.abst.node_succ[rows_all, a]
                live = tgt >= 0
                if not live.any():
                    continue
                x = emb[a]
                absum = absWhh_h + np.abs(W_ih) @ np.abs(x) + np.abs(b)
                err = err_coef * absum + n_terms * iv.tiny(dtype)
                err = np.where(overflow_free(absum, err_coef, dtype), err, np.nan)
                mid = zc[live] + (W_ih @ x + b)[None, :]
                rad = zrad[None, :] + err[None, :] + iv.gamma(2, _U64) * np.abs(mid)
                yield rows_all[live], a, tgt[live], iv.Interval(mid - rad, mid + rad)
            notify(self.progress, stage, rows_all[-1] + 1, P)

    def image(self, z: iv.Interval, rows: np.ndarray, T: np.ndarray, R: np.ndarray,
              kernel: str, settled: np.ndarray, drift: np.ndarray) -> iv.Interval:
        """The enclosure of the next states [h; c] from pre-activations z of the nodes ``rows``
        (boxes of radii R) moving to successors at T: tanh for an Elman cell, `lstm_image` for
        an LSTM (whose settled and drifting cell radii are folded into ``settled``/``drift``)."""
        H, dtype = self.H, self.dtype
        if self.cell == "rnn":
            return iv.tanh(z, dtype, kernel)
        gates = tuple(z[:, k * H:(k + 1) * H] for k in range(4))
        im = lstm_image(gates, self.E[rows, H:], R[H:], T[:, H:], R[None, H:], dtype, kernel)
        settled[H:] = np.maximum(settled[H:], im.settled.max(axis=0))
        drift[H:] = np.maximum(drift[H:], im.drift.max(axis=0))
        return iv.Interval(np.concatenate([im.h.lo, im.c.lo], 1),
                           np.concatenate([im.h.hi, im.c.hi], 1))

    def step(self, R: np.ndarray, kernel: str, stage: str) -> _Pass:
        """Enclose one step of every (node, symbol) case with boxes of radii R (S, 1). A
        deviation that is NaN (a non-finite enclosure, or a sum that could overflow the dtype)
        propagates into ``dev`` and is recorded in ``worst``, so the pass fails on it."""
        E, chunk = self.E, self.chunk
        R = R[:, 0]
        P, S = E.shape
        limits.check(f"certifying {self.net.construction}: one chunk of {min(chunk, P):,} pairs",
                     24.0 * min(chunk, P) * S * 8 * (4 if self.cell == "lstm" else 1),
                     "max_bytes", hint="pass a smaller chunk")
        dev = np.zeros(S)
        drift = np.zeros(S)
        settled = np.zeros(S)
        worst: dict = {}
        cases = 0
        for rows, a, tgt, z in self.preactivations(R, stage):
            T = E[tgt]
            cases += len(rows)
            out = self.image(z, rows, T, R, kernel, settled, drift)
            d_all = np.maximum(out.hi - T, T - out.lo)     # NaN where the enclosure is
            j_max = d_all.argmax(axis=0)                   # argmax picks the first NaN
            d_new = d_all[j_max, np.arange(S)]
            new = (d_new > dev) | (np.isnan(d_new) & ~np.isnan(dev))
            for j in np.nonzero(new)[0]:
                r = j_max[j]
                worst[int(j)] = (int(rows[r]), a, float(out.lo[r, j]), float(out.hi[r, j]),
                                 float(T[r, j]))
            dev = np.maximum(dev, d_all.max(axis=0))
        return _Pass(dev[:, None], drift, settled, worst, cases)

    def readout(self, R: np.ndarray) -> tuple[FailingCase | None, float, int]:
        """The readout enclosure on every node's box, by chunks (slack NaN-safe)."""
        slack_min, failing = math.inf, None
        for start in range(0, len(self.E), self.chunk):
            rows = np.arange(start, min(len(self.E), start + self.chunk))
            fail, slack = self._readout_rows(rows, R[:self.H, 0])
            slack_min = nan_min(slack_min, slack)
            failing = failing or fail
        return failing, slack_min, 0

    def _readout_rows(self, rows: np.ndarray, R_h: np.ndarray
                      ) -> tuple[FailingCase | None, float]:
        W, dtype = self.W, self.dtype
        h = iv.Interval.around(self.E[rows, :self.H], R_h)
        z = iv.affine(W.readout_weight, h, W.readout_bias, dtype)
        safe = _affine_overflow_free(W.readout_weight, h, W.readout_bias, dtype).all(1)
        if W.out_weight is not None:
            safe &= _affine_overflow_free(W.out_weight, z, W.out_bias, dtype).all(1)
            z = iv.affine(W.out_weight, z, W.out_bias, dtype)
        expected = self.fields["output"][rows]
        if self.machine.output_kind in ("accept", "next_set"):
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
            if self.machine.output_kind == "symbol":
                j = int(y[r])
            return (FailingCase("readout", self.pair_desc(int(rows[r])), None, j, f"logit {j}",
                                (float(z.lo[r, j]), float(z.hi[r, j])), required(r, j)),
                    float(slack.min()))
        return None, float(slack.min())


def _affine_overflow_free(W: np.ndarray, x: iv.Interval, b: np.ndarray, dtype: torch.dtype
                          ) -> np.ndarray:
    """Where fl(W x + b) over the box x cannot overflow (`overflow_free`), per output."""
    n = W.shape[1] + 1
    coef = iv.gamma(n, iv.unit_roundoff(dtype)) + iv.gamma(n + 2, _U64)
    return overflow_free(x.mag @ np.abs(W).T + np.abs(b), coef, dtype)


def certify(machine: Machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Box induction over the explored (configuration, state) nodes (module docstring), under
    ``kernel``, retried under the saturating model when the ulp model proves less than every
    length (`ulp_then_saturating`). Arguments are checked by `pdanet.verify.certify.certify`."""
    check_pair(machine, net)
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    fam = Boxes(machine, run.net, max_configs, chunk, progress)
    notify(progress, "explore", len(fam.E), len(fam.E))
    run = replace(run, configs=len(fam.E), notes=(LIVE_NOTE,))
    bad = fam.rejection()
    if bad is not None:
        return run.refused(bad, "the box centres are not what the network's decoder reads")
    return prove(fam, run, eps, retry=True)


__all__ = ["QUANTA", "Boxes", "Explored", "certify", "explore", "explore_at"]
