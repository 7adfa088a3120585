"""Weight tolerance, initialisation and fine-tuning of the source papers' own models (every model
of `pdanet.constructions.table.MODELS`, on the table's example machines): noise within δ* keeps
`verify` passing exhaustively up to the proved length, large noise makes it fail (with a report,
never an exception), and fine-tuning from half δ* keeps `verify` passing. The DuSell & Chiang
models are checked on a 2-state Dyck-1 DPDA (their NS stack pushes and pops), with bit-identical
readings within δ*, a narrowed action gap (mutation) and random real-time DPDAs."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest
import strategies
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.constructions.table import MODELS, TABLE
from pdanet.errors import CertificationError, CompileError, InputError
from pdanet.learning import fit
from pdanet.learning.data import dataset
from pdanet.learning.init import WeightTolerance, initialize, paper_learner, weight_tolerance
from pdanet.verify.report import Report

NAMES = tuple(name for _, name, *_ in MODELS)
PROVED = 5                                            # the bounded proof's max_length here
_CACHE: dict[str, tuple] = {}
DUSELL = ("dusell_chiang_ns", "dusell_chiang_ns_s", "dusell_chiang_ns_u", "dusell_chiang_rns")
# Eq. 1's softmax leaves the rows no run occupies uniform, so their radius is carried through
# the NS stack's chart (growing as e^r): δ* ≈ 0.13 is valid but far below what the network
# tolerates (random noise first breaks verify near 600–1000, against ≈ 300–400 for δ* of NS+U/RNS)
SOFTMAX_NS = ("dusell_chiang_ns", "dusell_chiang_ns_s")


def _dyck1():
    """Dyck-1 as a 2-state real-time DPDA (final state "z" = balanced; the lowest X is marked
    X' so that popping it returns to "z"): the DuSell & Chiang models are checked on it, so
    that their NS stack pushes and pops."""
    from pdanet.automata.alphabet import BOTTOM
    from pdanet.automata.pda import DPDA

    t = {("z", "(", BOTTOM): ("n", ("X'", BOTTOM)), ("n", "(", "X"): ("n", ("X", "X")),
         ("n", "(", "X'"): ("n", ("X", "X'")), ("n", ")", "X"): ("n", ()),
         ("n", ")", "X'"): ("z", ())}
    return DPDA(["z", "n"], ["(", ")"], ["X", "X'"], t, "z", accepting={"z"}, name="dyck1")


def _compiled(name: str):
    """(machine, net, tolerance) for the first example machine of the model's table entries
    whose tolerance proof goes through (cached). A model for which no example has one (its
    forward uses an operation the analysis has no rule for, or leaves a compared value at a
    threshold) is an expected failure that names why: weight_tolerance raised the typed
    CertificationError for each example."""
    if name not in _CACHE:
        why = []
        entries = [(e.example, e.target) for e in TABLE if e.method == name]
        if name in DUSELL:
            entries.insert(0, (_dyck1, "ns_rnn"))
        for example, target in entries:
            machine = example()
            net = pn.compile(machine, target=target, model=name)
            try:
                tol = weight_tolerance(net, rel_tol=0.25, max_length=PROVED)
            except CertificationError as exc:
                why.append(str(exc))
                continue
            _CACHE[name] = (machine, net, tol)
            break
        else:
            assert why, f"{name}: the table has no example for it"
            _CACHE[name] = why
    if isinstance(_CACHE[name], list):
        pytest.xfail(f"{name}: no example has a weight tolerance: {_CACHE[name]}")
    return _CACHE[name]


def _with(net, model):
    return dataclasses.replace(net, module=model.eval())


def _noisy(net, tol, rho: float, seed: int):
    return _with(net, initialize(paper_learner(net, seed=seed), net, noise=rho, seed=seed,
                                 tolerance=tol))


@pytest.mark.parametrize("name", NAMES)
def test_tolerance_is_positive_and_bounded_length(name):
    _, net, tol = _compiled(name)
    assert isinstance(tol, WeightTolerance)
    assert tol.delta > 0 and tol.max_length == PROVED and tol.dtype == "float32"
    params = dict(net.module.named_parameters())
    assert set(tol.fixed) == {n for n in ("h0", "c0") if n in params}
    assert tol.fixed_parameters == tol.fixed
    assert "No all-lengths argument" in tol.argument
    # the bound is not vacuous: twice δ* is past what the proof accepts
    assert tol.details["upper"] <= 2 * tol.delta * 1.3


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rho=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_noise_within_tolerance_verifies_exhaustively(name, rho, seed):
    machine, net, tol = _compiled(name)
    rep = pn.verify(machine, _noisy(net, tol, rho, seed), max_length=PROVED, samples=0,
                    long_samples=0)
    assert rep.ok, (name, rho, tol.delta, rep.counterexample)


@pytest.mark.parametrize("name", NAMES)
def test_copy_is_exact_and_fixed_weights_stay(name):
    machine, net, tol = _compiled(name)
    model = initialize(paper_learner(net, seed=3), net, noise=0.9, seed=3, tolerance=tol)
    src = dict(net.module.named_parameters())
    for n, p in model.named_parameters():
        diff = (p.detach().double() - src[n].detach().double()).abs().max().item()
        if n in tol.fixed:
            assert diff == 0.0
        else:
            assert diff <= 0.9 * tol.delta * (1 + 1e-6) + 1e-3 * src[n].abs().max().item() * 2**-20
    exact = initialize(paper_learner(net), net)
    ids = torch.randint(0, len(machine.alphabet), (4, 7))
    with torch.no_grad():
        a, b = net.module.eval()(ids), exact.eval()(ids)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=(
        "Eq. 1's unoccupied softmax rows carry their radius through the NS chart (e^r growth): "
        "δ* ≈ 0.13 is sound but 1000·δ* does not break verify (noise near 600–1000 does)")))
    if n in SOFTMAX_NS else n
    for n in NAMES])
def test_large_noise_fails_with_a_report(name):
    machine, net, tol = _compiled(name)
    reports = [pn.verify(machine, _noisy(net, tol, 1000.0, seed), max_length=PROVED, samples=20)
               for seed in range(3)]
    assert all(isinstance(r, Report) for r in reports)
    bad = [r for r in reports if not r.ok]
    assert bad, f"{name}: noise at 1000·δ* never broke verify — the check could not fail"
    assert all(r.counterexample is not None for r in bad)


@pytest.mark.parametrize("name", NAMES)
def test_verify_on_random_or_trained_weights_returns_a_report(name):
    machine, net, _ = _compiled(name)
    for seed in range(2):
        rep = pn.verify(machine, _with(net, paper_learner(net, seed=seed)), max_length=4,
                        samples=10, long_samples=1, long_length=600)
        assert isinstance(rep, Report)
        assert rep.ok or rep.counterexample is not None


def _compiled_with_tolerance(machine, target: str, name: str):
    """(net, δ* to length 4) of a random machine, or the hypothesis example is skipped where the
    model refuses the machine or no δ* is proved."""
    try:
        net = pn.compile(machine, target=target, model=name)
    except CompileError:
        assume(False)
    try:
        tol = weight_tolerance(net, rel_tol=0.5, max_length=4)
    except CertificationError:
        assume(False)
    assert tol.delta > 0
    return net, tol


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=strategies.realtime_dpda(max_states=3, empty_stack=False),
       name=st.sampled_from(("grefenstette_rnn", "hao_lstm", "joulin_mikolov_stack_rnn",
                             "suzgun_stack_rnn", "suzgun_stack_lstm")),
       rho=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_random_dpda_noise_within_tolerance_verifies(machine, name, rho, seed):
    """Brute force on random real-time DPDAs: wherever a δ* is proved, every noise draw within it
    agrees with the machine on every live prefix of length ≤ the proved length."""
    net, tol = _compiled_with_tolerance(machine, "stack_rnn", name)
    rep = pn.verify(machine, _noisy(net, tol, rho, seed), max_length=4, samples=0, long_samples=0)
    assert rep.ok, (name, rho, tol.delta, rep.counterexample)


# --- typed errors ---------------------------------------------------------------------------------
def test_bad_input_is_typed():
    machine, net, _ = _compiled("suzgun_stack_rnn")
    _, other, _ = _compiled("hao_lstm")
    with pytest.raises(CompileError, match="paper_learner"):
        initialize(paper_learner(other), net)                      # another class
    bigger = pn.compile(pn.constructions.table._anbn(), target="stack_rnn",
                        model="suzgun_stack_rnn")
    assert {n: p.shape for n, p in bigger.module.named_parameters()} != \
        {n: p.shape for n, p in net.module.named_parameters()}
    with pytest.raises(CompileError, match="differ"):
        initialize(paper_learner(bigger), net)                     # other sizes
    with pytest.raises(InputError, match="noise"):
        initialize(paper_learner(net), net, noise=-1)
    with pytest.raises(InputError, match="seed"):
        paper_learner(net, seed="one")
    with pytest.raises(InputError, match="scale"):
        initialize(paper_learner(net), net, scale=64)
    with pytest.raises(InputError, match="tolerance"):
        initialize(paper_learner(net), net, noise=0.5, tolerance=0.3)
    with pytest.raises(InputError, match="max_length"):
        weight_tolerance(net, max_length=0)
    with pytest.raises(CertificationError, match="float32"):
        weight_tolerance(net.with_scale(dtype=torch.float64))
    with pytest.raises(CompileError, match="paper model"):
        paper_learner(pn.compile(machine, target="stack_rnn"))


# --- fine-tuning ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_fine_tuning_from_half_tolerance_keeps_verify_passing(name):
    """Noise at half δ*, 200 Adam steps (lr 1e-3) on the task's own loss, then verify
    (exhaustive to length 8 and random samples)."""
    machine, net, tol = _compiled(name)
    torch.manual_seed(0)
    model = initialize(paper_learner(net, seed=1), net, noise=0.5, seed=1, tolerance=tol)
    data = dataset(machine, 64, range(1, 9), seed=0)
    history = fit(model, data, lr=1e-3, batch_size=8, max_steps=200, epochs=1000,
                  freeze=tol.fixed_parameters, seed=0)
    assert history[-1]["steps"] == 200
    moved = max((p.detach() - q.detach()).abs().max().item() for p, q in
                zip(model.parameters(), net.module.parameters()))
    assert moved > 0
    rep = pn.verify(machine, _with(net, model), max_length=8, samples=100, long_samples=0)
    assert rep.ok, (name, rep.counterexample)


# --- DuSell & Chiang: the saturated action head ----------------------------------------------------
def _corner(net, tol, sign: float):
    """The compiled network with every non-fixed weight moved by sign·δ* (a corner of the box
    the proof covers: the float32 nearest w ± δ*, stepped back towards w where rounding took it
    past δ*)."""
    model = copy.deepcopy(net.module)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n not in tol.fixed:
                w = p.detach().clone()
                v = (w.double() + sign * tol.delta).to(p.dtype)
                over = (v.double() - w.double()).abs() > tol.delta
                v[over] = torch.nextafter(v[over], w[over])
                p.copy_(v)
    return _with(net, model)


def _prefixes(machine, length: int) -> torch.Tensor:
    from pdanet.verify.strings import live_prefixes

    level = [x for x in live_prefixes(machine, length) if len(x) and x.shape[1] == length]
    assert level, f"no live prefix of length {length}"
    return torch.as_tensor(np.asarray(level[0]))


@pytest.mark.parametrize("name", DUSELL)
def test_dusell_readings_are_bit_identical_within_tolerance(name):
    """Within δ* the actions reach the NS stack exactly 0/1 (or, for Eq. 1's unoccupied rows,
    only ever meet exact zeros), so the readings r_t equal the compiled network's bit for bit;
    the exact route (NS+U, RNS) tolerates far more than the softmax variants."""
    machine, net, tol = _compiled(name)
    assert tol.delta > (100.0 if name not in SOFTMAX_NS else 0.01), tol.delta
    nets = [_noisy(net, tol, 1.0, seed) for seed in range(2)]
    nets += [_corner(net, tol, 1.0), _corner(net, tol, -1.0)]
    with torch.no_grad():
        for length in (3, PROVED):
            ids = _prefixes(machine, length)
            want = net.module.eval().run(ids)
            for other in nets:
                got = other.module.run(ids)
                assert torch.equal(got.reading, want.reading), (name, length)
                assert torch.equal(got.h, want.h)
                assert torch.equal(got.logits > 0, want.logits > 0)
    for other in nets[2:]:
        assert pn.verify(machine, other, max_length=PROVED, samples=0, long_samples=0).ok


def _narrowed(net, factor: float):
    """The compiled DuSell network with its action head (W_ha, b_ha) scaled by ``factor``: the
    gap between the move and the other actions shrinks from β·tanh 1 ≈ 3117 to factor times it."""
    model = copy.deepcopy(net.module)
    with torch.no_grad():
        model.actions.weight.mul_(factor)
        model.actions.bias.mul_(factor)
    return _with(net, model)


@pytest.mark.parametrize("name", DUSELL)
@pytest.mark.parametrize("factor", [1 / 20, 1 / 40])
def test_dusell_narrowed_action_gap_gets_a_smaller_tolerance_or_a_refusal(name, factor):
    """Mutation: with the action gap narrowed the wrong actions stop underflowing (at 1/40 the
    gap, ≈ 78, is inside the range where float32 exp is not 0). The analysis then proves a
    smaller δ* or refuses with the typed error — and never a δ* under which verify fails (the
    network is checked at the corners ±δ* and at random noise within δ*)."""
    machine, net, tol = _compiled(name)
    narrow = _narrowed(net, factor)
    try:
        small = weight_tolerance(narrow, rel_tol=0.25, max_length=PROVED)
    except CertificationError as exc:
        assert "exp" in str(exc) or "comparison" in str(exc) or "radius" in str(exc), str(exc)
        return
    # the softmax variants' δ* is set by their unoccupied rows, not by the gap
    assert 0 < small.delta < tol.delta or (name in SOFTMAX_NS and small.delta <= tol.delta)
    for other in (_corner(narrow, small, 1.0), _corner(narrow, small, -1.0),
                  _noisy(narrow, small, 1.0, 0)):
        rep = pn.verify(machine, other, max_length=PROVED, samples=0, long_samples=0)
        assert rep.ok, (name, factor, small.delta, rep.counterexample)


def test_dusell_exp_underflow_is_scanned():
    """The threshold below which float32 exp is exactly 0 comes from evaluating every float32
    of the range (not from a formula), and the analysis refuses beyond the scanned range."""
    from pdanet.learning.paper_init import EXP_SCAN_CAP, exp_underflow

    a, upto = exp_underflow(4000.0)
    assert upto == 4096.0 and 100 < a < 110
    x = torch.tensor([-a, -upto, -(a + 1)], dtype=torch.float32)
    assert torch.equal(torch.exp(x), torch.zeros(3))
    below = torch.nextafter(torch.tensor(-a, dtype=torch.float32), torch.tensor(0.0))
    assert float(torch.exp(below)) > 0                 # the next float up is not 0: a* is tight
    assert exp_underflow(EXP_SCAN_CAP * 2) == (math.inf, 0.0)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=strategies.realtime_dpda(max_states=2, empty_stack=False),
       name=st.sampled_from(DUSELL), rho=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_random_dpda_dusell_noise_within_tolerance_verifies(machine, name, rho, seed):
    """Brute force on random real-time DPDAs compiled to the DuSell & Chiang models: wherever a
    δ* is proved, every noise draw within it agrees with the machine on every live prefix of
    length ≤ the proved length, and so does the corner +δ*."""
    net, tol = _compiled_with_tolerance(machine, "ns_rnn", name)
    for other in (_noisy(net, tol, rho, seed), _corner(net, tol, 1.0)):
        rep = pn.verify(machine, other, max_length=4, samples=0, long_samples=0)
        assert rep.ok, (name, rho, tol.delta, rep.counterexample)
