"""The local-view certificate for compact bounded-PDA networks (`pdanet.verify.certify.compact`):
task machines certify in float32 for every length at m = 4 and 16 (Elman and LSTM), agree with
the box family where both run, mutated networks that `pn.verify` refutes are NOT CERTIFIED (a
unit for any written code that stops reading one of its source units included), and on random
real-time DPDAs/DPDTs the certificate says yes and is never wrong."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.pda import DPDA
from pdanet.errors import CertificationError, InputError
from pdanet.verify.certify import box
from pdanet.verify.certify import compact as cc
from tests.test_compact import random_machine as _random_machine

VERIFY = {"max_length": 6, "samples": 60, "sample_lengths": (7, 20), "long_samples": 3,
          "long_length": 200}


def dyck_k(k: int) -> DPDA:
    """Dyck-k recogniser (final state): an open pushes its type (primed at the bottom), a close
    pops its own type; popping a primed type empties the stack (state 0, accepting)."""
    opens, closes = "([{<"[:k], ")]}>"[:k]
    types = tuple("ABCD"[:k]) + tuple(x + "'" for x in "ABCD"[:k])
    t: dict = {}
    for i, o in enumerate(opens):
        t[(0, o, BOTTOM)] = (1, (types[k + i], BOTTOM))
        for y in types:
            t[(1, o, y)] = (1, (types[i], y))
    for i, c in enumerate(closes):
        t[(1, c, types[i])] = (1, ())
        t[(1, c, types[k + i])] = (0, ())
    return DPDA((0, 1), opens + closes, types, t, 0, accepting={0}, name=f"dyck{k}")


def tasks() -> dict:
    return {"marked_reversal": pn.tasks.get("marked_reversal"),
            "w_phi_wr": pn.tasks.get("w_phi_wr"), "dyck3": dyck_k(3)}


TASKS = tasks()


# --- task machines: certified for every length ---------------------------------------------------

@pytest.mark.parametrize("name", sorted(TASKS))
@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("m", [4, 16])
def test_tasks_certify_every_length(name, target, m):
    b = TASKS[name].bounded(m)
    net = pn.compile(b, target=target, method="compact")
    assert net.dtype == torch.float32
    cert = cc.certify_structural(b, net)
    assert cert.ok and cert.all_lengths, cert
    assert cert.configs == cc.config_bound(b) and cert.cases > 0
    assert "compact" in " ".join(cert.notes)
    if m == 16:                                          # the family picks local views itself
        assert cc.uses_structural(b, net, 200_000)
        assert cc.certify(b, net).ok


@pytest.mark.parametrize("name", sorted(TASKS))
@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_agrees_with_box_family(name, target):
    b = TASKS[name].bounded(2)
    net = pn.compile(b, target=target, method="compact")
    assert not cc.uses_structural(b, net, 200_000)      # few configurations: the box family
    by_box = cc.certify(b, net)
    assert "compact:" not in " ".join(by_box.notes)
    local = cc.certify_structural(b, net)
    assert by_box.ok and local.ok, (by_box, local)
    for mut in (_mutant(net, "copy"), _mutant(net, "readout")):
        assert not box.certify(b, mut).ok and not cc.certify_structural(b, mut).ok


# --- mutations: refuted networks are never certified ---------------------------------------------

def _mutant(net, what: str):
    """A copy of `net` with one weight changed: ``copy`` — a slot-copy unit's weight from its
    source slot, ``lookup`` — a lookup unit's largest recurrent weight, ``readout`` — the
    largest readout weight (sign flipped), ``nan`` — a NaN in the recurrence."""
    ab = net.abstraction
    H = net.hidden_units
    g = 2 * H if ab.cell == "lstm" else 0               # LSTM: the cell input (g) rows
    W = net.module.blocks(numpy=True)
    module = copy.deepcopy(net.module)
    state = module.state_dict()
    with torch.no_grad():
        if what == "copy":
            u = int(ab.units[ab.copies.index("push"), 1, 0])
            j = int(np.nonzero(W.weight_hh[g + u])[0][-1])    # a unit of slot 1 (its source)
            state["rnn.weight_hh_l0"][g + u, j] *= -1
        elif what == "lookup":
            u = int(ab.lookup[len(ab.lookup) // 2])
            j = int(np.argmax(np.abs(W.weight_hh[g + u])))
            state["rnn.weight_hh_l0"][g + u, j] *= -1
        elif what == "readout":
            j = int(np.argmax(np.abs(W.readout_weight[0])))
            state["readout.weight"][0, j] *= -1
        else:
            state["rnn.weight_hh_l0"][g, 0] = float("nan")
    return dataclasses.replace(net, module=module)


@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("what", ["copy", "lookup", "readout", "nan"])
def test_refuted_mutants_not_certified(target, what):
    b = TASKS["marked_reversal"].bounded(4)
    net = pn.compile(b, target=target, method="compact")
    mut = _mutant(net, what)
    assert not pn.verify(b, mut, **VERIFY).ok           # the mutation really breaks the net
    cert = cc.certify_structural(b, mut)
    assert not cert.ok and cert.failing is not None
    if what == "nan":
        assert cert.failing.kind == "weights" and "rnn.weight_hh_l0" in str(cert.failing)
    else:
        assert cert.failing.kind in ("step", "readout", "nonfinite"), cert


def _any_code_units(net) -> list[tuple[int, list[int]]]:
    """(lookup unit, its source lookup units) for every unit standing for any written code
    (``source_symbol`` −1 after a push/replace): the sources are the lookup units whose step
    enters the unit's state by that operation, whatever they write."""
    ab = net.abstraction
    units = [int(u) for u in ab.lookup]
    got = []
    for u, c in zip(units, ab.cases):
        if c.source in ("push", "replace") and c.source_symbol == -1:
            src = [v for v, e in zip(units, ab.cases) if e.op == c.source and e.p2 == c.p]
            got.append((u, src))
    return got


def _without_gate(net, u: int, v: int):
    """A copy of `net` where lookup unit u no longer reads source unit v (every gate row)."""
    H = net.hidden_units
    module = copy.deepcopy(net.module)
    rows = [u + g * H for g in range(4 if net.abstraction.cell == "lstm" else 1)]
    with torch.no_grad():
        module.state_dict()["rnn.weight_hh_l0"][rows, v] = 0.0
    return dataclasses.replace(net, module=module)


@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("name", ["marked_reversal", "dyck3"])
def test_any_code_gate_mutant_not_certified(name, target):
    """A unit for any written code that no longer sums one of its source units: `pn.verify`
    refutes it and the certificate refuses it."""
    b = TASKS[name].bounded(4)
    net = pn.compile(b, target=target, method="compact")
    anyc = _any_code_units(net)
    assert anyc and all(len(src) >= 2 for _, src in anyc)
    u, src = anyc[0]
    W = net.module.blocks(numpy=True).weight_hh
    H = net.hidden_units
    g = 2 * H if target == "lstm" else 0
    assert all(W[g + u, v] > 0 for v in src)            # the gate reads every source unit
    mut = _without_gate(net, u, src[-1])
    assert not pn.verify(b, mut, **VERIFY).ok
    cert = cc.certify_structural(b, mut)
    assert not cert.ok and cert.failing.kind in ("step", "readout"), cert


def test_any_code_roles_checked_not_trusted():
    """A unit for any written code declared for fewer codes, or for one code only, leaves
    configurations without a unit (Lemma 1)."""
    b = TASKS["dyck3"].bounded(4)
    net = pn.compile(b, target="elman", method="compact")
    ab = net.abstraction
    assert cc.certify_structural(b, net).ok
    i = next(k for k, c in enumerate(ab.cases)
             if c.source in ("push", "replace") and c.source_symbol == -1)
    for change in ({"top": ab.cases[i].top[1:]}, {"source_symbol": ab.cases[i].top[0]}):
        cases = list(ab.cases)
        cases[i] = dataclasses.replace(cases[i], **change)
        cert = cc.certify_structural(b, dataclasses.replace(
            net, abstraction=dataclasses.replace(ab, cases=tuple(cases))))
        assert not cert.ok and cert.failing.kind == "encoding", change
        assert "no lookup unit" in str(cert.failing)


@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_small_beta_not_certified(target):
    b = TASKS["w_phi_wr"].bounded(4)
    net = pn.compile(b, target=target, method="compact")
    assert cc.certify_structural(b, net).ok
    weak = net.with_scale(2)
    assert not cc.certify_structural(b, weak).ok
    assert not cc.certify_structural(b, net.with_scale(2), eps=0.25).ok


def test_declared_roles_are_checked_not_trusted():
    b = TASKS["marked_reversal"].bounded(4)
    net = pn.compile(b, target="elman", method="compact")
    ab = net.abstraction
    cases = list(ab.cases)
    # a wrong declared outcome is never read: the table gives it (the network is still right)
    cases[0] = dataclasses.replace(cases[0], p2=(cases[0].p2 + 1) % 4, accepts=not cases[0].accepts)
    relabelled = dataclasses.replace(net, abstraction=dataclasses.replace(ab, cases=tuple(cases)))
    assert cc.certify_structural(b, relabelled).ok
    # two lookup units exchanging meanings: the network no longer matches the encoding
    swapped = list(ab.cases)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    bad = dataclasses.replace(net, abstraction=dataclasses.replace(ab, cases=tuple(swapped)))
    assert not cc.certify_structural(b, bad).ok
    # a case standing for no top: its configurations have no unit (Lemma 1)
    hole = list(ab.cases)
    hole[3] = dataclasses.replace(hole[3], top=())
    cert = cc.certify_structural(b, dataclasses.replace(
        net, abstraction=dataclasses.replace(ab, cases=tuple(hole))))
    assert not cert.ok and cert.failing.kind == "encoding"
    assert "no lookup unit" in str(cert.failing)


# --- random machines ------------------------------------------------------------------------------

def random_machine(seed: int, n: int, G: int, k: int, kind: str, uniform: float = 0.0):
    """`tests.test_compact.random_machine` with stack symbols XYZ, one move in ten missing."""
    return _random_machine(seed, n, G, k, kind, uniform=uniform, missing=0.1, gamma="XYZ")


machines = st.builds(random_machine, st.integers(0, 2**32 - 1), st.integers(1, 4),
                     st.integers(1, 3), st.integers(1, 3),
                     st.sampled_from(("final_state", "empty_stack", "dpdt")),
                     st.sampled_from((0.0, 0.7)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 5), st.sampled_from(("elman", "lstm")))
def test_random_machines_certified_and_verified(machine, m, target):
    b = machine.bounded(m)
    net = pn.compile(b, target=target, method="compact")
    cert = cc.certify_structural(b, net)
    assert cert.ok and cert.all_lengths, cert
    rep = pn.verify(b, net, max_length=6, samples=30, sample_lengths=(7, 16), long_samples=1,
                    long_length=60)
    assert rep.ok, rep.counterexample


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 4), st.integers(0, 2**32 - 1), st.sampled_from(("elman", "lstm")))
def test_random_mutants_never_falsely_certified(machine, m, seed, target):
    """One recurrent, bias or readout weight scaled by a random factor: whenever the
    certificate still says yes, `pn.verify` agrees."""
    b = machine.bounded(m)
    net = pn.compile(b, target=target, method="compact")
    rng = np.random.default_rng(seed)
    module = copy.deepcopy(net.module)
    block = ("rnn.weight_hh_l0", "readout.weight", "rnn.bias_ih_l0")[rng.integers(3)]
    t = module.state_dict()[block].view(-1)
    nz = torch.nonzero(t).view(-1)
    i = int(nz[rng.integers(len(nz))]) if len(nz) else 0
    with torch.no_grad():
        t[i] = t[i] * float(rng.choice([-1.0, 0.0, 0.3, 0.6, 3.0]))
    mut = dataclasses.replace(net, module=module)
    cert = cc.certify_structural(b, mut)
    if cert.ok:
        rep = pn.verify(b, mut, max_length=6, samples=30, sample_lengths=(7, 16),
                        long_samples=1, long_length=60)
        assert rep.ok, (str(cert), rep.counterexample)


uniform_machines = st.builds(random_machine, st.integers(0, 2**32 - 1), st.integers(1, 4),
                             st.integers(2, 3), st.integers(1, 3),
                             st.sampled_from(("final_state", "empty_stack", "dpdt")),
                             st.just(0.9))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(uniform_machines, st.integers(2, 4), st.integers(0, 2**32 - 1),
       st.sampled_from(("elman", "lstm")))
def test_random_any_code_gate_mutants_never_falsely_certified(machine, m, seed, target):
    """A unit for any written code stops reading one random source unit: whenever the
    certificate still says yes, `pn.verify` agrees."""
    b = machine.bounded(m)
    net = pn.compile(b, target=target, method="compact")
    anyc = _any_code_units(net)
    assume(anyc)
    rng = np.random.default_rng(seed)
    u, src = anyc[rng.integers(len(anyc))]
    mut = _without_gate(net, u, src[rng.integers(len(src))])
    cert = cc.certify_structural(b, mut)
    if cert.ok:
        rep = pn.verify(b, mut, max_length=6, samples=30, sample_lengths=(7, 16),
                        long_samples=1, long_length=60)
        assert rep.ok, (str(cert), rep.counterexample)


# --- exact rows (Lemma 4) -------------------------------------------------------------------------

def test_grid_rows():
    W = np.array([[0.25, -1.5, 0.0], [0.1, 1.0, 1.0], [2.0**23, 2.0**23, 0.5]])
    b = np.array([0.75, 0.0, 0.0])
    assert cc.grid_rows([W, b], torch.float32).tolist() == [True, False, False]
    assert cc.grid_rows([W, b], torch.float64).tolist() == [True, False, True]


def test_exact_rows_under_saturation():
    """Strongly saturated Elman units are exactly ±1 under the checked kernel saturation: their
    rows and the readout carry no rounding, and the readout margin is the ideal β/2."""
    b = TASKS["marked_reversal"].bounded(16)
    net = pn.compile(b, target="elman", method="compact").with_scale(40)
    cert = cc.certify_structural(b, net, kernel="saturating")
    assert cert.ok and cert.all_lengths and cert.kernel == "saturating"
    assert cert.readout_margin == 20.0
    assert cc.certify_structural(b, net).readout_margin < 20.0     # ulp model: rounding bounds


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_exact_mode_never_falsely_certified(machine, m, seed):
    """Under the saturating model (exact rows in play), a mutated weight is either refused or
    really harmless."""
    b = machine.bounded(m)
    net = pn.compile(b, target="elman", method="compact").with_scale(40)
    assert cc.certify_structural(b, net, kernel="saturating").ok
    rng = np.random.default_rng(seed)
    module = copy.deepcopy(net.module)
    block = ("rnn.weight_hh_l0", "readout.weight", "rnn.bias_ih_l0", "readout.bias")[
        rng.integers(4)]
    t = module.state_dict()[block].view(-1)
    i = int(rng.integers(len(t)))
    with torch.no_grad():
        t[i] = t[i] * float(rng.choice([-1.0, 0.0, 0.5, 3.0])) + float(rng.choice([0, 0.1, -5]))
    mut = dataclasses.replace(net, module=module)
    if cc.certify_structural(b, mut, kernel="saturating").ok:
        rep = pn.verify(b, mut, max_length=6, samples=30, sample_lengths=(7, 16),
                        long_samples=1, long_length=60)
        assert rep.ok, rep.counterexample


# --- bad input -------------------------------------------------------------------------------------

def test_bad_input_is_typed():
    b = TASKS["marked_reversal"].bounded(3)
    net = pn.compile(b, target="elman", method="compact")
    minsky = pn.compile(b, target="elman", method="minsky")
    with pytest.raises(CertificationError, match="CompactSlots"):
        cc.certify_structural(b, minsky)
    with pytest.raises(CertificationError):
        cc.certify_structural(TASKS["marked_reversal"].bounded(4), net)
    with pytest.raises(CertificationError, match="BoundedPDA"):
        cc.certify_structural(TASKS["marked_reversal"], net)
    with pytest.raises(InputError, match="eps"):
        cc.certify_structural(b, net, eps=0.0)
    with pytest.raises(InputError, match="max_configs"):
        cc.certify(b, net, max_configs=0)
    with pytest.raises(InputError, match="kernel"):
        cc.certify(b, net, kernel="exact")


def test_progress_and_float64():
    b = TASKS["dyck3"].bounded(4)
    net = pn.compile(b, target="elman", method="compact")
    calls: list = []
    cert = cc.certify_structural(b, net, dtype=torch.float64,
                                 progress=lambda *a: calls.append(a))
    assert cert.ok and cert.dtype == "float64" and calls
