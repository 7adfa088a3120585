"""A certificate is never wrong: mutated networks are either refused or really agree.

For every family that `pdanet.certify` proves (DFA → Elman / LSTM Minsky units; Dyck-(k, m) →
the Elman and LSTM stack constructions, by enumeration and structurally; stack RNN controllers;
the NS-RNN's bounded-length certificate), a small certified network has one weight block
perturbed — NaN, ±inf, ±large, a sign flip of one entry or one row, two rows swapped, the block
zeroed or scaled down — and then: a NaN/inf mutant is refused with the block named; any mutant
that certifies passes `pn.verify` (every live prefix to a small length, random and long
strings) up to the length the certificate claims. Zero false certificates.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import numpy as np
import pytest
import torch

import pdanet as pn
from pdanet.errors import CertificationError, InputError
from pdanet.verify.certificate import EPS_MAX, certify, min_scale
from pdanet.verify.structural import certify_structural

NONFINITE = ("nan", "+inf", "-inf")
FINITE = ("+1e6", "-1e6", "+1e30", "-1e30", "flip_entry", "flip_row", "swap_rows", "zero_block",
          "tiny")
KINDS = NONFINITE + FINITE


def _mutant(net, block: str, kind: str):
    """A copy of `net` whose float module has `block` perturbed by `kind` (the entry of largest
    magnitude, or its row)."""
    module = copy.deepcopy(net.module)
    t = module.state_dict()[block]          # shares storage with the module's parameter
    flat = t.view(-1)
    i = int(flat.abs().argmax())
    rows = t.view(t.shape[0], -1) if t.dim() > 1 else t.view(-1, 1)
    r = i // rows.shape[1]
    with torch.no_grad():
        if kind in NONFINITE or kind[1:].startswith("1e"):
            flat[i] = float(kind)
        elif kind == "flip_entry":
            flat[i] = -flat[i]
        elif kind == "flip_row":
            rows[r] = -rows[r]
        elif kind == "swap_rows":
            r2 = (r + 1) % rows.shape[0]
            a = rows[r].clone()
            rows[r] = rows[r2]
            rows[r2] = a
        elif kind == "zero_block":
            t.zero_()
        elif kind == "tiny":
            t.mul_(1e-6)
        else:
            raise AssertionError(kind)
    return dataclasses.replace(net, module=module)


def _check(machine, net, cert, block: str, kind: str, long_length: int = 1000) -> None:
    """The mutation test's two rules (module docstring); strings up to ``long_length``."""
    label = f"{net.construction}: {kind} in {block}"
    if kind in NONFINITE:
        assert not cert.ok, label
        assert cert.failing is not None and cert.failing.kind == "weights", (label, str(cert))
        assert repr(block) in str(cert.failing), (label, str(cert.failing))
        return
    if not cert.ok:
        return
    reach = long_length if cert.all_lengths else min(long_length, cert.max_length)
    rep = pn.verify(machine, net, max_length=min(6, reach), samples=50,
                    sample_lengths=(0, min(24, reach)), long_samples=2, long_length=reach)
    assert rep.ok, (label, str(cert), rep.counterexample)


def _sweep(machine, net, blocks, kinds=KINDS, long_length: int = 1000, **options) -> int:
    assert certify(machine, net, **options).ok, "the unmutated network must certify"
    certified = 0
    for block in blocks:
        for kind in kinds:
            mut = _mutant(net, block, kind)
            cert = certify(machine, mut, **options)
            _check(machine, mut, cert, block, kind, long_length)
            certified += cert.ok
    return certified


def _rnn_blocks(net, all_blocks: bool) -> list[str]:
    if all_blocks:
        return [k for k, v in net.module.state_dict().items() if v.is_floating_point()]
    return ["rnn.weight_hh_l0", "rnn.bias_hh_l0", "readout.weight"]


# --- the fast tier ------------------------------------------------------------------------------

FAST = [
    ("parity", "elman", None, {}),
    ("parity", "lstm", None, {}),
    ("dyck22", "elman", "hewitt", {}),
    ("dyck22", "lstm", "compact", {"max_configs": 1}),      # the structural certifier
]


def _machine(name: str):
    return pn.tasks.dyck(2, 2) if name == "dyck22" else pn.tasks.get(name)


@pytest.mark.parametrize("name,target,method,options", FAST)
def test_no_false_certificate_rnn(name, target, method, options):
    m = _machine(name)
    net = pn.compile(m, target=target, **({"method": method} if method else {}))
    _sweep(m, net, _rnn_blocks(net, all_blocks=False), **options)


def test_no_false_certificate_stack_rnn():
    m = pn.tasks.get("marked_reversal")
    net = pn.compile(m, target="stack_rnn", method="grefenstette")
    _sweep(m, net, ["cell.weight_hh", "actions.weight"],
           NONFINITE + ("+1e30", "flip_entry", "flip_row", "zero_block"))


def test_ns_rnn_nonfinite_refused():
    m = pn.tasks.get("dyck1")
    net = pn.compile(m, target="ns_rnn")
    # the NS-RNN costs O(n³) per string and its certificate is for bounded lengths: short strings
    _sweep(net.machine, net, ["embedding.weight", "log_final"], NONFINITE, long_length=24)
    _sweep(net.machine, net, ["log_final"], ("flip_entry",), long_length=24)


def test_flipped_sign_is_seen():
    """Mutating the module's parameters is what the certifier reads: a flipped recurrent
    matrix is not certified (and verify agrees that the network is wrong)."""
    m = pn.tasks.get("parity")
    net = pn.compile(m, target="elman")
    mut = dataclasses.replace(net, module=copy.deepcopy(net.module))
    with torch.no_grad():
        mut.module.rnn.weight_hh_l0.neg_()
    cert = certify(m, mut)
    assert not cert.ok and cert.failing is not None
    assert not pn.verify(m, mut, max_length=4, samples=0, long_samples=0).ok


def test_nan_weight_reported_for_elman_and_lstm():
    """The reported defect: one NaN weight, verify finds a counterexample, certify said yes."""
    for target in ("elman", "lstm"):
        m = pn.tasks.get("parity")
        net = _mutant(pn.compile(m, target=target), "rnn.weight_hh_l0", "nan")
        assert not pn.verify(m, net, max_length=4, samples=0, long_samples=0).ok
        cert = certify(m, net)
        assert not cert.ok and not cert.all_lengths
        assert "rnn.weight_hh_l0" in str(cert) and "nan" in str(cert.failing)
        assert cert.failing.unit_label.startswith("entry")
        data = json.loads(cert.to_json(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
        assert data["ok"] is False and data["state_margin"] == "nan"


def test_structural_certifier_called_directly_refuses_nan():
    d = pn.tasks.dyck(2, 3)
    for target in ("elman", "lstm"):
        net = _mutant(pn.compile(d, target=target), "rnn.weight_hh_l0", "+inf")
        cert = certify_structural(d, net)
        assert not cert.ok and cert.failing.kind == "weights"


def test_overflowing_sum_is_not_certified():
    """Finite weights whose sums overflow float32 have no rounding bound: not certified."""
    m = pn.tasks.get("parity")
    net = pn.compile(m, target="elman")
    mut = dataclasses.replace(net, module=copy.deepcopy(net.module))
    with torch.no_grad():
        w = mut.module.rnn.weight_hh_l0
        w[0, :] = 3e38
        w[0, 1:] = -3e38
    cert = certify(m, mut)
    assert not cert.ok


# --- arguments ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def parity_net():
    m = pn.tasks.get("parity")
    return m, pn.compile(m, target="elman")


@pytest.mark.parametrize("eps", [math.nan, math.inf, -math.inf, 0, 0.0, -1, EPS_MAX * 1.01,
                                 True, "0.1"])
def test_bad_eps_is_an_input_error(parity_net, eps):
    m, net = parity_net
    with pytest.raises(InputError, match="eps"):
        certify(m, net, eps=eps)


@pytest.mark.parametrize("chunk", [0, -1, 1.5, True, None])
def test_bad_chunk_is_an_input_error(parity_net, chunk):
    m, net = parity_net
    with pytest.raises(InputError, match="chunk"):
        certify(m, net, chunk=chunk)


@pytest.mark.parametrize("bad", [{"max_configs": 0}, {"max_configs": False},
                                 {"kernel": "exact"}, {"dtype": torch.int32},
                                 {"progress": 3}])
def test_other_bad_arguments(parity_net, bad):
    m, net = parity_net
    with pytest.raises(InputError, match=next(iter(bad))):
        certify(m, net, **bad)


def test_good_small_arguments_still_certify(parity_net):
    m, net = parity_net
    assert certify(m, net, eps=EPS_MAX, chunk=1).ok
    assert certify(m, net, eps=np.float32(0.1), chunk=np.int64(7)).ok


@pytest.mark.parametrize("bad", [{"rel_tol": 0}, {"rel_tol": math.nan}, {"rel_tol": 1.5},
                                 {"min_length": 0}, {"min_length": 2.5}, {"eps": math.inf},
                                 {"chunk": 0}])
def test_min_scale_bad_arguments(parity_net, bad):
    m, net = parity_net
    with pytest.raises(InputError, match=next(iter(bad))):
        min_scale(m, net, **bad)


# --- machine / network mismatch -----------------------------------------------------------------

def test_mismatched_machine_is_explained():
    d = pn.tasks.dyck(2, 3)
    for other in (pn.tasks.dyck(3, 3), pn.tasks.dyck(2, 4)):
        net = pn.compile(other, target="elman")
        with pytest.raises(CertificationError, match="compiled for"):
            certify(d, net)
        with pytest.raises(CertificationError, match="compiled for"):
            min_scale(d, net)
    dfa = pn.DFA.from_table(np.array([[1, 0, 0], [0, 1, 1]]), "abc", 0, {1})
    with pytest.raises(CertificationError, match="compiled for"):
        certify(pn.tasks.get("parity"), pn.compile(dfa, target="lstm"))
    stack = pn.compile(pn.tasks.get("dyck2"), target="stack_rnn")
    with pytest.raises(CertificationError, match="compiled for"):
        certify(pn.tasks.get("marked_reversal"), stack)
    ns = pn.compile(pn.tasks.get("marked_reversal"), target="ns_rnn")
    with pytest.raises(CertificationError, match="compiled for"):
        certify(pn.tasks.get("dyck1"), ns)


# --- progress -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,target,options", [
    ("parity", "elman", {}), ("dyck22", "lstm", {}), ("dyck22", "elman", {"max_configs": 1}),
    ("parity", "stack_rnn", {}), ("dyck1", "ns_rnn", {})])
def test_progress_is_called(name, target, options):
    m = _machine(name)
    net = pn.compile(m, target=target)
    calls = []
    cert = certify(net.machine if target == "ns_rnn" else m, net,
                   progress=lambda *a: calls.append(a), **options)
    assert cert.ok and calls
    for stage, done, total in calls:
        assert isinstance(stage, str) and isinstance(done, int) and isinstance(total, int)
        assert 0 <= done <= total


# --- the slow tier ------------------------------------------------------------------------------

SLOW = ([(pn.tasks.dyck(2, 3), t, meth, {}) for t in ("elman", "lstm")
         for meth in ("hewitt", "onehot", "compact")]
        + [(pn.tasks.dyck(2, 3), t, meth, {"max_configs": 1}) for t in ("elman", "lstm")
           for meth in ("hewitt", "compact")]            # structural (it does not prove onehot)
        + [(pn.tasks.get("modular_counter"), t, None, {}) for t in ("elman", "lstm")])


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(SLOW)))
def test_no_false_certificate_rnn_every_block(case):
    m, target, method, options = SLOW[case]
    net = pn.compile(m, target=target, **({"method": method} if method else {}))
    _sweep(m, net, _rnn_blocks(net, all_blocks=True), **options)


@pytest.mark.slow
@pytest.mark.parametrize("name,memory", [
    ("marked_reversal", "grefenstette"), ("marked_reversal", "joulin_mikolov"),
    ("marked_reversal", "suzgun"), ("reversal", "grefenstette"), ("parity", "suzgun")])
def test_no_false_certificate_stack_rnn_every_block(name, memory):
    m = pn.tasks.get(name)
    net = pn.compile(m, target="stack_rnn", method=memory)
    blocks = [k for k, v in net.module.state_dict().items() if v.is_floating_point()]
    _sweep(m, net, blocks)


# --- the induction's base case ------------------------------------------------------------------

_BASE_CASES = [(name, "lstm", method, block, shift)
               for name, method in (("parity", None), ("dyck22", "compact"), ("dyck22", "hewitt"))
               for block, shift in (("c0", 1e30), ("c0", -1e6), ("c0", 0.7), ("h0", 0.6))]
_BASE_CASES.append(("parity", "elman", None, "h0", 0.6))


@pytest.mark.parametrize("name,target,method,block,shift", _BASE_CASES)
def test_initial_state_outside_its_box_is_not_certified(name, target, method, block, shift):
    """Every unit of the initial state, LSTM cells included, must lie within ε of its centre:
    cells keep the cap as their radius, so their initial deviation is compared explicitly (an
    initial cell moved by 0.7 or 1e30 was certified while verify failed at step 0 or 1)."""
    m = _machine(name)
    net = pn.compile(m, target=target, **({"method": method} if method else {}))
    mut = dataclasses.replace(net, module=copy.deepcopy(net.module))
    with torch.no_grad():
        mut.module.state_dict()[block].view(-1)[0] += shift
    cert = certify(m, mut)
    assert not cert.ok and cert.failing is not None and cert.failing.kind == "initial", str(cert)
    assert cert.failing.unit == (net.module.hidden_size if block == "c0" else 0)


def test_ns_rnn_certificate_refuses_edited_weights():
    """The NS-RNN length bound comes from the compiled weights: an edited module is refused."""
    import torch

    m = pn.tasks.get("dyck1")
    net = pn.compile(m, target="ns_rnn")
    assert pn.certify(m, net).ok
    name, p = next(iter(net.module.named_parameters()))
    with torch.no_grad():
        p.view(-1)[0] += 1e-3
    cert = pn.certify(m, net)
    assert not cert.ok and name in str(cert) and "compiled" in str(cert)
