"""Certificates for compiled stack RNNs (exact saturation + memory lemma) and the NS-RNN bound."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.constructions.ns import error_bound
from pdanet.errors import CertificationError
from pdanet.verify.certify_stack import (
    certify_ns_rnn,
    certify_stack_rnn,
    exact_terms_sum,
    memory_check,
    step_invariant,
)

MEMORIES = ("grefenstette", "joulin_mikolov", "suzgun")


@pytest.fixture(scope="module")
def nets():
    out = {}
    for name in ("reversal", "parenthesis_prediction"):
        m = pn.tasks.get(name)
        for mem in MEMORIES:
            out[name, mem] = (m, pn.compile(m, target="stack_rnn", method=mem))
    return out


@pytest.mark.parametrize("name", ["reversal", "parenthesis_prediction"])
@pytest.mark.parametrize("memory", MEMORIES)
def test_required_certificates_all_lengths_float32(nets, name, memory):
    m, net = nets[name, memory]
    cert = pn.certify(m, net)                      # dispatches to certify_stack_rnn
    assert cert.ok and cert.all_lengths and cert.max_length is None, str(cert)
    assert cert.dtype == "float32" and cert.failing is None
    assert cert.cases > 0 and cert.configs > 0
    assert cert.readout_margin > 0 and cert.state_margin > 0
    # the ulp model cannot prove exact saturation: the fallback is said
    assert cert.kernel == "saturating"
    assert any("ulp kernel model" in n for n in cert.notes)


def test_saturating_kernel_directly_and_float64(nets):
    m, net = nets["reversal", "grefenstette"]
    cert = certify_stack_rnn(m, net, kernel="saturating")
    assert cert.ok and cert.all_lengths and not any("ulp kernel" in n for n in cert.notes)
    # float64 has 2^52 floats per binade: exact saturation is not checked there, so a proof that
    # needs σ = 1 / tanh = ±1 exactly is refused rather than assumed
    cert64 = certify_stack_rnn(m, net, dtype=torch.float64)
    assert not cert64.ok and cert64.dtype == "float64"
    assert "float64 proofs use no exact saturation" in str(cert64)


@pytest.mark.parametrize("name", ["dyck2", "marked_reversal", "boolean_formula", "w_phi_wr"])
def test_other_stack_tasks(name):
    m = pn.tasks.get(name)
    cert = pn.certify(m, pn.compile(m, target="stack_rnn"))
    assert cert.ok and cert.all_lengths, str(cert)


@pytest.mark.parametrize("memory", MEMORIES)
def test_finite_state_machines_elman_and_linear(memory):
    mealy = pn.tasks.get("delayed_xor")
    cert = pn.certify(mealy, pn.compile(mealy, target="stack_rnn", method=memory))
    assert cert.ok and cert.all_lengths, str(cert)
    one = pn.DFA(states=[0, 1], alphabet="ab", transitions={(0, "a"): 0, (0, "b"): 1},
                 start=0, accepting={0})  # dies after 'b'
    net = pn.compile(one, target="stack_rnn", method=memory)
    assert pn.certify(one, net).ok
    flat = pn.DFA(states=[0], alphabet="ab", transitions={(0, "a"): 0, (0, "b"): 0}, start=0,
                  accepting={0})
    if memory == "suzgun":           # no no-op action: a linear controller cannot hold still
        return
    lin = pn.compile(flat, target="stack_rnn", method=memory, controller="linear")
    cert = pn.certify(flat, lin)
    assert cert.ok and cert.kernel == "ulp"           # no tanh: no kernel assumption needed


def test_small_beta_fails_and_verify_finds_counterexample(nets):
    m, net = nets["reversal", "grefenstette"]
    weak = net.with_scale(1)
    cert = pn.certify(m, weak)
    assert not cert.ok and not cert.all_lengths
    fc = cert.failing
    assert fc is not None and fc.kind == "step" and fc.symbol is not None
    assert fc.unit_label.startswith("tanh")
    assert fc.interval[1] < fc.required[0] or fc.interval[0] > fc.required[1]
    report = pn.verify(m, weak, max_length=4)
    assert not report.ok and report.counterexample is not None


@pytest.mark.parametrize("where", ["recurrent", "action", "value", "readout"])
def test_perturbed_weight_fails_with_failing_case(nets, where):
    m, net = nets["reversal", "grefenstette"]
    bad = net.with_scale()
    with torch.no_grad():
        if where == "recurrent":
            bad.module.cell.weight_hh[3, 0] += 40.0
        elif where == "action":
            bad.module.actions.weight[0, 2] += 0.25
        elif where == "value":
            bad.module.values.bias[0] += 1.0
        else:
            bad.module.out_h.bias[0] += 3.0
    cert = pn.certify(m, bad)
    assert not cert.ok and cert.failing is not None, str(cert)
    assert cert.failing.kind in ("step", "readout")
    lo, hi = cert.failing.interval
    rlo, rhi = cert.failing.required
    assert hi < rlo or lo > rhi or (lo, hi) != (rlo, rhi)
    report = pn.verify(m, bad, max_length=5)
    assert not report.ok and report.counterexample is not None


def _discrete_readings(ops, codes):
    stack, out = [], []
    G = codes.shape[0] - 1
    for op, y in ops:
        if op in ("pop", "replace") and stack:
            stack.pop()
        if op in ("push", "replace"):
            stack.append(y)
        out.append(codes[stack[-1] if stack else G])
    return np.stack(out)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), memory=st.sampled_from(MEMORIES),
       T=st.integers(1, 40))
def test_memory_lemma_bit_exact_on_random_saturated_actions(nets, seed, memory, T):
    """Lemma 2: with exact 0/1 actions and exact codes the module's memory is the discrete
    stack, bit for bit (strengths exactly 0/1, reading exactly the top's code)."""
    _, net = nets["parenthesis_prediction", memory]
    module = net.module
    codes = np.asarray(module.codes.codes, dtype=np.float64)
    G, width = codes.shape[0] - 1, codes.shape[1]
    rng = np.random.default_rng(seed)
    kinds = ["push", "pop"] + (["noop"] if memory != "suzgun" else []) + (
        ["replace"] if memory == "grefenstette" else [])
    B = 8
    seqs = [[(kinds[rng.integers(len(kinds))], int(rng.integers(G))) for _ in range(T)]
            for _ in range(B)]
    mem = module._memory(B, T, torch.zeros(B, 1))
    got = []
    for t in range(T):
        act = torch.zeros(B, len(module.channels))
        val = torch.zeros(B, module.values.out_features)
        for b in range(B):
            op, y = seqs[b][t]
            for k, ch in enumerate(module.channels):
                act[b, k] = float(ch == op or (op == "replace" and ch in ("push", "pop")))
            if op in ("push", "replace"):
                val[b, :width] = torch.as_tensor(codes[y])
        with torch.no_grad():
            got.append(mem.step(act, val, None)[:, :width].numpy())
        if mem.k == mem.BLOCK:
            mem.flush()                      # the module's read-back buffer, as in forward
        if memory == "grefenstette":
            s = mem.S[:, :t + 1]
            assert bool(((s == 0) | (s == 1)).all())
    got = np.stack(got, 1)
    for b in range(B):
        want = _discrete_readings(seqs[b], codes)
        assert np.array_equal(got[b], want.astype(np.float32))


def test_memory_check_detects_a_wrong_memory(nets):
    _, net = nets["reversal", "grefenstette"]
    assert memory_check(net) is None
    broken = net.with_scale()
    broken.module.codes.codes = broken.module.codes.codes[::-1].copy()  # reference codes differ
    assert memory_check(broken) is not None


def test_exact_sum_lemma():
    terms = np.array([[32.0, -32.0, 16.0, 0.5], [2.0**23, 2.0**23, 0.5, 0.0]])
    total, ok = exact_terms_sum(terms, torch.float32)
    assert ok.tolist() == [True, False]       # 2^24 + 0.5 is not a float32
    assert total[0] == 16.5
    # brute force: the lemma's "exact in any order" on random dyadic rows
    rng = np.random.default_rng(0)
    for _ in range(200):
        row = rng.integers(-64, 65, size=6) / 4.0
        _, ok = exact_terms_sum(row[None, :], torch.float32)
        assert ok[0]
        for perm in (rng.permutation(6) for _ in range(5)):
            acc = np.float32(0)
            for v in row[perm]:
                acc = np.float32(acc + np.float32(v))
            assert float(acc) == row.sum()


def test_invariant_check_rejects_a_wrong_memory_op(monkeypatch):
    from pdanet.constructions.stacks import NeuralStack
    from pdanet.verify.certify import stack
    from pdanet.verify.certify.stack import Move

    G = 3
    mv = Move(p2=0, out=-1, pop_end=None, push_end="top", y=1)   # a push of store code 1
    ok = step_invariant(NeuralStack(), G, 0, 2, mv)
    assert not isinstance(ok, str) and ok[1] == "push" and ok[3][-1] == 1
    monkeypatch.setattr(stack, "_memory_op", lambda store, G, mode, R, mv: (0, "noop", -1))
    assert isinstance(step_invariant(NeuralStack(), G, 0, 2, mv), str)


def test_ns_rnn_length_bound_on_marked_reversal():
    m = pn.tasks.get("marked_reversal")
    net = pn.compile(m, target="ns_rnn")
    cert = pn.certify(m, net)
    assert cert.ok and not cert.all_lengths and cert.max_length is not None
    n = cert.max_length
    wpda = net.machine
    L = net.abstraction.neg
    assert error_bound(wpda, n, L) <= 1e-5
    assert any("length-free bound is not possible" in note for note in cert.notes)
    # the bound is a function of length: a larger L certifies longer strings, a smaller fewer
    net_small = pn.compile(m, target="ns_rnn", neg=200)
    cert_small = certify_ns_rnn(m, net_small, check_length=3)
    assert cert_small.max_length < n
    assert error_bound(wpda, cert_small.max_length + 1, 200) > 1e-5 or \
        cert_small.readout_margin < 3 * np.log(44)
    capped = certify_ns_rnn(m, net, max_length=50, check_length=2)
    assert capped.max_length == 50


@pytest.mark.parametrize("memory", ["grefenstette", "joulin_mikolov", "suzgun"])
def test_stack_store_transducers_certify_and_a_mutation_fails(memory):
    from pdanet.automata.store import sequence_reversal

    m = sequence_reversal(3, "stack")
    net = pn.compile(m, target="stack_rnn", method=memory)
    cert = pn.certify(m, net)
    assert cert.ok and cert.all_lengths, cert
    bad = net.with_scale()
    bad.module.actions.weight.data[0, 1] += 0.7        # one action weight off its exact value
    assert not pn.certify(m, bad).ok
    report = pn.verify(m, bad, max_length=5, samples=20)   # a store of another width is a
    assert not report.ok and report.counterexample is not None   # counterexample, not an error


def test_queue_networks_are_refused_by_the_stack_certificate():
    from pdanet.automata.store import sequence_copy

    m = sequence_copy(3)
    net = pn.compile(m, target="stack_rnn")
    with pytest.raises(CertificationError, match="queue"):
        pn.certify(m, net)
