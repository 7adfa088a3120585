"""All-lengths certificates: what they prove, and that they fail where they should."""

import json

import numpy as np
import pytest
import torch

import pdanet as pn
from pdanet.verify.certificate import certify, min_scale

DYCK_METHODS = ["hewitt", "onehot", "compact"]


@pytest.mark.parametrize("method", DYCK_METHODS)
def test_dyck_elman_certified_for_every_length_float32(method):
    d = pn.tasks.dyck(2, 3)
    cert = certify(d, pn.compile(d, target="elman", method=method))
    assert cert.ok and cert.all_lengths and cert.max_length is None
    assert cert.dtype == "float32" and cert.failing is None
    assert cert.state_margin > 0 and cert.readout_margin > 0


@pytest.mark.parametrize("method", DYCK_METHODS)
def test_dyck_lstm_certified_for_every_length(method):
    """The ulp model alone proves a length L (saturated forget gates may be 1 − O(u)); with
    exact saturation the cell box is invariant (`intervals.lstm_cell`): every length."""
    d = pn.tasks.dyck(2, 3)
    net = pn.compile(d, target="lstm", method=method)
    cert = certify(d, net)
    assert cert.ok and cert.all_lengths and cert.max_length is None, str(cert)
    assert cert.kernel == "saturating" and cert.dtype == "float32"
    assert any("ulp kernel model alone" in n for n in cert.notes)
    sat = certify(d, net, kernel="saturating")
    assert sat.ok and sat.all_lengths and not any("ulp kernel" in n for n in sat.notes)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("method", DYCK_METHODS)
def test_dyck_4_5_certified(target, method):
    d = pn.tasks.dyck(4, 5)
    cert = certify(d, pn.compile(d, target=target, method=method))
    assert cert.ok and cert.all_lengths, str(cert)


FINITE_STATE = ["parity", "cumulative_xor", "delayed_xor", "modular_counter"]


@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("name", FINITE_STATE)
def test_finite_state_tasks_certified(name, target):
    m = pn.tasks.get(name)
    cert = certify(m, pn.compile(m, target=target))
    assert cert.ok and cert.all_lengths


@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_bounded_pushdown_task_certified(target):
    dfa = pn.tasks.get("marked_reversal").bounded(3).to_dfa()
    cert = certify(dfa, pn.compile(dfa, target=target))
    assert cert.ok and cert.all_lengths


def _random_dfa(rng, n, k):
    table = rng.integers(0, n, size=(n, k))
    accepting = set(np.nonzero(rng.random(n) < 0.5)[0].tolist())
    return pn.DFA.from_table(table, "abcdef"[:k], 0, accepting)


@pytest.mark.parametrize("seed", range(6))
def test_random_dfas_certified(seed):
    rng = np.random.default_rng(seed)
    dfa = _random_dfa(rng, int(rng.integers(2, 15)), int(rng.integers(2, 4)))
    for target in ("elman", "lstm"):
        cert = certify(dfa, pn.compile(dfa, target=target))
        assert cert.ok and cert.all_lengths, (target, str(cert))


@pytest.mark.slow
def test_fifty_random_dfas_certified():
    rng = np.random.default_rng(1234)
    for _ in range(50):
        dfa = _random_dfa(rng, int(rng.integers(2, 40)), int(rng.integers(2, 6)))
        for target in ("elman", "lstm"):
            cert = certify(dfa, pn.compile(dfa, target=target))
            assert cert.ok and cert.all_lengths, (target, str(cert))


def test_float64_certificate():
    d = pn.tasks.dyck(2, 2)
    cert = certify(d, pn.compile(d, target="elman", method="compact"), dtype=torch.float64)
    assert cert.ok and cert.dtype == "float64"


def test_perturbed_weight_fails_with_the_offending_unit():
    d = pn.tasks.dyck(2, 3)
    net = pn.compile(d, target="elman", method="hewitt")
    sd = net.module.state_dict()
    sd["rnn.weight_hh_l0"][3, :] = 0.0
    sd["rnn.bias_ih_l0"][3] = 5.0
    net.module.load_state_dict(sd)
    cert = certify(d, net)
    assert not cert.ok and cert.failing is not None
    assert cert.failing.kind in ("step", "readout", "initial", "encoding")
    assert "NOT CERTIFIED" in str(cert) and "failing case" in str(cert)


def test_scale_below_minimum_fails_and_verify_finds_a_counterexample():
    d = pn.tasks.dyck(2, 3)
    net = pn.compile(d, target="elman", method="compact")
    beta, cert = min_scale(d, net)
    assert cert.ok and cert.all_lengths and 0 < beta <= net.scale
    below = certify(d, net.with_scale(beta * 0.95))
    assert not below.ok and below.failing is not None
    weak = net.with_scale(1)
    assert not certify(d, weak).ok
    report = pn.verify(d, weak, max_length=8, samples=200, long_length=200)
    assert not report.ok and report.counterexample is not None


def test_certify_min_scale_attribute_and_json():
    assert pn.certify.min_scale is min_scale
    d = pn.tasks.dyck(1, 2)
    cert = pn.certify(d, pn.compile(d, target="elman"))
    data = json.loads(cert.to_json())
    assert data["ok"] is True and data["all_lengths"] is True and data["cases"] > 0
    assert "CERTIFIED for every length" in str(cert)


def test_family_is_chosen_by_the_abstraction_type():
    """`certify` dispatches on the type of `net.abstraction` (MRO), not on target strings; a
    network no family certifies is refused with its abstraction named."""
    from pdanet.constructions.abstraction import (
        BufferedController,
        ControllerMemory,
        DyckSlots,
        NSChart,
        RecurrentUnits,
    )
    from pdanet.errors import CertificationError
    from pdanet.verify.certify import FAMILIES, family

    assert FAMILIES[RecurrentUnits] == "box" and FAMILIES[DyckSlots] == "dyck"
    assert FAMILIES[ControllerMemory] == "stack" and FAMILIES[NSChart] == "ns"
    assert FAMILIES[BufferedController] is None
    parity = pn.tasks.get("parity")
    assert family(pn.compile(parity, target="elman")) == "box"
    assert family(pn.compile(pn.tasks.dyck(2, 2), target="lstm")) == "dyck"
    second = pn.compile(parity, target="second_order")
    with pytest.raises(CertificationError, match="SteppedUnits.*pn.verify"):
        certify(parity, second)
    m = pn.tasks.get("reversal")
    buffered = pn.compile(m, target="buffered_stack_rnn")
    with pytest.raises(CertificationError, match="BufferedController"):
        certify(m, buffered)
