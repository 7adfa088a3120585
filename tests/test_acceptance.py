"""The acceptance checks of the Dyck and finite-state constructions at CI sizes, through the one
shared verifier (`pn.verify`). `benchmarks/acceptance.py` runs them at full size."""

import math

import pytest

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
