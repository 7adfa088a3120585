"""Tests of the hidden-units-versus-bounds tables, with fake constructions registered for them."""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from pdanet.automata import DFA, DyckKM
from pdanet.constructions import table as base
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.table import register
from pdanet.verify.bounds import dfa_table, format_table, information_floor, table

K, M = sp.symbols("k m")


class FakeDyck(DyckKM):
    """A Dyck-(k, m) type of its own, so the fake constructions touch no real one."""


class FakeDFA(DFA):
    pass


def fake_net(machine, target, method, bound, units, scale=3):
    params = {"k": machine.k, "m": machine.m} if isinstance(machine, DyckKM) else {
        "n": len(machine.states)}
    return CompiledNetwork(machine=machine, module=torch.nn.Identity(), target=target,
                           method=method, hidden_units=units, bound=bound, params=params,
                           weights={}, scale=sp.sympify(scale), decoder=dict, reader=lambda x: x)


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the construction table with fake constructions added to it."""
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_DEFAULT_METHOD", dict(base._DEFAULT_METHOD))
    bound = 3 * M * sp.ceiling(sp.log(K, 2)) - M

    @register(FakeDyck, "fake_lstm", "hewitt", default=True)
    def good(machine, dtype=torch.float32):
        units = 3 * machine.m * max(1, (machine.k - 1).bit_length()) - machine.m
        return fake_net(machine, "fake_lstm", "hewitt", bound, units)

    @register(FakeDyck, "fake_lstm", "compact")
    def off_by_one(machine, dtype=torch.float32):
        units = 3 * machine.m * max(1, (machine.k - 1).bit_length()) - machine.m + 1
        return fake_net(machine, "fake_lstm", "compact", bound, units, sp.Rational(5, 2))

    N = sp.Symbol("n")

    @register(FakeDFA, "fake_lstm", "onehot", default=True)
    def dfa_net(machine, dtype=torch.float32):
        return fake_net(machine, "fake_lstm", "onehot", 2 * N, 2 * len(machine.states))


def brute_floor(k: int, m: int) -> int:
    n = sum(k**i for i in range(m + 1))
    b = 0
    while 2**b < n:
        b += 1
    return b


@given(k=st.integers(1, 3000), m=st.integers(0, 8))
def test_information_floor_is_exact(k, m):
    assert information_floor(k, m) == brute_floor(k, m)


def test_information_floor_huge_alphabet():
    # Dyck-(100000, 3): Σ kⁱ = 1 000 010 000 100 001 configurations
    n = 1 + 10**5 + 10**10 + 10**15
    assert information_floor(100_000, 3) == math.ceil(math.log2(n)) == 50


def test_table_rows(registry):
    rows = table(k=[2, 5], m=[2, 3], targets=["fake_lstm"],
                 methods=["hewitt", "compact", "missing"], machine_factory=FakeDyck)
    assert len(rows) == 2 * 2 * 3
    for r in rows:
        assert r.floor == brute_floor(r.k, r.m)
        if r.method == "missing":
            assert r.hidden_units is None and r.note.startswith("not available")
            continue
        assert r.formula == "3*m*ceiling(log(k)/log(2)) - m"
        assert r.bound == 3 * r.m * math.ceil(math.log2(r.k)) - r.m
        assert r.ratio == pytest.approx(r.hidden_units / r.floor)
        if r.method == "hewitt":
            assert r.matches and r.note == "" and r.scale == "3"
        else:
            assert r.matches is False and "MISMATCH" in r.note and r.scale == "5/2"
            assert r.hidden_units == r.bound + 1
    d = rows[0].to_dict()
    assert {"construction", "formula", "bound", "hidden_units", "floor", "ratio", "scale",
            "note"} <= set(d)


def test_table_skips_missing_target_with_note(registry):
    rows = table(k=[2], m=[2], targets=["no_such_target"], methods=["hewitt"],
                 machine_factory=FakeDyck)
    assert len(rows) == 1 and rows[0].hidden_units is None
    assert "not available" in rows[0].note and "no_such_target" in rows[0].note


def test_format_table(registry):
    rows = table(k=[2], m=[2], targets=["fake_lstm"], methods=["hewitt", "compact"],
                 machine_factory=FakeDyck)
    text = format_table(rows)
    lines = text.splitlines()
    assert lines[0].split()[:5] == ["k", "m", "target", "method", "construction"]
    assert len(lines) == 2 + len(rows)
    assert "MISMATCH" in lines[3] and "NO" in lines[3] and "yes" in lines[2]
    assert format_table([]) == "(no rows)"


def test_dfa_table(registry):
    parity = FakeDFA(states=[0, 1], alphabet="ab", transitions={(0, "a"): 1, (1, "a"): 0,
                                                               (0, "b"): 0, (1, "b"): 1},
                     start=0, accepting={0}, name="parity")
    rows = dfa_table([parity], targets=["fake_lstm", "elsewhere"])
    assert rows[0].hidden_units == 4 and rows[0].bound == 4 and rows[0].matches
    assert rows[0].machine == "parity" and rows[0].states == 2 and rows[0].symbols == 2
    assert rows[1].hidden_units is None and "not available" in rows[1].note
    assert "parity" in format_table(rows)


def test_min_scale_column_is_a_certified_scale_at_most_the_constructions():
    from pdanet.verify.bounds import HEWITT_BLANKET_SCALE, table

    (row,) = table(k=[2], m=[2], targets=["elman"], methods=["compact"], min_scale=True)
    assert row.min_scale is not None
    assert 0 < float(row.min_scale) <= float(row.scale) < HEWITT_BLANKET_SCALE


@pytest.mark.parametrize("k, m", [(3, 1), (7, 1), (2, 40), (8, 33), (10, 7000), (3, 50_000),
                                  (6, 30_000)])
def test_information_floor_closed_forms_and_large_sums_are_exact(k, m):
    """Powers of two, sums that are powers of two (1 + 3 = 4, 1 + 7 = 8) and sums of more than
    2¹⁶ bits (the float path) agree with the integer definition."""
    n = (k ** (m + 1) - 1) // (k - 1)                       # Σ_{i ≤ m} kⁱ
    exact = n.bit_length() - (1 if n & (n - 1) == 0 else 0)   # ⌈log₂ n⌉
    assert information_floor(k, m) == exact
    if m < 100:
        assert exact == brute_floor(k, m)


def test_information_floor_of_astronomical_sums_is_immediate():
    """m·log₂k ≈ 6·10¹⁹ bits: never materialised (the value is ⌈(m+1)·log₂k − log₂(k−1)⌉)."""
    k, m = 10**18 - 1, 10**18
    want = math.ceil((m + 1) * math.log2(k) - math.log2(k - 1))
    assert abs(information_floor(k, m) - want) <= 2 ** 14  # float64 reference, 2^66-sized value
    assert information_floor(2**40, 10**18) == 40 * 10**18 + 1
