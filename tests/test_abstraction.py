"""Every construction says what its units mean with a typed abstraction, and builds its exact
weights by meaning (the blocks round-trip the module's state_dict)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pdanet as pn
from pdanet.automata import tasks
from pdanet.automata.weighted import hardest_cfl_realtime
from pdanet.constructions.abstraction import (
    Abstraction,
    DyckSlots,
    NSChart,
    RecurrentUnits,
    SteppedUnits,
)
from pdanet.constructions.dfa_rnn import stepped_state_dict
from pdanet.constructions.dyck import compile_dyck_elman, compile_dyck_lstm
from pdanet.constructions.modules import RecurrentNet, recurrent_blocks, recurrent_state_dict
from pdanet.constructions.ns import ns_state_dict
from pdanet.constructions.second_order import second_order_state_dict

CASES = [
    # (machine, target, method, abstraction type, cell)
    (lambda: tasks.dyck(2, 3), "elman", "hewitt", DyckSlots, "rnn"),
    (lambda: tasks.dyck(3, 2), "elman", "onehot", DyckSlots, "rnn"),
    (lambda: tasks.dyck(2, 3), "lstm", "hewitt", DyckSlots, "lstm"),
    (lambda: tasks.dyck(4, 2), "lstm", "compact", DyckSlots, "lstm"),
    (lambda: tasks.get("parity"), "elman", "minsky", RecurrentUnits, "rnn"),
    (lambda: tasks.get("parity"), "lstm", "minsky", RecurrentUnits, "lstm"),
    (lambda: tasks.get("parity"), "second_order", "omlin_giles", SteppedUnits, None),
    (lambda: tasks.get("parity"), "elman", "compressed", SteppedUnits, None),
    (hardest_cfl_realtime, "ns_rnn", "embedding", NSChart, None),
]


def _compile(make, target, method):
    return pn.compile(make(), target=target, method=method, dtype=torch.float64)


@pytest.mark.parametrize("make,target,method,kind,cell", CASES,
                         ids=[f"{c[1]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_abstraction_type_and_labels(make, target, method, kind, cell):
    net = _compile(make, target, method)
    a = net.abstraction
    assert type(a) is kind
    assert len(a.labels) == net.hidden_units
    assert tuple(net.unit_labels) == a.labels
    if cell is not None:
        assert a.cell == cell
    for key in ("layout", "neg", "window"):
        assert key not in net.info


RECURRENT = [c for c in CASES if c[1] in ("elman", "lstm") and c[2] != "compressed"]


@pytest.mark.parametrize("make,target,method,kind,cell", RECURRENT,
                         ids=[f"{c[1]}-{c[2]}-{i}" for i, c in enumerate(RECURRENT)])
def test_recurrent_blocks_round_trip(make, target, method, kind, cell):
    net = _compile(make, target, method)
    assert isinstance(net.module, RecurrentNet)
    state = net.module.state_dict()
    again = recurrent_state_dict(net.module.blocks())
    assert set(again) == set(state)
    assert all(torch.equal(again[k], state[k]) for k in state)
    # the exact weights are keyed the same way and read back by meaning too
    exact = recurrent_blocks(net.weights)
    assert set(recurrent_state_dict(exact)) == set(net.weights)
    arrays = net.module.blocks(numpy=True)
    assert isinstance(arrays.weight_hh, np.ndarray) and arrays.weight_hh.dtype == np.float64
    np.testing.assert_array_equal(arrays.bias, arrays.bias_ih + arrays.bias_hh)


def test_other_modules_round_trip_their_blocks():
    parity = tasks.get("parity")
    for net, to_dict in (
        (pn.compile(parity, target="second_order"), second_order_state_dict),
        (pn.compile(parity, target="elman", method="compressed"), stepped_state_dict),
        (pn.compile(hardest_cfl_realtime(), target="ns_rnn"), ns_state_dict),
    ):
        state = net.module.state_dict()
        again = to_dict(net.module.blocks())
        assert set(again) == set(state), net.construction
        assert all(torch.equal(again[k], state[k]) for k in state), net.construction


def test_dyck_slots_describe_the_layout():
    net = compile_dyck_elman(tasks.dyck(2, 3))
    a = net.abstraction
    assert (a.kind, a.slots, a.top) == ("push_pop", 3, "first")
    assert a.units.shape == (2, 3, a.slot_width) and a.signs.shape == (a.slot_width,)
    assert sorted(a.units.ravel().tolist()) == list(range(net.hidden_units))
    assert a.groups() == tuple(range(a.slot_width, net.hidden_units, a.slot_width))
    lstm = compile_dyck_lstm(tasks.dyck(2, 3), method="onehot")
    b = lstm.abstraction
    assert (b.kind, b.cell, b.top, b.slot_width) == ("cell_stack", "lstm", "last", 2)
    assert b.units.shape == (3, 2) and lstm.construction == "lstm/onehot"
    assert b.code is not None and b.code.d == 2


def test_dyck_compile_functions_match_the_registry():
    m = tasks.dyck(3, 2)
    for fn, target in ((compile_dyck_elman, "elman"), (compile_dyck_lstm, "lstm")):
        for method in ("hewitt", "onehot", "compact"):
            direct = fn(m, method=method)
            via = pn.compile(m, target=target, method=method)
            assert direct.construction == via.construction == f"{target}/{method}"
            assert all(torch.equal(direct.state_dict()[k], v)
                       for k, v in via.state_dict().items())
    with pytest.raises(pn.errors.InputError):
        compile_dyck_elman(m, method="nope")


def test_ns_chart_carries_neg_window_and_source():
    pda = tasks.get("marked_reversal")
    net = pn.compile(pda, target="ns_rnn", window=7, neg=500)
    a = net.abstraction
    assert (a.neg, a.window) == (500, 7) and net.compiled_from is pda


def test_labels_fill_the_abstraction_and_back():
    parity = pn.compile(tasks.get("parity"), target="elman")
    plain = type(parity)(**{**parity.__dict__, "abstraction": Abstraction(),
                            "unit_labels": ("a",) * parity.hidden_units})
    assert plain.abstraction.labels == ("a",) * parity.hidden_units
    assert isinstance(plain.abstraction, Abstraction)
