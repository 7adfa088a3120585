"""Tests of the structural (local-view) certifier for the Dyck-(k, m) stack networks.

On small machines it must agree with the enumerative certifier (which visits every node); on
Dyck-(100000, 3) it must certify; a corrupted weight or a too-small β must make it fail with a
failing case that names the unit (or logit) at fault.
"""

from __future__ import annotations

import pytest
import torch

import pdanet as pn
from pdanet.automata.bounded import DyckKM
from pdanet.errors import CertificationError
from pdanet.verify.certificate import certify
from pdanet.verify.structural import certify_structural

SMALL = [(2, 3), (3, 2), (4, 5)]


def _agree(k: int, m: int, target: str, method: str) -> None:
    machine = DyckKM(k, m)
    net = pn.compile(machine, target=target, method=method)
    enum = certify(machine, net, kernel="saturating")
    local = certify_structural(machine, net, kernel="saturating")
    assert enum.ok and local.ok, (str(enum), str(local))
    assert local.all_lengths == enum.all_lengths
    assert local.configs == machine.num_configs
    assert local.all_lengths, str(local)


@pytest.mark.parametrize("k,m", SMALL)
@pytest.mark.parametrize("target,method", [("elman", "hewitt"), ("elman", "compact"),
                                           ("lstm", "hewitt"), ("lstm", "compact")])
def test_agrees_with_enumerative(k, m, target, method):
    _agree(k, m, target, method)


@pytest.mark.parametrize("method", ["hewitt", "compact"])
def test_large_elman(method):
    machine = DyckKM(100_000, 3)
    cert = certify_structural(machine, pn.compile(machine, target="elman", method=method))
    assert cert.ok and cert.all_lengths, str(cert)
    assert cert.dtype == "float32" and cert.configs == machine.num_configs


@pytest.mark.parametrize("method", ["hewitt", "compact"])
def test_large_lstm(method):
    """ulp model alone: a stated length; saturating model (what `pn.certify` falls back to):
    every length."""
    machine = DyckKM(100_000, 3)
    net = pn.compile(machine, target="lstm", method=method)
    cert = certify_structural(machine, net)
    assert cert.ok and not cert.all_lengths and cert.max_length >= 100, str(cert)
    assert any("holds for" in n for n in cert.notes)
    cert = certify_structural(machine, net, kernel="saturating")
    assert cert.ok and cert.all_lengths, str(cert)
    full = pn.certify(machine, net)
    assert full.ok and full.all_lengths and full.kernel == "saturating"


def _corrupt(net, name: str, index: tuple, value: float):
    net = net.with_scale()
    with torch.no_grad():
        net.module.state_dict()[name][index] = value
    return net


def test_corrupted_recurrent_weight_names_the_unit():
    machine = DyckKM(3, 2)
    net = pn.compile(machine, target="elman", method="hewitt")
    units = net.abstraction.units
    unit = int(units[0, 1, 0])                # P, slot 2 from the top, coordinate 0
    src = int(units[0, 0, 0])                 # it copies P, slot 1, coordinate 0
    bad = _corrupt(net, "rnn.weight_hh_l0", (unit, src), 0.0)
    cert = certify_structural(machine, bad)
    assert not cert.ok
    assert cert.failing.kind == "step" and cert.failing.unit == unit
    assert "P[slot 2" in cert.failing.unit_label and "coordinate 0" in cert.failing.unit_label
    assert certify_structural(machine, net).ok


def test_corrupted_lstm_gate_names_the_unit():
    machine = DyckKM(4, 3)
    net = pn.compile(machine, target="lstm", method="compact")
    H = net.hidden_units
    unit = int(net.abstraction.units[1, 0])   # slot 2 from the bottom, coordinate 0
    bad = _corrupt(net, "rnn.bias_ih_l0", (H + unit,), 0.0)   # its forget gate's bias
    cert = certify_structural(machine, bad)
    assert not cert.ok and cert.failing.kind == "step"
    assert cert.failing.unit in (unit, H + unit)
    assert "slot 2 from bottom, coordinate 0" in cert.failing.unit_label


def test_corrupted_readout_names_the_logit():
    machine = DyckKM(100_000, 3)
    net = pn.compile(machine, target="elman", method="compact")
    row = machine.k + 12_345                                  # the close bracket of type 12345
    bad = _corrupt(net, "out_embedding.bias", (row,), 1e3)
    cert = certify_structural(machine, bad, eps=0.25)
    assert not cert.ok and cert.failing.kind == "readout" and cert.failing.unit == row


@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_small_beta_fails(target):
    machine = DyckKM(4, 3)
    net = pn.compile(machine, target=target, method="hewitt")
    assert certify_structural(machine, net).ok
    cert = certify_structural(machine, net.with_scale(1))
    assert not cert.ok and cert.failing is not None
    assert cert.failing.unit >= 0 and cert.failing.unit_label
    assert "NOT CERTIFIED" in str(cert)


def test_rejects_other_machines():
    with pytest.raises(CertificationError):
        certify_structural(DyckKM(2, 2), pn.compile(DyckKM(2, 3), target="elman"))
