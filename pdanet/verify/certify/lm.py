"""Certificates for Minsky language models (`pdanet.constructions.lm.LMUnits`): the hidden state
stays in a certified box around its one-hot centre for every length, and from the boxes a
rigorous bound on the log-probability error.

1. *State*: the recurrent part is the DFA Minsky construction, certified exactly as the DFA
   networks are (`box.Boxes` and the induction of `induction`, over the explored (PFSA state,
   network state) nodes, in the module's dtype with outward rounding): every state h_t lies in
   the R-box of the centre of its configuration. The readout check of the induction is the
   only that the logits are enclosed on the invariant boxes (finite, no overflow).
2. *Readout*: on each node's box the logits z = O₂(O₁h + b₁) + b₂ are enclosed by interval
   arithmetic in the dtype (`intervals.affine`, rounding included), and compared with the ideal
   logits ℓ* of the node's PFSA state, computed here from the machine's own probabilities
   (ln p within 2⁻¹²⁰ by `lm.exact_log`, then as float64 within 2⁻⁵²·|ℓ*|; the floor F for
   probability 0), never read from the network: |Δℓ_o| ≤ δ. Since log-softmax is 1-Lipschitz in each
   logit and the log-sum-exp moves by at most max δ, |ln softmax(z)_o − ln softmax(ℓ*)_o| ≤
   2·max δ; and ln softmax(ℓ*)_o = ln p(o) − ln(1 + n·e^F) for a possible symbol o, n the
   impossible symbols of the state, F the floor. So every possible symbol's log-probability
   is within ``2·max δ + ln(1 + n·e^F)`` nats of the machine's, and the impossible ones carry
   total mass ≤ n·e^(F + 2·max δ).
3. *Tight radius*: once the boxes R are invariant, every state after one step or more lies in
   the image of a box, whose deviation from its centre (the pass's ``dev``) is usually far
   smaller than R (saturated units); the initial state is its centre exactly. The bound of 2.
   is then evaluated on those image radii: that is ``logprob_error``, the certified bound in
   nats per symbol (for every position and possible symbol, hence for the log-likelihood per
   symbol of every string of positive probability), the smaller of the kernel models' (the
   certificate's own and "saturating", whose facts `intervals.saturation` checks). The
   certificate holds when it is at most ``tolerance``. For Elman networks whose units are
   exactly ±1 on the image boxes (radius 0, which the saturating kernel facts give), the
   readout is evaluated exactly instead of by intervals: its code layer sums multiples of 1/2
   that every float order of summation computes exactly (`LMBoxes._exact_bound`), so the
   logits are the stored floats of ln p and the bound is twice their rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from pdanet.automata.base import Machine
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.lm import LMUnits, exact_log
from pdanet.errors import CertificationError
from pdanet.verify import intervals as iv
from pdanet.verify.certify.box import Boxes, _affine_overflow_free
from pdanet.verify.certify.core import (
    EPS_LADDER,
    Certificate,
    FailingCase,
    Progress,
    begin,
    check_pair,
    notify,
)
from pdanet.verify.certify.induction import LIVE_NOTE, induct, prove

#: the largest certified log-probability error (nats per symbol) a certificate accepts
DEFAULT_TOLERANCE = 5e-2
_F64 = 2.0**-52


@dataclass(frozen=True)
class LMCertificate(Certificate):
    """A `Certificate` of a Minsky language model with the certified bounds (module
    docstring): ``logprob_error`` — |ln q(o | prefix) − ln p(o | prefix)| for every prefix of
    positive probability (of the lengths the certificate covers) and every possible symbol o, in
    nats; ``logit_error`` — max |Δ logit| on the image boxes; ``impossible_mass`` — the largest
    softmax mass on impossible symbols; ``tolerance`` — the largest bound the certificate
    accepts."""

    logprob_error: float = math.nan
    logit_error: float = math.nan
    impossible_mass: float = math.nan
    tolerance: float = math.nan

    def __str__(self) -> str:
        line = (f"  log-probability error ≤ {self.logprob_error:.3g} nats per symbol (logits "
                f"within {self.logit_error:.3g}; mass on impossible symbols ≤ "
                f"{self.impossible_mass:.3g})")
        return super().__str__() + ("\n" + line if self.ok else "")


class LMBoxes(Boxes):
    """`Boxes` whose readout check is the log-probability bound of the module docstring."""

    def __init__(self, machine: Machine, net: CompiledNetwork, max_configs: int, chunk: int,
                 progress: Progress | None, tolerance: float):
        super().__init__(machine, net, max_configs, chunk, progress)
        abst = net.abstraction
        self.tolerance = tolerance
        self.floor = float(abst.floor)
        code_of = {q: c for c, q in enumerate(abst.code_states)}
        states = np.asarray(self.fields["state"]).reshape(-1)
        self.node_code = np.array([code_of.get(int(q), -1) for q in states], dtype=np.int64)
        # the ideal logits come from the machine, never from the network's weights
        logs = {}
        rows = np.asarray(machine.probs, dtype=np.float64)
        ideal = np.full(rows.shape, self.floor)
        for q, o in zip(*np.nonzero(rows > 0)):
            p = machine._rows[q, o]
            if p not in logs:
                logs[p] = float(exact_log(p))
            ideal[q, o] = logs[p]
        self.node_state = states
        self.ideal_rows = ideal                                   # (Q, O)
        probs = np.asarray(self.fields["output"]).reshape(len(states), -1)
        self.impossible = (probs <= 0).sum(axis=1)                # per node
        self.last_R: np.ndarray | None = None

    def rejection(self) -> FailingCase | None:
        bad = super().rejection()
        if bad is None and (self.node_code < 0).any():
            p = int(np.argmax(self.node_code < 0))
            return FailingCase("encoding", self.pair_desc(p), None, -1, "readout code",
                               (math.nan, math.nan), (math.nan, math.nan))
        return bad

    def bound(self, R_h: np.ndarray) -> tuple[float, float, float, tuple | None]:
        """(log-prob bound, max |Δ logit|, impossible mass, worst (node, symbol, lo, hi, ideal))
        on the boxes of radii R_h around every node (NaN where an enclosure overflows)."""
        exact = self._exact_bound(R_h)
        if exact is not None:
            return exact
        W, dtype = self.W, self.dtype
        worst_b, worst_d, worst_m, where = 0.0, 0.0, 0.0, None
        for start in range(0, len(self.E), self.chunk):
            rows = np.arange(start, min(len(self.E), start + self.chunk))
            h = iv.Interval.around(self.E[rows, :self.H], R_h)
            safe = _affine_overflow_free(W.readout_weight, h, W.readout_bias, dtype).all(1)
            z = iv.affine(W.readout_weight, h, W.readout_bias, dtype)
            safe &= _affine_overflow_free(W.out_weight, z, W.out_bias, dtype).all(1)
            z = iv.affine(W.out_weight, z, W.out_bias, dtype)
            ideal = self.ideal_rows[self.node_state[rows]]
            dev = np.maximum(z.hi - ideal, ideal - z.lo) + _F64 * np.abs(ideal)
            dev = np.where(safe[:, None], dev, np.nan)
            d = dev.max(axis=1)
            n = self.impossible[rows]
            b = 2 * d + np.log1p(n * math.exp(self.floor))
            mass = n * np.exp(self.floor + 2 * d)
            b = np.where(np.isnan(d), np.inf, b)
            r = int(np.argmax(b))
            if not (b[r] <= worst_b) or where is None:
                o = int(np.nanargmax(np.nan_to_num(dev[r], nan=np.inf)))
                where = (int(rows[r]), o, float(z.lo[r, o]), float(z.hi[r, o]),
                         float(ideal[r, o]))
            worst_b = max(worst_b, float(b.max()))
            worst_d = max(worst_d, float(np.nan_to_num(d, nan=np.inf).max()))
            worst_m = max(worst_m, float(mass.max()))
        return worst_b, worst_d, worst_m, where

    def _exact_bound(self, R_h: np.ndarray) -> tuple[float, float, float, tuple] | None:
        """The bound when the Elman readout is computed exactly (None when it may not be): every
        hidden unit is exactly ±1 on every node (radius 0), the code layer's weights and biases
        are multiples of 1/2 whose absolute sum stays below 2^(mantissa bits) / 2, so every
        partial sum of the code layer is an exactly representable multiple of 1/2 whatever the
        order of summation, and gives the one-hot code; the logits are then one weight times
        1 plus zeros (and a zero bias): exactly the stored float of ln p, within u·|ℓ*|."""
        W, dtype = self.W, self.dtype
        if self.cell != "rnn" or not (R_h == 0).all() or W.out_weight is None:
            return None
        h = self.E[:, :self.H]
        if not np.isin(h, (-1.0, 1.0)).all() or (W.out_bias != 0).any():
            return None
        w2, b2 = 2 * W.readout_weight, 2 * W.readout_bias
        if not ((w2 == np.round(w2)).all() and (b2 == np.round(b2)).all()):
            return None
        span = np.abs(W.readout_weight).sum(axis=1) + np.abs(W.readout_bias)
        if not (span < 0.5 / iv.unit_roundoff(dtype)).all():  # 2^(p-1): multiples of 1/2 exact
            return None
        z = h @ W.readout_weight.T + W.readout_bias       # exact: small multiples of 1/2
        onehot = np.isin(z, (0.0, 1.0)).all(axis=1) & (z.sum(axis=1) == 1)
        if not (onehot & (z.argmax(axis=1) == self.node_code)).all():
            return None
        logits = W.out_weight[:, self.node_code].T         # (P, O): the stored floats
        ideal = self.ideal_rows[self.node_state]
        dev = np.abs(logits - ideal) + _F64 * np.abs(ideal)
        d = dev.max(axis=1)
        b = 2 * d + np.log1p(self.impossible * math.exp(self.floor))
        r = int(np.argmax(b))
        o = int(np.argmax(dev[r]))
        mass = self.impossible * np.exp(self.floor + 2 * d)
        return (float(b.max()), float(d.max()), float(mass.max()),
                (r, o, float(logits[r, o]), float(logits[r, o]), float(ideal[r, o])))

    def readout(self, R: np.ndarray) -> tuple[FailingCase | None, float, int]:
        """During the induction: only that the logits on the invariant boxes are enclosed
        (finite, no overflow); the bound itself is taken on the image radii (`certify`)."""
        self.last_R = R.copy()
        b, _, _, where = self.bound(R[:self.H, 0])
        if math.isfinite(b) or where is None:
            return None, math.inf, len(self.E)
        return self.failing_readout(where, math.inf), math.nan, len(self.E)

    def failing_readout(self, where: tuple, tolerance: float) -> FailingCase:
        p, o, lo, hi, ideal = where
        sym = self.machine.output_alphabet.symbols[o]
        half = tolerance / 2
        return FailingCase("readout", self.pair_desc(p), None, o, f"logit of {sym!r}", (lo, hi),
                           (ideal - half, ideal + half))


def certify(machine: Machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None,
            tolerance: float = DEFAULT_TOLERANCE) -> LMCertificate:
    """Box induction for the state (as for DFA Minsky networks), then the certified
    log-probability bound (module docstring). `machine` is the PFSA or the bounded PDPDA the
    network was compiled from. Arguments are checked by `pdanet.verify.certify.certify`;
    ``tolerance`` (nats): the certificate holds only if the certified log-probability error
    is at most this; its ``readout_margin`` is tolerance − bound."""
    check_pair(machine, net)

    if not isinstance(net.abstraction, LMUnits):
        raise CertificationError(f"{net.construction} is not a Minsky language model (its "
                                 f"abstraction is {type(net.abstraction).__name__})")
    if not (isinstance(tolerance, (int, float)) and not isinstance(tolerance, bool)
            and math.isfinite(tolerance) and tolerance > 0):
        raise CertificationError(f"tolerance={tolerance!r} must be a positive number of nats")
    pfsa = net.machine
    run = begin(pfsa, net, dtype, kernel)
    if isinstance(run, Certificate):
        return _lm(run)
    fam = LMBoxes(pfsa, run.net, max_configs, chunk, progress, float(tolerance))
    notify(progress, "explore", len(fam.E), len(fam.E))
    run = replace(run, configs=len(fam.E), notes=(LIVE_NOTE,))
    bad = fam.rejection()
    if bad is not None:
        return _lm(run.refused(bad, "the box centres are not what the network's decoder reads"))
    cert = prove(fam, run, eps, retry=True)
    if not cert.ok:
        return _lm(cert, tolerance=float(tolerance))
    # the invariant radii of the certificate's induction (again, recording them), then one
    # pass: the image radii; smaller caps while they shrink the bound (saturated units)
    dev0 = np.abs(fam.s0 - fam.E0)
    at = replace(run, kernel=cert.kernel)
    best = None
    for cap in [cert.eps] + [c for c in EPS_LADDER if c < cert.eps]:
        if not induct(fam, at, cap).ok or fam.last_R is None:
            break
        found = None
        for kern in dict.fromkeys((cert.kernel, "saturating")):
            ps = fam.step(fam.last_R, kern, f"image radii ({kern})")
            R_img = np.maximum(np.nan_to_num(ps.dev[:, 0], nan=np.inf), dev0)
            R_img = np.minimum(R_img, fam.last_R[:, 0])  # the images lie in the invariant boxes
            got = fam.bound(R_img[:fam.H]) + (kern, float(R_img[:fam.H].max()), cap)
            if found is None or got[0] < found[0]:
                found = got
        improved = best is None or found[0] < 0.5 * best[0]
        if best is None or found[0] < best[0]:
            best = found
        if not improved or best[5] == 0:
            break
    if best is None:  # cannot happen: the certificate's own induction, deterministic
        raise CertificationError("the induction did not reproduce; certify again")
    b, d, mass, where, kern, radius, cap = best
    lengths = "" if cert.all_lengths else " (of the lengths above)"
    note = (f"log-probability error ≤ {b:.3g} nats per symbol at every position of every string "
            f"of positive probability{lengths}: 2·max|Δ logit| ({d:.3g}) on the image boxes "
            f"of the boxes invariant at ε = {cap:g} (largest hidden radius {radius:.3g}, kernel "
            f"model {kern}) plus the floor's share "
            f"ln(1 + n·e^F), F = {int(fam.floor)}")
    if not (b <= tolerance):
        fc = fam.failing_readout(where, float(tolerance)) if where is not None else None
        cert = replace(cert, ok=False, all_lengths=False, max_length=None, failing=fc,
                       readout_margin=float(tolerance) - b,
                       notes=cert.notes + (note + f", above the tolerance {tolerance:g}",))
    else:
        cert = replace(cert, readout_margin=float(tolerance) - b, notes=cert.notes + (note,))
    return _lm(cert, logprob_error=b, logit_error=d, impossible_mass=mass,
               tolerance=float(tolerance))


def _lm(cert: Certificate, **extra: float) -> LMCertificate:
    base = {f.name: getattr(cert, f.name) for f in fields(Certificate)}
    return LMCertificate(**base, **extra)


__all__ = ["DEFAULT_TOLERANCE", "LMBoxes", "LMCertificate", "certify"]
