"""All-lengths certificates for Hao et al.'s linear and LSTM controllers and the Joulin–Mikolov
Stack-RNN (`pdanet.verify.certify.paper`): certified nets agree with `pn.verify`; mutated,
near-saturated and NaN nets are not certified."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import realtime_dpda

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pdt import DPDT
from pdanet.constructions.stacks.superposition import SuperpositionStack
from pdanet.errors import CertificationError, InputError
from pdanet.models.hao import EXAMPLE_HAO_BUFFERED, EXAMPLE_HAO_LINEAR, requires_hao_linear
from pdanet.verify import intervals as iv
from pdanet.verify.certify import paper
from pdanet.verify.certify.dispatch import family

LSTM, JM, LINEAR = "hao_lstm", "joulin_mikolov_stack_rnn", "hao_linear"
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def compiled(task, model, **kw):
    machine = pn.tasks.get(task) if isinstance(task, str) else task
    return machine, pn.compile(machine, target="stack_rnn", model=model, **kw)


def verified(machine, net, n=6, samples=200, long=2):
    return pn.verify(machine, net, max_length=n, samples=samples, long_samples=long,
                     long_length=300, overlap=False)


@pytest.mark.parametrize("model", [LSTM, JM])
@pytest.mark.parametrize("task", ["dyck2", "marked_reversal", "boolean_formula", "parity"])
def test_seed_tasks_certify_and_verify(task, model):
    machine, net = compiled(task, model)
    assert family(net) == "paper"
    cert = pn.certify(machine, net)
    assert cert.ok and cert.all_lengths and cert.max_length is None, cert
    assert cert.kernel == "saturating" and cert.eps == 0.0
    assert cert.cases > 0 and cert.configs > 0 and cert.readout_margin > 0
    assert any("ulp kernel model alone" in n for n in cert.notes)
    assert verified(machine, net).ok


@pytest.mark.parametrize("model", [LSTM, JM])
def test_float64(model):
    machine, net = compiled("dyck2", model)
    cert = pn.certify(machine, net, dtype=torch.float64)
    assert cert.ok and cert.dtype == "float64"
    assert verified(machine, net.with_scale(dtype=torch.float64), n=5, samples=50).ok


def test_hao_linear_example():
    machine, net = compiled(EXAMPLE_HAO_LINEAR, LINEAR)
    cert = pn.certify(machine, net)
    assert cert.ok and cert.all_lengths
    assert verified(machine, net).ok


@st.composite
def one_state_dpdt(draw):
    """A random one-state real-time DPDT (≤ 3 inputs, ≤ 2 stack symbols, ≤ 2 outputs)."""
    nk, ng = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    K, G = "abc"[:nk], [f"X{i}" for i in range(ng)]
    t = {}
    for a in K:
        for x in G + [BOTTOM]:
            kind = draw(st.sampled_from(["none", "noop", "push", "pop", "replace"]))
            if kind == "none" or (x is BOTTOM and kind in ("pop", "replace")):
                continue
            y = draw(st.sampled_from(G))
            gamma = {"noop": (x,), "push": (y, x), "pop": (), "replace": (y,)}[kind]
            t[(0, a, x)] = (0, draw(st.sampled_from(["0", "1", EPSILON])), gamma)
    return DPDT([0], K, "01", G, t, 0)


@SETTINGS
@given(m=one_state_dpdt())
def test_random_hao_linear(m):
    assume(requires_hao_linear(m) is None)
    machine, net = compiled(m, LINEAR)
    cert = pn.certify(machine, net)
    assert cert.ok and cert.all_lengths, cert
    assert verified(machine, net, n=6, samples=10, long=0).ok


@settings(SETTINGS, max_examples=10)
@given(m=realtime_dpda(max_states=3, empty_stack=False), model=st.sampled_from([LSTM, JM]))
def test_random_dpdas(m, model):
    machine, net = compiled(m, model)
    cert = pn.certify(machine, net)
    assert cert.ok and cert.all_lengths, cert
    assert verified(machine, net, n=6, samples=10, long=0).ok


@settings(SETTINGS, max_examples=6)
@given(m=realtime_dpda(max_states=2, empty_stack=False), model=st.sampled_from([LSTM, JM]),
       seed=st.integers(0, 2**16))
def test_noisy_weights_still_certified(m, model, seed):
    """The certificate reads the weights as they are: noise far below the margin keeps every
    head saturated (certified, and verify agrees); the noisy weights are not the compiled ones."""
    machine, net = compiled(m, model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.module.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.01)
    cert = pn.certify(machine, net)
    assert cert.ok, cert
    assert verified(machine, net, n=5, samples=10, long=0).ok


# --- mutations: a wrong op, a head that stops saturating, a smaller β, NaN ----------------------
def _pushing_unit(net):
    """A hidden unit whose transition pushes (its push weight is β·1)."""
    w = net.module.push.weight if hasattr(net.module, "push") else None
    if w is not None:
        return int(torch.nonzero(w[0] > 0)[0, 0])
    A = net.module.A.weight
    ch = net.module.store.channels.index("push")
    return int(torch.nonzero(A[ch] > 0)[0, 0])


@pytest.mark.parametrize("model", [LSTM, JM])
def test_wrong_op_fails_and_verify_finds_it(model):
    machine, net = compiled("dyck2", model)
    j = _pushing_unit(net)
    with torch.no_grad():
        if model == LSTM:
            net.module.push.weight[0, j] = 0.0          # that transition no longer pushes
        else:
            net.module.A.weight[:, j] = net.module.A.weight[:, j].flip(0)   # push ↔ pop
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing is not None
    assert cert.failing.kind == "step" and cert.failing.unit_label.startswith("action")
    assert not verified(machine, net).ok


@pytest.mark.parametrize("model", [LSTM, JM])
def test_wrong_output_fails_readout(model):
    machine, net = compiled("dyck2", model)
    with torch.no_grad():
        out = net.module.out if model == LSTM else net.module.Y
        out.bias.neg_()                                   # every verdict flips its sign
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "readout"
    assert not verified(machine, net, n=3, samples=0, long=0).ok


def test_head_not_saturating_fails():
    machine, net = compiled("dyck2", LSTM)
    with torch.no_grad():
        net.module.push.bias.add_(net.module.push.weight.max() * 0.375 - 2.0)   # σ(±2)
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.unit_label == "action push"
    lo, hi = cert.failing.interval
    assert 0 < lo <= hi < 1
    report = verified(machine, net, n=4, samples=50)
    assert report.ok or report.counterexample is not None   # verify decodes by nearest config


@pytest.mark.parametrize("model", [LSTM, JM])
@pytest.mark.parametrize("beta", [2, 8])
def test_small_beta_not_certified(model, beta):
    """β scaled down: the heads are only near-saturated — the network may still be correct on
    short strings, but the certificate must not claim exactness."""
    machine, net = compiled("dyck2", model)
    small = net.with_scale(beta)
    cert = pn.certify(machine, small)
    assert not cert.ok and not cert.all_lengths
    assert cert.failing.kind == "step"
    assert str(cert).startswith("NOT CERTIFIED")


@pytest.mark.parametrize("model", [LSTM, JM, LINEAR])
def test_nan_weight_refused(model):
    machine, net = compiled(EXAMPLE_HAO_LINEAR if model == LINEAR else "marked_reversal", model)
    with torch.no_grad():
        next(iter(net.module.parameters())).view(-1)[0] = math.nan
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "weights"


def test_hao_linear_mutation():
    machine, net = compiled(EXAMPLE_HAO_LINEAR, LINEAR)
    with torch.no_grad():
        net.module.pop.weight.neg_()                    # pops exactly where it should not
        net.module.pop.bias.neg_()
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "step"
    assert not verified(machine, net).ok


def test_fixed_depth_superposition_stack():
    machine, net = compiled("parity", JM, depth=1)              # never pushes: exact at depth 1
    assert pn.certify(machine, net).ok
    machine, net = compiled("dyck2", JM)
    net.module.store = SuperpositionStack(4)                     # a push may drop the bottom cell
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "invariant" and "4 cells" in cert.failing.unit_label


# --- refusals and arguments -----------------------------------------------------------------------
def test_buffered_model_refused():
    m = EXAMPLE_HAO_BUFFERED
    net = pn.compile(m, target="buffered_stack_rnn", model="hao_buffered")
    with pytest.raises(CertificationError, match="pn.verify"):
        pn.certify(m, net)


def test_bad_arguments():
    machine, net = compiled("dyck2", JM)
    with pytest.raises(InputError):
        pn.certify(machine, net, kernel="exact")
    with pytest.raises(CertificationError):
        pn.certify(pn.tasks.get("dyck3"), net)                # not the compiled machine
    with pytest.raises(CertificationError, match="PaperController"):
        paper.certify_paper(machine, pn.compile(machine, target="stack_rnn"))


def test_saturating_kernel_directly():
    machine, net = compiled("marked_reversal", LSTM)
    cert = pn.certify(machine, net, kernel="saturating")
    assert cert.ok and not any("ulp kernel model alone" in n for n in cert.notes)


# --- the float enumeration behind the "saturating" kernel model -----------------------------------
@settings(max_examples=40, deadline=None)
@given(x=st.floats(-1e4, 1e4, width=32), n=st.integers(0, 40), m=st.integers(0, 40),
       f64=st.booleans())
def test_floats_in_brute_force(x, n, m, f64):
    dtype = torch.float64 if f64 else torch.float32
    f = np.float64 if f64 else np.float32
    lo = f(x)
    for _ in range(n):
        lo = np.nextafter(lo, f(-np.inf))
    hi = f(x)
    for _ in range(m):
        hi = np.nextafter(hi, f(np.inf))
    want, v = set(), lo
    while v <= hi:
        want.add(float(v))
        v = np.nextafter(v, f(np.inf))
    got = paper._floats_in(float(lo), float(hi), dtype)
    assert got is not None and set(got.tolist()) == want
    if not f64 and lo < hi:        # ends between float32 floats: the same floats inside
        inner = paper._floats_in(float(lo) - 1e-12 * abs(float(lo)) - 1e-45, float(hi), dtype)
        assert set(inner.tolist()) >= want
    assert paper._floats_in(math.nan, 1.0, dtype) is None
    assert paper._floats_in(0.0, 1e6, torch.float32) is None          # too many
    sub = float(np.float32(-1e-45))                                    # −(least subnormal)
    got = paper._floats_in(sub, 0.0, torch.float32).tolist()
    assert len(got) == 3 and set(got) == {sub, 0.0}                    # −0 and +0 both


def test_kernels_saturate_exactly():
    k = paper._Kernels(torch.float32, "saturating")
    z = iv.Interval.point(np.array([-4096.0, 4096.0, 0.0]))
    s = k.act("sigmoid", z)
    assert s.lo.tolist() == s.hi.tolist() == [0.0, 1.0, 0.5]
    u = paper._Kernels(torch.float32, "ulp").act("sigmoid", z)
    assert u.hi[0] > 0 and u.lo[1] < 1                                  # the ulp model cannot
    sm = k.softmax(iv.Interval.point(np.array([1024.0, -1024.0, -1024.0])))
    assert sm.lo.tolist() == sm.hi.tolist() == [1.0, 0.0, 0.0]
