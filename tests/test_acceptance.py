"""The acceptance checks of the Dyck and finite-state constructions at CI sizes, through the one
shared verifier (`pn.verify`). `benchmarks/acceptance.py` runs them at full size."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from benchmarks.acceptance import DFA_TARGETS, DYCK_METHODS, finite_state_machines


@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("method", DYCK_METHODS)
def test_dyck_constructions_verify(target, method):
    for (k, m), kw in [
        ((2, 3), dict(max_length=12, samples=0, long_length=0, long_samples=0)),
        ((3, 4), dict(max_length=9, samples=0, long_length=0, long_samples=0)),
        ((4, 3), dict(max_length=9, samples=0, long_length=0, long_samples=0)),
        ((5, 7), dict(max_length=None, samples=2_000, sample_lengths=(1, 30), long_length=0,
                      long_samples=0)),
        ((100, 3), dict(max_length=None, samples=2_000, sample_lengths=(1, 30),
                        long_length=0, long_samples=0)),
        ((2, 10), dict(max_length=None, samples=0, long_length=20_000, long_samples=2)),
    ]:
        d = pn.tasks.dyck(k, m)
        report = pn.verify(d, pn.compile(d, target=target, method=method), **kw)
        assert report.ok, f"Dyck-({k},{m}): {report}"


@pytest.mark.slow
@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("method", DYCK_METHODS)
def test_dyck_long_string_100000(target, method):
    d = pn.tasks.dyck(2, 10)
    report = pn.verify(d, pn.compile(d, target=target, method=method), max_length=None,
                       samples=0, long_length=100_000, long_samples=1)
    assert report.ok and report.steps_checked >= 100_000


@pytest.mark.parametrize("target,method", DFA_TARGETS)
@pytest.mark.parametrize("name", list(finite_state_machines()))
def test_finite_state_tasks_verify(name, target, method):
    m = finite_state_machines()[name]
    big = len(m.states) * len(m.alphabet) > 200
    length = min(7 if big else 10, int(math.log(300_000) / math.log(len(m.alphabet))))
    net = pn.compile(m, target=target, method=method)
    assert net.hidden_units == net.bound_value
    report = pn.verify(m, net, max_length=length, samples=0, long_length=1000,
                       long_samples=20 if big else 500)
    assert report.ok, f"{name}: {report}"


# --- the hypothesis property of the DFA issue, through pn.verify ------------------------------------
def _random_complete_dfa(seed: int, n: int, k: int, kind: str) -> pn.DFA:
    """A random complete DFA (every state has every symbol) or Mealy machine."""
    import numpy as np

    rng = np.random.default_rng(seed)
    table = rng.integers(0, n, size=(n, k))
    alphabet = "abcdef"[:k]
    accepting = sorted({0} | set(np.flatnonzero(rng.random(n) < 0.4).tolist()))
    if kind == "mealy":
        n_out = int(rng.integers(1, 4))
        return pn.DFA.from_table(table, alphabet, 0, accepting,
                                 out_table=rng.integers(0, n_out, size=(n, k)),
                                 output_alphabet="xyz"[:n_out])
    return pn.DFA.from_table(table, alphabet, 0, accepting, output_kind=kind)


def _property(target: str, method: str, seed: int, n: int, k: int, kind: str) -> None:
    dfa = _random_complete_dfa(seed, n, k, kind)
    net = pn.compile(dfa, target=target, method=method)
    report = pn.verify(dfa, net, max_length=8, samples=0, long_length=5000, long_samples=4,
                       max_strings=3 * 10**6)
    assert report.ok, f"{kind} DFA, {n} states, {k} symbols (seed {seed}): {report}"
    assert report.strings_checked > 4  # the exhaustive phase ran (the start state accepts)


_DFA_CASES = st.tuples(st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(2, 6),
                       st.sampled_from(["accept", "next_set", "mealy"]))


@pytest.mark.parametrize("target,method", DFA_TARGETS)
@settings(max_examples=3, deadline=None, derandomize=True)
@given(case=_DFA_CASES.filter(lambda c: c[2] <= 4))
def test_random_dfas_verify_exhaustive_8_and_length_5000(target, method, case):
    """Random complete DFAs (2–40 states) and Mealy machines → every target → `pn.verify`
    agrees on every string up to length 8 and on strings of length 5,000 (CI: ≤ 4 symbols)."""
    _property(target, method, *case)


@pytest.mark.slow
@pytest.mark.parametrize("target,method", DFA_TARGETS)
@settings(max_examples=4, deadline=None, derandomize=True)
@given(case=_DFA_CASES)
def test_random_dfas_verify_up_to_6_symbols(target, method, case):
    """The same property over the issue's whole range, 2–6 symbols (6⁸ ≈ 1.7 M strings)."""
    _property(target, method, *case)
