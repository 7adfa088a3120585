"""Bounded-length certificates for the NS-RNN (`NSChart`).

The NS-RNN (`pdanet.constructions.ns`) runs Lang's algorithm with the stand-in −L (the
abstraction's ``neg``) for log 0. Its reading differs from the exact one only through runs that
use a missing transition (relative mass ≤ ``error_bound(machine, n)`` =
exp(n·log(K·w_max/w_min) − L)) and float rounding. The bound grows exponentially in n, so no length-free bound exists for this argument:
the certificate proves the reading error ≤ bound(n) for n ≤ max_length, the largest n for which
the bound stays below the decision tolerance.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import torch

from pdanet.constructions.abstraction import NSChart
from pdanet.constructions.base import CompiledNetwork
from pdanet.errors import CertificationError, InputError
from pdanet.verify.certify.core import (
    Certificate,
    FailingCase,
    Progress,
    begin,
    check_arguments,
    check_pair,
    notify,
)


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
    mass is ≤ b(n) = exp(n·log(K·w_max/w_min) − L), K = Q(2G+1) with G the network's stack
    symbols (2× the machine's under the "paper" encoding of ⊥, whose runs are the machine's
    one to one, `pdanet.constructions.ns`). Lemma N2: a relative mass error
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
    if not isinstance(net.abstraction, NSChart):
        raise CertificationError(f"certify_ns_rnn needs an ns_rnn network, got {net.construction}")
    run = begin(machine, net, dtype, "none")
    if isinstance(run, Certificate):
        return run
    net = run.net
    edited = _edited_weight(net)
    if edited is not None:
        return run.refused(edited, "the module's weights are not the compiled ones (trained or "
                           "edited): the length bound is derived from the compiled weights; use "
                           "pn.verify")
    wpda = machine if isinstance(machine, WeightedPDA) else WeightedPDA.from_pda(machine)
    mine = (wpda.num_states, wpda.num_stack, len(wpda.alphabet))
    theirs = (net.module.Q, net.module.machine_stack, net.module.embedding.num_embeddings - 1)
    if mine != theirs:
        raise CertificationError(
            f"the network was compiled for a machine with (states, stack symbols, input symbols) "
            f"= {theirs}, not for {machine!r} with {mine}; certify the network with the machine "
            "it was compiled from")
    L = float(net.abstraction.neg)
    W = wpda.weight_tensor(srm.REAL)
    pos = W[W > 0]
    Gn = net.module.G                                   # the network's stack symbols
    K = wpda.num_states * (2 * Gn + 1)
    growth = math.log(K * pos.max() / pos.min()) if pos.size else 0.0
    decide = max(math.log(K * pos.max()), -math.log(pos.min()), 1e-300) if pos.size else 1e-300
    n_read = int((L + math.log(tol)) / growth) if growth > 0 else 10**18
    while n_read > 0 and error_bound(wpda, n_read, L, Gn) > tol:
        n_read -= 1
    while error_bound(wpda, n_read + 1, L, Gn) <= tol and n_read < 10**18:
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
    bound_n = error_bound(wpda, n_max, L, Gn)
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
    return replace(run, configs=len(strings)).certificate(
        bad is None and n_max >= 1, all_lengths=False, max_length=n_max, eps=float(bound_n),
        state_margin=float(tol - bound_n), readout_margin=float(L / 2 - n_max * decide),
        cases=len(strings), failing=failing, extra=notes)


def certify(machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """An `NSChart` network: `certify_ns_rnn` (no boxes or kernel model: ``eps``,
    ``max_configs``, ``chunk`` and ``kernel`` do not apply). An NS-RNN compiled from a (D)PDA
    holds the weighted PDA made from it, which `certify_ns_rnn` makes again and compares with
    the network; any other machine must be the one the network was compiled for."""
    if type(machine) is type(net.machine):
        check_pair(machine, net)
    return certify_ns_rnn(machine, net, dtype=dtype, progress=progress)


__all__ = ["certify", "certify_ns_rnn"]

