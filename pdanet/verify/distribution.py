"""`verify_lm`: compare a compiled language model's next-symbol distributions with its machine's.

At every position t = 0 … |s| of every checked string s where the prefix s[:t] has positive
probability, the network's log-softmax ln q(· | s[:t]) — computed in the network's own dtype —
is compared with the machine's ln p(· | s[:t]) over Σ ∪ {EOS}:

- for each *possible* symbol (p > 0): the error |ln q − ln p| in nats;
- for the *impossible* ones (p = 0; the network gives them its floor logit): their total mass
  under q, which is also how far the possible symbols' log-probabilities are pushed down.

A position agrees when both are ≤ ``tolerance`` (NaN never agrees). The per-string
log-likelihood ln q(s) (EOS included) is compared with ln p(s) in nats per symbol (|s| + 1
factors; for a string after which EOS is impossible, such as most exhaustive prefixes, the
prefix log-likelihood over its |s| factors). Defaults: ``tolerance`` = `DEFAULT_TOLERANCE` of the network's dtype (1e-4 nats for
float32 and narrower, 1e-10 for float64).

Strings come in phases, in this order, stopping after the first phase with a disagreement:
``given`` (the caller's strings), ``exhaustive`` (every string of length ≤ ``max_length`` with
positive prefix probability, in shortlex order) and ``sampled`` (``samples`` strings drawn from
the machine with ``seed``). The first disagreement found (phase order, then string, then
position) is the report's counterexample.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from pdanet.constructions.base import as_dtype
from pdanet.constructions.ns_lm import TOLERANCE, PDALanguageModel, as_language_model
from pdanet.errors import InputError, VerificationError
from pdanet.verify.report import PhaseResult

DEFAULT_TOLERANCE = {"float64": 1e-10, "other": 1e-4}
DEFAULT_MAX_STRINGS = 1_000_000


@dataclass(frozen=True)
class LMCounterexample:
    """The first position where the distributions differ beyond the tolerance: the string, the
    position t (symbols read), the symbol whose log-probability differs most (None: the mass on
    impossible symbols is what exceeds it), the machine's and the network's values (ln p and
    ln q; for the impossible mass, 0 and the mass) and the error."""

    phase: str
    string: tuple
    formatted: str
    position: int
    symbol: Any
    expected: float
    got: float
    error: float

    def __str__(self) -> str:
        what = (f"ln p({self.symbol!r} | prefix) = {self.expected:.12g}, network "
                f"{self.got:.12g}" if self.symbol is not None else
                f"mass on impossible symbols {self.got:.3g}")
        return (f"string {self.formatted!r} ({self.phase}), position {self.position}: {what} "
                f"(error {self.error:.3g} nats)")


@dataclass(frozen=True)
class LMReport:
    """What `verify_lm` found (module docstring). Errors are in nats: ``max_logprob_error`` is
    max |ln q − ln p| over possible symbols at every checked position, ``max_impossible_mass``
    the largest mass q puts on impossible symbols, ``max_loglik_error`` and
    ``mean_loglik_error`` the per-string |ln q(s) − ln p(s)| / (|s| + 1) (nats per symbol,
    EOS counted where it is possible), ``per_symbol`` the max |Δ ln p| of each output symbol."""

    ok: bool
    machine: str
    network: str
    dtype: str
    tolerance: float
    strings_checked: int
    positions_checked: int
    max_logprob_error: float
    max_impossible_mass: float
    max_loglik_error: float
    mean_loglik_error: float
    per_symbol: tuple[tuple[Any, float], ...]
    phases: tuple[PhaseResult, ...]
    seconds: float
    counterexample: LMCounterexample | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def phase(self, name: str) -> PhaseResult:
        """The phase called `name` (KeyError naming the phases there are)."""
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(f"no phase {name!r}; phases: {[p.name for p in self.phases]}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["per_symbol"] = [[str(s), e] for s, e in self.per_symbol]
        if self.counterexample is not None:
            d["counterexample"]["string"] = [str(s) for s in self.counterexample.string]
            d["counterexample"]["symbol"] = (None if self.counterexample.symbol is None
                                             else str(self.counterexample.symbol))
        return _finite(d)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    def __str__(self) -> str:
        verdict = "OK" if self.ok else "FAILED"
        lines = [
            (f"verify_lm {self.machine} against {self.network} ({self.dtype}): {verdict} — "
            f"{self.strings_checked:,} strings, {self.positions_checked:,} positions in "
            f"{self.seconds:.3g} s; tolerance {self.tolerance:g} nats"),
            (f"  max |Δ ln p| {self.max_logprob_error:.3g} nats, max mass on impossible symbols "
            f"{self.max_impossible_mass:.3g}"),
            (f"  log-likelihood error per symbol: max {self.max_loglik_error:.3g}, mean "
            f"{self.mean_loglik_error:.3g} nats"),
            "  per symbol: " + ", ".join(f"{s}: {e:.3g}" for s, e in self.per_symbol),
        ]
        for p in self.phases:
            stop = "" if p.complete else " (stopped at the counterexample)"
            lines.append(f"  {p.name} [{p.description}]: {p.strings:,} strings, {p.steps:,} "
                         f"positions, {p.seconds:.3g} s{stop}")
        if self.counterexample is not None:
            lines.append(f"  first disagreement: {self.counterexample}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _machine_for(machine: Any, net: Any) -> Any:
    """The language model to compare with: `machine` itself when the network was compiled for
    it or from it (a bounded PDPDA is simulated as itself, independently of its PFSA); a
    probabilistic `WeightedPDA` (an ``ns_lm`` network's) through its `PDALanguageModel`, which
    may also be given itself."""
    compiled_for = getattr(net, "machine", None)
    source = getattr(net, "compiled_from", None)
    given = machine
    if isinstance(machine, PDALanguageModel):     # the adapter of the network's machine
        machine = machine.machine
    if machine is compiled_for or machine == compiled_for or (
            source is not None and (machine is source or machine == source)):
        if given is not machine:
            return given
        if getattr(machine, "output_kind", None) == "distribution":
            return machine
        info = getattr(net, "info", None) or {}
        return as_language_model(machine, info.get("tolerance", TOLERANCE))
    raise VerificationError(f"the network was compiled for {compiled_for!r}, not for "
                            f"{machine!r}; verify it against the machine it was compiled from")


def _length_range(lengths: Any) -> tuple[int, int]:
    """(lo, hi) from ``sample_lengths``: an int n (n, n) or a pair (lo, hi), 0 ≤ lo ≤ hi."""
    pair = (lengths, lengths) if isinstance(lengths, (int, np.integer)) else lengths
    try:
        lo, hi = (int(v) for v in pair)
        ok = all(not isinstance(v, bool) and isinstance(v, (int, np.integer)) for v in pair)
    except (TypeError, ValueError):
        ok = False
    if not ok or not 0 <= lo <= hi:
        raise InputError(f"sample_lengths={lengths!r} must be an integer ≥ 0 or a pair "
                         "(lo, hi) with 0 ≤ lo ≤ hi")
    return lo, hi


def _walks(machine: Any, n: int, lo: int, hi: int, rng: np.random.Generator) -> list[tuple]:
    """n prefixes of lengths uniform in [lo, hi], each drawn symbol by symbol from the machine's
    distribution without EOS (`live_walks`; a walk stops early where only EOS may follow)."""
    lengths = rng.integers(lo, hi + 1, size=n)
    ids, got = machine.live_walks(n, max(hi, 0), rng)
    syms = machine.alphabet.symbols
    return [tuple(syms[i] for i in ids[b, :min(int(got[b]), int(lengths[b]))])
            for b in range(n)]


def live_strings(machine: Any, max_length: int, max_strings: int = DEFAULT_MAX_STRINGS
                 ) -> list[tuple]:
    """Every string of length ≤ max_length whose prefix probability is positive, shortlex.
    VerificationError beyond ``max_strings`` strings."""
    syms = machine.alphabet.symbols
    level = [((), machine.initial())]
    out = [()]
    for _ in range(max_length):
        nxt = []
        for s, c in level:
            row = machine.output(c)
            for a, sym in enumerate(syms):
                if row[a] > 0:
                    nxt.append((s + (sym,), machine.step(c, sym)))
        out.extend(s for s, _ in nxt)
        if len(out) > max_strings:
            raise VerificationError(f"more than max_strings={max_strings:,} strings of positive "
                                    f"probability up to length {max_length}; lower max_length")
        level = nxt
    return out


@dataclass
class _Tally:
    strings: int = 0
    positions: int = 0
    max_lp: float = 0.0
    max_mass: float = 0.0
    max_ll: float = 0.0
    sum_ll: float = 0.0
    per_symbol: np.ndarray | None = None


def _check_batch(machine: Any, net: Any, strings: list[tuple], tol: float, tally: _Tally,
                 dtype: torch.dtype) -> tuple[int, int, float, int | None] | None:
    """Compare one batch; update `tally`; the first failure (row, position, error, symbol)."""
    ids, lengths = machine.encode(strings)
    probs = machine.run_batch(ids, lengths)["output"]
    with torch.no_grad():
        _, logits = net.forward(torch.as_tensor(ids))
        lq = torch.log_softmax(logits.to(dtype), dim=-1).double().cpu().numpy()
    B, T1, K = probs.shape
    valid = (np.arange(T1)[None, :] <= lengths[:, None]) & (probs.sum(axis=-1) > 0)
    possible = probs > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = np.where(possible, np.log(np.where(possible, probs, 1.0)), 0.0)
        err = np.where(possible, np.abs(lq - lp), 0.0)
        err = np.where(np.isnan(lq) & possible, np.inf, err)
        mass = np.where(possible, 0.0, np.exp(lq)).sum(axis=-1)
        mass = np.where(np.isnan(mass), np.inf, mass)
    pos_err = np.where(valid, np.maximum(err.max(axis=-1), mass), 0.0)
    # per-string log-likelihoods (EOS at position |s|)
    nxt = np.concatenate([ids, np.full((B, 1), -1)], axis=1)[:, :T1]
    tgt = np.where(np.arange(T1)[None, :] < lengths[:, None], np.maximum(nxt, 0), K - 1)
    take = lambda a: np.take_along_axis(a, tgt[..., None], -1)[..., 0]
    counted = valid & take(possible)  # factors of positive probability (EOS when p(EOS) > 0)
    diff = np.where(counted, take(lq) - take(lp), 0.0).sum(axis=1)
    per = np.abs(diff) / np.maximum(counted.sum(axis=1), 1)
    per = np.where(np.isnan(per), np.inf, per)
    tally.strings += B
    tally.positions += int(valid.sum())
    tally.max_lp = max(tally.max_lp, float(np.where(valid[..., None], err, 0).max(initial=0)))
    tally.max_mass = max(tally.max_mass, float(np.where(valid, mass, 0).max(initial=0)))
    tally.max_ll = max(tally.max_ll, float(per.max(initial=0)))
    tally.sum_ll += float(per.sum())
    sym_err = np.where(valid[..., None], err, 0).reshape(-1, K).max(axis=0)
    tally.per_symbol = sym_err if tally.per_symbol is None else np.maximum(tally.per_symbol,
                                                                           sym_err)
    bad = ~(pos_err <= tol)
    if not bad.any():
        return None
    b, t = map(int, np.argwhere(bad)[0])
    if not (mass[b, t] <= tol) and not (err[b, t].max() > mass[b, t]):
        return b, t, float(mass[b, t]), None
    return b, t, float(err[b, t].max()), int(np.argmax(np.nan_to_num(err[b, t], nan=np.inf)))


def verify_lm(machine: Any, net: Any, *, max_length: int | None = 5, samples: int = 1000,
              strings: list | None = None, seed: int | None = 0, tolerance: float | None = None,
              dtype: Any = None, batch_size: int = 1024,
              max_strings: int = DEFAULT_MAX_STRINGS, sample_lengths: Any = None,
              long_samples: int = 0, long_length: int = 1000) -> LMReport:
    """Compare `net`'s next-symbol distributions with `machine`'s (module docstring).

    Phases: the given ``strings``; every string of positive probability up to ``max_length``;
    ``samples`` strings drawn from the machine (to EOS), or, when ``sample_lengths`` is given
    (an int, or (lo, hi) inclusive), ``samples`` prefixes of those lengths drawn symbol by
    symbol without EOS (`live_walks`: every prefix has positive probability); and
    ``long_samples`` such prefixes of ``long_length`` symbols. Every position of every string
    is compared (the distribution after each prefix, EOS included).

    ``machine``: the PFSA or bounded ProbabilisticDPDA the network was compiled from (a
    bounded PDPDA is simulated as itself), or the probabilistic real-time WeightedPDA of an
    ``ns_lm`` network (compared through `pdanet.constructions.ns_lm.PDALanguageModel`: exact
    next-symbol distributions from the forward weights, EOS from the stop mass). ``dtype``
    re-derives the network in that dtype first.
    Bad arguments raise InputError; a network compiled for another machine VerificationError.
    """
    t_start = time.perf_counter()
    machine = _machine_for(machine, net)
    for name, v, low in (("samples", samples, 0), ("batch_size", batch_size, 1),
                         ("max_strings", max_strings, 1), ("long_samples", long_samples, 0),
                         ("long_length", long_length, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise InputError(f"{name}={v!r} must be an integer ≥ {low}")
    if max_length is not None and (isinstance(max_length, bool)
                                   or not isinstance(max_length, (int, np.integer))
                                   or max_length < 0):
        raise InputError(f"max_length={max_length!r} must be None or an integer ≥ 0")
    if dtype is not None:
        net = net.with_scale(dtype=as_dtype(dtype))
    net_dtype = net.dtype
    dname = str(net_dtype).replace("torch.", "")
    if tolerance is None:
        tolerance = DEFAULT_TOLERANCE["float64" if net_dtype == torch.float64 else "other"]
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or \
            not (tolerance > 0 and math.isfinite(tolerance)):
        raise InputError(f"tolerance={tolerance!r} must be a positive finite number of nats")
    phases: list[tuple[str, str, Any]] = []
    if strings is not None:
        given = [machine.alphabet.split(s) for s in strings]
        phases.append(("given", f"{len(given)} explicit strings", lambda: given))
    if max_length is not None:
        phases.append(("exhaustive", (f"every string of positive probability of length ≤ "
                       f"{max_length}"), lambda: live_strings(machine, max_length, max_strings)))
    rng = np.random.default_rng(seed)
    if samples > 0 and sample_lengths is None:
        phases.append(("sampled", f"{samples} strings drawn from the machine (seed {seed})",
                       lambda: machine.sample(samples, rng)))
    elif samples > 0:
        lo, hi = _length_range(sample_lengths)
        desc = f"{samples} prefixes of length {lo}–{hi} drawn without EOS (seed {seed})"
        phases.append(("sampled", desc, lambda: _walks(machine, samples, lo, hi, rng)))
    if long_samples > 0:
        desc = f"{long_samples} prefixes of length {long_length} drawn without EOS (seed {seed})"
        phases.append(("long", desc,
                       lambda: _walks(machine, long_samples, long_length, long_length, rng)))
    tally = _Tally()
    results: list[PhaseResult] = []
    cex = None
    notes: list[str] = []
    for name, desc, make in phases:
        t0 = time.perf_counter()
        batch_strings = make()
        if name == "given":
            dead = [s for s in batch_strings if machine.prob(s, eos=False) == 0]
            if dead:
                notes.append(f"{len(dead)} given strings have probability 0 (e.g. "
                             f"{machine.alphabet.format(dead[0])!r}); positions after their "
                             "first impossible symbol are not compared")
        before = (tally.strings, tally.positions)
        order = sorted(range(len(batch_strings)), key=lambda i: len(batch_strings[i])) \
            if name == "sampled" else range(len(batch_strings))
        ordered = [batch_strings[i] for i in order]
        for start in range(0, len(ordered), batch_size):
            chunk = ordered[start:start + batch_size]
            fail = _check_batch(machine, net, chunk, float(tolerance), tally, net_dtype)
            if fail is not None and cex is None:
                b, t, error, sym = fail
                s = chunk[b]
                row = machine.output(machine.run(s[:t]))
                with torch.no_grad():
                    ids, _ = machine.encode([s[:t]])
                    _, lg = net.forward(torch.as_tensor(ids))
                    lq = torch.log_softmax(lg[0, -1].to(net_dtype), -1).double().numpy()
                if sym is None:
                    exp_v, got_v = 0.0, error
                    symbol = None
                else:
                    exp_v, got_v = float(np.log(row[sym])), float(lq[sym])
                    symbol = machine.output_alphabet.symbols[sym]
                cex = LMCounterexample(name, tuple(s), machine.alphabet.format(s), t, symbol,
                                       exp_v, got_v, error)
        results.append(PhaseResult(name, desc, tally.strings - before[0],
                                   tally.positions - before[1], time.perf_counter() - t0,
                                   complete=cex is None))
        if cex is not None:
            break
    per_symbol = tuple(zip(machine.output_alphabet.symbols,
                           (float(e) for e in (tally.per_symbol if tally.per_symbol is not None
                                               else np.zeros(len(machine.output_alphabet))))))
    return LMReport(
        ok=cex is None, machine=repr(machine), network=net.construction, dtype=dname,
        tolerance=float(tolerance), strings_checked=tally.strings,
        positions_checked=tally.positions, max_logprob_error=tally.max_lp,
        max_impossible_mass=tally.max_mass, max_loglik_error=tally.max_ll,
        mean_loglik_error=tally.sum_ll / max(tally.strings, 1), per_symbol=per_symbol,
        phases=tuple(results), seconds=time.perf_counter() - t_start, counterexample=cex,
        notes=tuple(notes))


__all__ = ["DEFAULT_TOLERANCE", "LMCounterexample", "LMReport", "live_strings", "verify_lm"]
