"""All-lengths certificates for the compiled Stack-RNN / Stack-LSTM of Suzgun et al. (2019)
(`pdanet.verify.certify.suzgun`): they hold on the seed tasks in float32, every certified network
agrees with its machine by brute force and `pn.verify`, and mutated, near-saturated or broken
networks are not certified."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import realtime_dpda

import pdanet as pn
from pdanet.automata.bounded import DyckKM
from pdanet.errors import CertificationError, InputError
from pdanet.models.suzgun import compile_suzgun_stack_lstm, compile_suzgun_stack_rnn
from pdanet.verify.certify import suzgun as cs
from pdanet.verify.certify.dispatch import family

COMPILE = {"rnn": compile_suzgun_stack_rnn, "lstm": compile_suzgun_stack_lstm}
_NETS: dict = {}


def _net(task: str, kind: str, readout=None, **kw):
    key = (task, kind, readout, tuple(sorted(kw.items())))
    if key not in _NETS:
        m = pn.tasks.get(task)
        _NETS[key] = (m, COMPILE[kind](m, readout=readout, **kw))
    return _NETS[key]


def _brute_force(m, net, L: int) -> None:
    """Every string up to length L: on every live prefix the network's readout equals the
    machine's output (its `NextSetMachine`'s for a next-set network)."""
    target = net.machine
    syms = list(m.alphabet.symbols)
    strings, frontier = [()], [()]
    for _ in range(L):
        frontier = [s + (a,) for s in frontier for a in syms]
        strings += frontier
    ids, lengths = m.encode(strings)
    trace = target.run_batch(ids, lengths)
    with torch.no_grad():
        _, logits = net.module(torch.as_tensor(ids))
    got = np.asarray(net.readout(logits.numpy()))
    want = np.asarray(trace.fields["output"])
    state = trace.fields["state"]
    for b, n in enumerate(lengths):
        for t in range(n + 1):
            if state[b, t] < 0 or (want.ndim == 3 and not want[b, t].any()):
                break
            assert np.array_equal(got[b, t], want[b, t]), (strings[b][:t], got[b, t], want[b, t])


def _verify(m, net, **kw):
    opts = {"max_length": 4, "samples": 200, "sample_lengths": (5, 24), "long_samples": 0,
            "seed": 0}
    opts.update(kw)
    return pn.verify(m, net, **opts)


CASES = [("dyck2", "rnn", None), ("dyck2", "lstm", None), ("dyck2", "rnn", "next_set"),
         ("dyck1", "lstm", "next_set"), ("marked_reversal", "rnn", None),
         ("marked_reversal", "lstm", "next_set"), ("parity", "rnn", None),
         ("reversal", "rnn", None), ("modular_counter", "lstm", None)]


@pytest.mark.parametrize("task,kind,readout", CASES)
def test_certified_on_seed_tasks(task, kind, readout):
    m, net = _net(task, kind, readout)
    assert family(net) == "suzgun"
    cert = pn.certify(m, net)
    assert cert.ok and cert.all_lengths and cert.max_length is None, str(cert)
    assert cert.kernel == "saturating" and cert.configs > 0 and cert.cases > 0
    assert cert.readout_margin > 0 and cert.state_margin > 0
    assert any("ulp kernel model alone" in n for n in cert.notes)
    rep = _verify(m, net)
    assert rep.ok, rep.counterexample
    _brute_force(m, net, 4)


def test_next_set_certified_from_either_machine():
    m, net = _net("dyck2", "rnn", "next_set")
    assert pn.certify(net.machine, net).ok
    assert pn.certify(m, net).ok


def test_temperature_and_noise_below_the_margin():
    """τ = 3 is folded into W_a (the certificate divides by τ with rounding); noise of 1e-2 on
    every weight (the saturated heads and units keep their exact values, relay units carry a
    box) is still certified: the proof reads the weights as they are."""
    m, net = _net("dyck2", "lstm", None, temperature=3)
    assert pn.certify(m, net).ok
    m, net = _net("dyck2", "rnn")
    noisy = net.with_scale()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in noisy.module.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 1e-2)
    cert = pn.certify(m, noisy)
    assert cert.ok, str(cert)
    assert _verify(m, noisy).ok


def test_gumbel_training_mode_is_noted():
    """Gumbel noise is training-only: the certificate covers the eval() forward and says so."""
    m, net = _net("dyck2", "rnn", None, gumbel=True, temperature=2)
    trained = net.with_scale()
    trained.module.train()
    cert = pn.certify(m, trained)
    assert cert.ok and any("module.eval()" in n for n in cert.notes)
    assert not any("module.eval()" in n for n in pn.certify(m, net).notes)


def _mutated(net, name: str, f):
    out = net.with_scale()
    with torch.no_grad():
        f(dict(out.module.named_parameters())[name])
    return out


def test_wrong_op_is_not_certified_and_verify_finds_it():
    m, net = _net("dyck2", "rnn")
    bad = _mutated(net, "W_a.bias", lambda p: p.neg_())          # push ↔ pop preference
    cert = pn.certify(m, bad)
    assert not cert.ok and cert.failing.kind in ("step", "readout", "invariant")
    assert not _verify(m, bad).ok


def test_wrong_pushed_code_is_not_certified_and_verify_finds_it():
    m, net = _net("dyck2", "lstm")
    bad = _mutated(net, "W_n.bias", lambda p: p.add_(4096.0))      # bit 0 of every push is 1
    cert = pn.certify(m, bad)
    assert not cert.ok and cert.failing.kind in ("step", "invariant")
    assert not _verify(m, bad).ok


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_near_saturated_heads_are_not_certified(kind):
    """A softmax gap of 82 (< a* ≈ 104: e^{−82} is no float32 zero) and β = 4 (units tanh(±2))
    still give correct outputs on short strings, but no all-lengths claim is made."""
    m, net = _net("dyck2", kind)
    weak = net.with_scale()
    with torch.no_grad():
        weak.module.W_a.weight.mul_(0.04)
        weak.module.W_a.bias.mul_(0.04)
    cert = pn.certify(m, weak)
    assert not cert.ok and "one-hot" in cert.failing.unit_label
    assert _verify(m, weak, samples=50).ok
    low = net.with_scale(4)
    cert = pn.certify(m, low)
    assert not cert.ok and not cert.all_lengths
    assert _verify(m, low, samples=50).ok


def test_nan_weight_refused_and_float64_not_claimed():
    m, net = _net("dyck2", "rnn")
    bad = _mutated(net, "cell.weight_hh", lambda p: p.view(-1).__setitem__(3, math.nan))
    cert = pn.certify(m, bad)
    assert not cert.ok and cert.failing.kind == "weights"
    cert = pn.certify(m, net, dtype=torch.float64)   # no float64 float is claimed to underflow
    assert not cert.ok and "float64" in cert.failing.unit_label


def test_bad_arguments_and_pairs():
    m, net = _net("dyck2", "rnn")
    with pytest.raises(InputError):
        pn.certify(m, net, kernel="exact")
    with pytest.raises(InputError):
        cs.certify_suzgun(m, net, max_configs=0)
    with pytest.raises(CertificationError):
        pn.certify(pn.tasks.get("dyck3"), net)
    m2, other = _net("parity", "rnn")
    with pytest.raises(CertificationError):
        cs.certify_suzgun(m2, pn.compile(m2))
    cert = pn.certify(m, net, max_configs=2)
    assert not cert.ok and cert.failing.kind == "configs"
    calls = []
    cert = pn.certify(m, net, kernel="saturating", progress=lambda *a: calls.append(a))
    assert cert.ok and cert.kernel == "saturating" and calls and calls[-1][1] == cert.cases
    assert not any("ulp kernel model alone" in n for n in cert.notes)
    assert pn.certify(m2, other).ok


def test_kernel_facts():
    a, U = cs.softmax_underflow(2048.0)
    assert 64 <= a < 110 and U >= 2048
    z = torch.tensor([0.0, -a], dtype=torch.float32)
    assert torch.equal(torch.softmax(z, -1), torch.tensor([1.0, 0.0]))
    t0, U0 = cs.sigmoid_underflow(1024.0)
    assert 64 <= t0 < 110 and U0 >= 1024
    assert float(torch.sigmoid(torch.tensor(-t0, dtype=torch.float32))) == 0.0
    assert cs.softmax_underflow(1e6)[0] == math.inf


@given(m=realtime_dpda(max_states=3), kind=st.sampled_from(["rnn", "lstm"]))
@settings(max_examples=25, deadline=None)
def test_random_dpdas_certified_and_brute_forced(m, kind):
    net = COMPILE[kind](m)
    cert = pn.certify(m, net)
    assert cert.ok, str(cert)
    _brute_force(m, net, 5 if len(m.alphabet) <= 2 else 4)


# --- Baby-NTM (§3.3): bounded machines, the finite product explored exactly ------------------------
def _ntm(m, **kw):
    from pdanet.models.suzgun import compile_suzgun_baby_ntm

    return compile_suzgun_baby_ntm(m, **kw)


@pytest.mark.parametrize("make,layout", [
    (lambda: DyckKM(2, 3), "auto"), (lambda: pn.tasks.get("dyck2").bounded(3), "memory"),
    (lambda: pn.tasks.get("dyck2").bounded(3), "held"), (lambda: pn.tasks.get("parity"), "auto"),
    (lambda: pn.tasks.get("marked_reversal").bounded(3), "auto")])
def test_baby_ntm_certified_and_verified(make, layout):
    m = make()
    net = _ntm(m, layout=layout)
    assert family(net) == "suzgun"
    cert = pn.certify(m, net)
    assert cert.ok and cert.all_lengths, str(cert)
    assert cert.readout_margin > 0 and cert.state_margin > 0 and cert.configs > 0
    assert _verify(m, net).ok
    _brute_force(m, net, 5 if len(m.alphabet) <= 2 else 4)


def test_baby_ntm_mutations():
    m = DyckKM(2, 3)
    net = _ntm(m)
    noop = _mutated(net, "W_a.bias", lambda p: p.__setitem__(2, p[2] + 5000.0))   # NOOP wins
    cert = pn.certify(m, noop)
    assert not cert.ok and cert.failing.kind in ("step", "readout")
    assert not _verify(m, noop).ok
    code = _mutated(net, "W_n.bias", lambda p: p.add_(4096.0))      # every write adds ones
    cert = pn.certify(m, code)
    assert not cert.ok
    assert not _verify(m, code).ok
    low = net.with_scale(4)                                          # σ(±64): no exact 0/1
    cert = pn.certify(m, low)
    assert not cert.ok and "written value" in cert.failing.unit_label
    assert _verify(m, low, samples=50).ok
    nan = _mutated(net, "W_y.weight", lambda p: p.view(-1).__setitem__(0, math.inf))
    assert pn.certify(m, nan).failing.kind == "weights"
    with pytest.raises(CertificationError):
        cs.certify_baby_ntm(m, pn.compile(pn.tasks.get("parity")))
