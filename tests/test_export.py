"""Saving compiled networks to weight files and loading them back (`pdanet.export`)."""

from __future__ import annotations

import json

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

import pdanet as pn
from pdanet.automata.io import loads
from pdanet.errors import InputError, PdanetError
from pdanet.export import (
    WeightsFileError,
    load_network,
    metadata,
    read_weights,
    save_network,
)


def same_state(a, b) -> bool:
    sa, sb = a.module.state_dict(), b.module.state_dict()
    return sa.keys() == sb.keys() and all(
        sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture(scope="module")
def dyck_net():
    return pn.compile(pn.tasks.dyck(k=2, m=3), target="lstm", method="compact")


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_round_trip_gives_the_same_network(tmp_path, dyck_net, suffix):
    path = save_network(dyck_net, tmp_path / f"w{suffix}", task="dyck", params={"k": 2, "m": 3})
    assert path.is_file()
    net = load_network(path)
    assert same_state(net, dyck_net)
    assert net.machine == dyck_net.machine
    assert (net.target, net.method, net.scale, net.dtype) == \
        (dyck_net.target, dyck_net.method, dyck_net.scale, dyck_net.dtype)
    assert net.info["weights_match_exact"] is True
    assert net.info["weights_file"] == str(path)
    assert pn.verify(net.machine, net, max_length=6, samples=100, long_length=300).ok


def test_pt_file_is_a_plain_torch_checkpoint(tmp_path, dyck_net):
    path = save_network(dyck_net, tmp_path / "w.pt")
    blob = torch.load(path, weights_only=True)
    fresh = pn.compile(pn.tasks.dyck(k=2, m=3), target="lstm", method="compact").module
    fresh.load_state_dict(blob["state_dict"])  # usable without pdanet.export
    assert blob["metadata"]["method"] == "compact"


@settings(max_examples=8, deadline=None)
@given(k=st.integers(1, 5), m=st.integers(1, 3), target=st.sampled_from(["elman", "lstm"]),
       method=st.sampled_from(["hewitt", "onehot", "compact"]),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       beta=st.fractions(min_value=1, max_value=200, max_denominator=7))
def test_round_trip_keeps_construction_scale_and_dtype(tmp_path_factory, k, m, target, method,
                                                        dtype, beta):
    net = pn.compile(pn.tasks.dyck(k=k, m=m), target=target, method=method, dtype=dtype)
    net = net.with_scale(sp.Rational(beta.numerator, beta.denominator))
    path = save_network(net, tmp_path_factory.mktemp("w") / "net.safetensors")
    back = load_network(path)
    assert back.scale == net.scale and back.dtype == dtype
    assert same_state(back, net)
    assert read_weights(path)[1]["scale"] == str(net.scale)


def test_loaded_weights_are_the_file_weights_not_the_construction(tmp_path, dyck_net):
    edited = dyck_net.with_scale()
    with torch.no_grad():
        edited.module.h0.add_(0.125)  # e.g. a trained network
    net = load_network(save_network(edited, tmp_path / "edited.safetensors"))
    assert torch.equal(net.module.h0, edited.module.h0)
    assert net.info["weights_match_exact"] is False
    assert same_state(net, edited)

    broken = dyck_net.with_scale()
    with torch.no_grad():
        broken.module.rnn.weight_hh_l0.zero_()
        broken.module.rnn.weight_ih_l0.zero_()
    net = load_network(save_network(broken, tmp_path / "broken.safetensors"))
    report = pn.verify(net.machine, net, max_length=4, samples=0, long_length=0)
    assert not report.ok  # the file's (broken) weights are what runs


def test_metadata_content(tmp_path, dyck_net):
    path = save_network(dyck_net, tmp_path / "w.safetensors")
    _, meta = read_weights(path)
    assert meta["format"] == "pdanet-network"
    assert meta["pdanet_version"] == pn.__version__
    assert loads(meta["machine_spec"]) == dyck_net.machine
    assert meta["machine"] == repr(dyck_net.machine)
    assert (meta["target"], meta["method"], meta["dtype"]) == ("lstm", "compact", "float32")
    assert sp.Rational(meta["scale"]) == dyck_net.scale
    assert meta["bound"] == str(dyck_net.bound)
    assert int(meta["bound_value"]) == int(meta["hidden_units"]) == dyck_net.hidden_units
    assert json.loads(meta["params"]) == {"k": 2, "m": 3}
    assert "task" not in meta


def test_machine_from_spec_file_format(tmp_path):
    machine = pn.tasks.get("cumulative_xor")
    net = pn.compile(machine, target="elman")
    back = load_network(save_network(net, tmp_path / "xor.safetensors"))
    assert back.machine == machine and same_state(back, net)
    assert pn.verify(back.machine, back, max_length=6, samples=50, long_length=100).ok


def test_machine_without_file_format_needs_a_task(tmp_path):
    """A store transducer (queue) has no machine file format: the task rebuilds it."""
    net = pn.compile(pn.tasks.get("sequence_copy", vocab_size=2), target="stack_rnn")
    with pytest.raises(InputError, match="task="):
        save_network(net, tmp_path / "q.safetensors")
    back = load_network(save_network(net, tmp_path / "q.safetensors", task="sequence_copy",
                                     params={"vocab_size": 2}))
    assert same_state(back, net)


def test_ns_network_of_a_task_round_trips(tmp_path):
    """A DPDA compiled to ns_rnn through its weighted PDA (which has a file format)."""
    net = pn.compile(pn.tasks.get("marked_reversal"), target="ns_rnn")
    assert same_state(load_network(save_network(net, tmp_path / "ns.safetensors")), net)
    back = load_network(save_network(net, tmp_path / "ns.safetensors", task="marked_reversal"))
    assert same_state(back, net)


@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_bounded_machines_round_trip(tmp_path, target):
    """A compact network of a depth-bounded DPDA, and an LM of a bounded probabilistic DPDA:
    the file keeps the machine it bounds and the bound."""
    from pdanet.automata.probabilistic import marked_reversal as pdpda

    for machine in (pn.tasks.get("marked_reversal").bounded(3),
                    pdpda().bounded(2, overflow="renormalise")):
        net = pn.compile(machine, target=target)
        back = load_network(save_network(net, tmp_path / "b.safetensors"))
        assert (back.compiled_from or back.machine) == machine and same_state(back, net)
    net = pn.compile(pn.tasks.get("marked_reversal").bounded(3), target=target)
    via_task = load_network(save_network(net, tmp_path / "t.pt", task="marked_reversal"))
    assert via_task.machine == net.machine and same_state(via_task, net)


# --- errors -----------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(WeightsFileError, match="does not exist"):
        load_network(tmp_path / "nothing.safetensors")
    assert issubclass(WeightsFileError, PdanetError)


def test_not_a_weight_file(tmp_path):
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"not a safetensors file at all")
    with pytest.raises(WeightsFileError, match="not a safetensors file"):
        load_network(path)
    pt = tmp_path / "plain.pt"
    torch.save({"w": torch.zeros(2)}, pt)
    with pytest.raises(WeightsFileError, match="state_dict"):
        load_network(pt)


def _rewrite(src, dst, **changes):
    tensors, meta = read_weights(src)
    meta = {k: v for k, v in (meta | changes).items() if v is not None}
    save_file(tensors, str(dst), metadata=meta)
    return dst


@pytest.mark.parametrize("changes, message", [
    ({"format": None}, "'format'"),
    ({"format": "other"}, "not written by pdanet"),
    ({"format_version": "99"}, "format_version"),
    ({"scale": "lots"}, "'scale'"),
    ({"dtype": "float7"}, "'dtype'"),
    ({"target": None}, "lacks the fields"),
    ({"machine_spec": "{"}, "machine_spec"),
    ({"machine_spec": None}, "neither"),
    ({"task": "no_such_task"}, "unknown task"),
    ({"machine_spec": json.dumps({"format": 1, "kind": "dyck", "k": 3, "m": 3})}, "parameters"),
    ({"machine_spec": json.dumps({"format": 1, "kind": "dyck", "k": 4, "m": 3}),
      "params": None}, "hidden units"),
    ({"machine_spec": json.dumps({"format": 1, "kind": "dyck", "k": 3, "m": 3}),
      "params": None}, "'embedding.weight' has shape"),
])
def test_bad_metadata(tmp_path, dyck_net, changes, message):
    src = save_network(dyck_net, tmp_path / "w.safetensors")
    with pytest.raises(WeightsFileError, match=message):
        load_network(_rewrite(src, tmp_path / "bad.safetensors", **changes))


def test_tensors_that_do_not_fit(tmp_path, dyck_net):
    meta = metadata(dyck_net)
    tensors = {k: v.contiguous() for k, v in dyck_net.module.state_dict().items()}
    save_file({**tensors, "extra": torch.zeros(1)}, str(tmp_path / "a.safetensors"),
              metadata=meta)
    with pytest.raises(WeightsFileError, match="unexpected \\['extra'\\]"):
        load_network(tmp_path / "a.safetensors")
    tensors["h0"] = torch.zeros(7)
    save_file(tensors, str(tmp_path / "b.safetensors"), metadata=meta)
    with pytest.raises(WeightsFileError, match="'h0' has shape"):
        load_network(tmp_path / "b.safetensors")
