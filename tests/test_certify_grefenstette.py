"""All-lengths certificates for the compiled models of Grefenstette et al. (2015)
(`pdanet.verify.certify.grefenstette`): stack, queue and deque; Elman and LSTM controllers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pda import DPDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.store import sequence_copy
from pdanet.errors import CertificationError, CompileError, InputError
from pdanet.models.grefenstette import STORES
from pdanet.verify.certify import grefenstette as cg
from pdanet.verify.certify.dispatch import family

MODELS = ("grefenstette_rnn", "grefenstette_lstm")
TASKS = {
    "dyck2": lambda: pn.tasks.get("dyck2"),
    "marked_reversal": lambda: pn.tasks.get("marked_reversal"),
    "reversal_stack": lambda: pn.tasks.get("sequence_reversal", vocab_size=3),
    "copy_queue": lambda: sequence_copy(3, "queue"),
    "copy_deque": lambda: sequence_copy(3, "deque"),
    "reversal_deque": lambda: pn.tasks.get("sequence_reversal", vocab_size=3, store="deque"),
    "bigram_flip": lambda: pn.tasks.get("bigram_flip", vocab_size=4),
}


@pytest.fixture(scope="module")
def nets():
    out = {}
    for name, make in TASKS.items():
        m = make()
        for model in MODELS:
            out[name, model] = (m, pn.compile(m, target="stack_rnn", model=model))
    return out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", list(TASKS))
def test_certificate_holds_for_every_length_and_verify_agrees(nets, name, model):
    m, net = nets[name, model]
    assert family(net) == "grefenstette"
    cert = pn.certify(m, net)
    assert cert.ok and cert.all_lengths and cert.max_length is None, str(cert)
    assert cert.kernel == "saturating" and any("ulp kernel model" in n for n in cert.notes)
    assert cert.configs > 0 and cert.cases > 0 and cert.failing is None
    assert cert.readout_margin > 0 and cert.state_margin > 0
    assert any("checked bit-exact" in n for n in cert.notes)
    report = pn.verify(m, net, max_length=5, samples=300, long_samples=2, long_length=200)
    assert report.ok, str(report)


def test_float64_is_not_certified(nets):
    m, net = nets["dyck2", "grefenstette_rnn"]
    cert = pn.certify(m, net, dtype=torch.float64)
    assert not cert.ok and cert.dtype == "float64" and cert.failing is not None
    assert any("float32 only" in n for n in cert.notes)


def _mutated(net, where: str):
    bad = net.with_scale()
    mod = bad.module
    with torch.no_grad():
        if where == "push":           # d_t saturates to 1 everywhere: a push on every step
            mod.push.bias[0] += 1e5
        elif where == "value":        # the pushed code's first datum bit is flipped
            mod.value.bias[1] -= 1e5
        elif where == "readout":      # logit 0 always on top
            mod.readout.bias[0] += 1e3
        elif where == "unsaturated":  # a pop strength left at σ(0) = 1/2
            mod.pop.weight.zero_()
            mod.pop.bias.zero_()
    return bad


@pytest.mark.parametrize("where", ["push", "value", "readout", "unsaturated"])
@pytest.mark.parametrize("model", MODELS)
def test_mutations_fail_and_verify_finds_a_counterexample(nets, where, model):
    m, net = nets["reversal_stack", model]
    bad = _mutated(net, where)
    cert = pn.certify(m, bad)
    assert not cert.ok and not cert.all_lengths and cert.failing is not None, str(cert)
    fc = cert.failing
    assert fc.kind in ("step", "readout")
    assert fc.symbol is not None or fc.kind == "readout"          # the initial output
    lo, hi = fc.interval
    assert not (fc.required[0] < lo and hi <= fc.required[1])
    report = pn.verify(m, bad, max_length=5, samples=0, long_samples=0)
    assert not report.ok and report.counterexample is not None


@pytest.mark.parametrize("name", ["copy_queue", "copy_deque"])
def test_queue_and_deque_mutation_fails(nets, name):
    m, net = nets[name, "grefenstette_lstm"]
    bad = _mutated(net, "value")
    cert = pn.certify(m, bad)
    assert not cert.ok and cert.failing.kind == "step" and "pushed value" in cert.failing.unit_label
    report = pn.verify(m, bad, max_length=5, samples=0, long_samples=0)
    assert not report.ok


def test_nan_weight_is_refused(nets):
    m, net = nets["copy_queue", "grefenstette_rnn"]
    bad = net.with_scale()
    with torch.no_grad():
        bad.module.cell.weight_hh[1, 2] = math.nan
    cert = pn.certify(m, bad)
    assert not cert.ok and cert.failing.kind == "weights"
    assert "weight_hh" in cert.failing.config


@pytest.mark.parametrize("model", MODELS)
def test_near_saturated_heads_are_not_claimed(nets, model):
    """β = 64: the network still agrees with the machine on short strings, but its gates are
    only near 0/1 (σ(−32) ≈ 1e−14: ghost strengths pushed at every step): no all-lengths claim.
    (β = 200 puts every gate beyond the kernels' checked saturation, and it is certified.)"""
    m, net = nets["dyck2", model]
    weak = net.with_scale(64)
    assert pn.verify(m, weak, max_length=6, samples=0, long_samples=0).ok
    cert = pn.certify(m, weak)
    assert not cert.ok and not cert.all_lengths and cert.failing is not None
    assert cert.failing.kind == "step"
    assert cert.failing.interval != cert.failing.required


def test_typed_errors(nets):
    m, net = nets["dyck2", "grefenstette_rnn"]
    other, _ = nets["marked_reversal", "grefenstette_rnn"]
    with pytest.raises(CertificationError):
        pn.certify(other, net)                           # not the machine it was compiled from
    stack_net = pn.compile(m, target="stack_rnn")
    with pytest.raises(CertificationError):
        cg.certify(m, stack_net)                         # not a Grefenstette network
    for bad in ({"eps": -1.0}, {"chunk": 0}, {"max_configs": True}, {"kernel": "exact"}):
        with pytest.raises(InputError):
            pn.certify(m, net, **bad)


def test_max_configs_bounds_the_search(nets):
    m, net = nets["reversal_stack", "grefenstette_rnn"]
    cert = pn.certify(m, net, max_configs=5)
    assert not cert.ok and cert.failing.kind == "configs"


def test_progress_and_chunk_do_not_change_the_result(nets):
    m, net = nets["copy_deque", "grefenstette_rnn"]
    seen = []
    a = pn.certify(m, net, chunk=1, progress=lambda *x: seen.append(x))
    b = pn.certify(m, net, chunk=4096)
    assert a.ok and b.ok and (a.configs, a.cases) == (b.configs, b.cases) and seen


def test_sigmoid_zero_is_checked_on_the_kernels():
    assert cg.sigmoid_zero_on(100.0, 100.5)
    assert not cg.sigmoid_zero_on(10.0, 100.0)             # σ(−10) is not 0
    assert not cg.sigmoid_zero_on(100.0, math.inf)
    z = torch.linspace(100.0, 100.5, 101)
    assert bool((torch.sigmoid(-z) == 0).all())


# --- the store forms over-approximate every reachable store (brute force) --------------------
@settings(max_examples=40, deadline=None)
@given(store=st.sampled_from(("stack", "queue", "deque")),
       seq=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), max_size=12))
def test_store_forms_cover_the_concrete_store(store, seq):
    mod = STORES[store]()
    ops = list(mod.ops)
    reads = frozenset(mod.reads)
    concrete: tuple = ()
    forms = {()}
    pushed: set = set()
    for k, y in seq:
        op = ops[k % len(ops)]
        if mod.ops[op][0] is not None and not concrete:
            continue                                     # the machine never pops an empty store
        concrete = mod.apply(concrete, op, y)
        if mod.ops[op][1] is not None:
            pushed.add(y)
        new = set()
        for f in forms:
            if mod.ops[op][0] is not None and not f:
                continue
            new.update(cg._expand(mod.apply(f, op, y), reads, pushed))
        forms = new
        assert cg._canon(concrete, reads) in forms


# --- random machines: certificate ⇒ agreement on every string up to length 6 ------------------
OPS = ("noop", "push", "pop", "replace")


def random_machine(seed: int, n: int, G: int, k: int, kind: str):
    """A random real-time DPDA with final-state acceptance or DPDT (⊥ only kept or pushed on)."""
    rng = np.random.default_rng(seed)
    sigma, gamma, outs = "abc"[:k], "XYZ"[:G], "uv"
    t: dict = {}
    for q in range(n):
        for a in sigma:
            for x in (BOTTOM, *gamma):
                if rng.random() < 0.1:
                    continue
                op = OPS[rng.integers(2)] if x is BOTTOM else OPS[rng.integers(4)]
                q2, y = int(rng.integers(n)), gamma[rng.integers(G)]
                pushed = {"noop": (x,), "push": (y, x), "pop": (), "replace": (y,)}[op]
                if kind == "dpdt":
                    t[(q, a, x)] = (q2, (EPSILON, *outs)[rng.integers(3)], pushed)
                else:
                    t[(q, a, x)] = (q2, pushed)
    if kind == "dpdt":
        return DPDT(range(n), sigma, outs, gamma, t, 0, name=f"random_dpdt_{seed}")
    acc = {q for q in range(n) if rng.random() < 0.5}
    return DPDA(range(n), sigma, gamma, t, 0, accepting=acc, acceptance="final_state",
                name=f"random_dpda_{seed}")


def _all_strings(machine, L: int) -> list:
    syms = list(machine.alphabet)
    return [list(w) for n in range(L + 1) for w in itertools.product(syms, repeat=n)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3), G=st.integers(1, 3),
       k=st.integers(1, 3), kind=st.sampled_from(("final_state", "dpdt")),
       model=st.sampled_from(MODELS), noise=st.sampled_from((0.0, 1e-3, 30.0, 3e3)),
       where=st.integers(0, 10**6))
def test_random_machines_certificate_implies_agreement(seed, n, G, k, kind, model, noise,
                                                       where):
    m = random_machine(seed, n, G, k, kind)
    try:
        net = pn.compile(m, target="stack_rnn", model=model)
    except CompileError:
        return
    if noise:                                            # one weight moved by ±noise
        net = net.with_scale()
        params = [p for p in net.module.parameters() if p.numel()]
        p = params[where % len(params)]
        with torch.no_grad():
            p.view(-1)[(where // len(params)) % p.numel()] += noise * (1 if where % 2 else -1)
    cert = pn.certify(m, net)
    report = pn.verify(m, net, max_length=6, samples=0, long_samples=0)
    if cert.ok:                                          # soundness: exhaustive agreement
        assert report.ok, (str(cert), str(report))
    if noise == 0.0:                                     # the compiled network is certified
        assert cert.ok, str(cert)
    if not report.ok:
        assert not cert.ok


def test_a_dead_controller_state_is_found_though_outputs_agree():
    """An LSTM whose control unit for (state 0, 'a', nonempty) never fires: the readout still
    accepts (final-state acceptance of the only state), but `pn.verify` decodes a dead controller
    after 'aa'. The certificate fails at the decoded-state check (Lemma 3)."""
    m = random_machine(1, 1, 1, 1, "final_state")
    net = pn.compile(m, target="stack_rnn", model="grefenstette_lstm").with_scale()
    assert pn.certify(m, net).ok
    with torch.no_grad():
        net.module.cell.bias_ih[7] -= 3000.0        # output gate of unit 'c0·0·0'
    cert = pn.certify(m, net)
    assert not cert.ok and cert.failing.kind == "state" and cert.failing.symbol == "a"
    report = pn.verify(m, net, max_length=6, samples=0, long_samples=0)
    assert not report.ok and report.counterexample is not None
