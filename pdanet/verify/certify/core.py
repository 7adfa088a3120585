"""What every certificate family shares: the result types, argument and pair checks, the
non-finite guards, the search over box caps and the kernel-model retry — each written once.

A family (`pdanet.verify.certify.FAMILIES`) supplies only what is particular to its networks
(a step enclosure and an invariant); everything it reports goes through `Run.certificate`.

Soundness with floats. Every float a proof uses is checked: a weight or bias that is NaN or ±inf
fails the certificate before anything else (`weights_failure` names the block and the entry);
every margin, deviation and containment is tested so that NaN fails (``not (x <= r)``, never
``x > r``); a sum whose terms could overflow the dtype (Σ|terms| beyond its largest float, where
the rounding model no longer holds) fails as non-finite (`overflow_free`); and a certificate whose
margins are NaN is never a proof (`no_nan`). Arguments are validated first (`check_arguments`),
and the machine must be the one the network was compiled for (`check_pair`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch

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
#: the box caps tried, largest first, when ``eps`` is not given
EPS_LADDER = (0.25, 0.1, 0.03, 0.01, 3e-3, 1e-3, 3e-4, 1e-4)
#: rounds of the radius fixed point (`pdanet.verify.certify.induction`)
MAX_ROUNDS = 12
#: failures that no other kernel model or box cap can change
FINAL_KINDS = ("weights", "nonfinite", "encoding", "initial")


@dataclass(frozen=True)
class FailingCase:
    """Where the induction breaks: the configuration, the symbol, the unit and its interval."""

    kind: str  # "initial", "step", "readout", "encoding", "weights", "nonfinite", ...
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


# --- one certification: its fixed facts, and the certificate it ends with ------------------------

@dataclass(frozen=True)
class Run:
    """The fixed facts of one certification: the machine, the network (in the dtype the proof
    covers), the kernel model, the start time, the configurations covered and standing notes.
    `certificate` turns a verdict into a `Certificate` (the one result builder)."""

    machine: Any
    net: CompiledNetwork
    kernel: str
    t0: float
    configs: int = 0
    notes: tuple[str, ...] = ()

    @property
    def dtype(self) -> torch.dtype:
        return self.net.dtype

    def certificate(self, ok: bool, *, eps: float, state_margin: float, readout_margin: float,
                    cases: int, failing: FailingCase | None = None, all_lengths: bool | None = None,
                    max_length: int | None = None, extra: tuple[str, ...] = ()) -> Certificate:
        """The certificate of this run (``all_lengths`` defaults to ``ok``)."""
        return Certificate(
            ok=ok, all_lengths=ok if all_lengths is None else all_lengths, max_length=max_length,
            eps=float(eps), scale=str(self.net.scale),
            dtype=str(self.net.dtype).replace("torch.", ""), state_margin=float(state_margin),
            readout_margin=float(readout_margin), configs=int(self.configs), cases=int(cases),
            seconds=time.perf_counter() - self.t0, construction=self.net.construction,
            machine=repr(self.machine), failing=failing, notes=self.notes + tuple(extra),
            kernel=self.kernel)

    def refused(self, failing: FailingCase, note: str) -> Certificate:
        """NOT CERTIFIED for a failure found before any case was checked."""
        return self.certificate(False, eps=0.0, state_margin=math.nan, readout_margin=math.nan,
                                cases=0, failing=failing, extra=(note,))


def begin(machine: Any, net: CompiledNetwork, dtype: torch.dtype | None, kernel: str
          ) -> Run | Certificate:
    """Start a certification: the clock, and `net` in ``dtype`` (None: its own); or, when a
    weight is NaN or infinite, the NOT CERTIFIED certificate naming it (`nonfinite_weights`)."""
    t0 = time.perf_counter()
    if dtype is not None and dtype != net.dtype:
        net = net.with_scale(dtype=dtype)
    bad = nonfinite_weights(machine, net, kernel, t0)
    return bad if bad is not None else Run(machine, net, kernel, t0)


def rejected(machine: Any, net: CompiledNetwork, failing: FailingCase, kernel: str,
             t0: float, note: str) -> Certificate:
    """A NOT CERTIFIED certificate for a failure found before any case was checked."""
    return Run(machine, net, kernel, t0).refused(failing, note)


# --- arguments, weights and NaN-safe comparisons --------------------------------------------------

def is_int(x: Any) -> bool:
    """An int (Python or numpy) that is not a bool."""
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
        if not is_int(v) or v < 1:
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
    """The first non-finite entry of any float weight block (in the given order), named, or
    None. Blocks are arrays or tensors; non-float blocks (integer codes) are skipped."""
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
    `weights_failure`; blocks are named as the module names its parameters), or None when
    every weight is finite."""
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


def no_nan(cert: Certificate) -> Certificate:
    """The last guard: a certificate whose margins are NaN is not a proof."""
    if cert.ok and (math.isnan(cert.state_margin) or math.isnan(cert.readout_margin)):
        fc = FailingCase("nonfinite", "the margins", None, -1, "state/readout margin",
                         (cert.state_margin, cert.readout_margin), (0.0, math.inf))
        return replace(cert, ok=False, all_lengths=False, max_length=None, failing=fc)
    return cert


# --- searches: box caps and kernel models -----------------------------------------------------

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


def not_final(cert: Certificate) -> bool:
    """Whether another kernel model might prove more: no failure, or one not in `FINAL_KINDS`."""
    return cert.failing is None or cert.failing.kind not in FINAL_KINDS


def ulp_then_saturating(attempt: Callable[[str], Certificate], kernel: str, dtype: torch.dtype,
                        curable: Callable[[Certificate], bool] = not_final) -> Certificate:
    """``attempt(kernel)``; under ``kernel="ulp"``, a certificate that does not cover every
    length and that ``curable`` says exact saturation might improve is retried under the
    "saturating" model (`intervals.KERNEL_MODELS`). The better of the two is returned, with a
    note saying what the other model proved and which kernel facts were used."""
    cert = attempt(kernel)
    if kernel != "ulp" or (cert.ok and cert.all_lengths) or not curable(cert):
        return cert
    sat = attempt("saturating")
    z = iv.saturation(dtype)
    facts = (f"σ(z) = 1 for z ≥ {z.sigmoid:.6g}, tanh(z) = ±1 for |z| ≥ {z.tanh:.6g}; "
             f"checked: {z.checked}")
    if sat.ok and (sat.all_lengths or not cert.ok
                   or (sat.max_length or 0) > (cert.max_length or 0)):
        what = (f"fails ({cert.failing})" if not cert.ok
                else f"holds for every length ≤ {cert.max_length:,}")
        note = (f"under the ulp kernel model alone the proof {what}; this one adds exact "
                f"saturation of the kernels ({facts})")
        return replace(sat, notes=sat.notes + (note,))
    note = (f"the ulp kernel model was used: adding exact saturation of the kernels proves no "
            f"more ({facts})")
    return replace(cert, notes=cert.notes + (note,))


__all__ = ["EPS_LADDER", "EPS_MAX", "FINAL_KINDS", "MAX_ROUNDS", "Certificate", "FailingCase",
           "Progress", "Run", "begin", "best_over_caps", "check_arguments", "check_pair",
           "is_int", "nan_min", "no_nan", "nonfinite_weights", "not_final", "notify",
           "overflow_free", "rejected", "ulp_then_saturating", "weights_failure"]
