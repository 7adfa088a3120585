"""Compact LSTM certificates in float32 on wide machines (`pdanet.verify.certify.compact`): the
sharpened rounding bound of a row sum (`compact._sum_error`: nonzero terms only, subset sums
within [−N, P], and a large term singled out) holds for float32 sums evaluated in any order —
checked against exact rational sums —, is about half the classical γₙ·Σ|t| on rows of many equal
terms that cancel a large bias, and lets a random 64-symbol DPDA's compact LSTM certify for every
length (the network verifies); mutated LSTMs are refused."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from benchmarks.bench_compact import random_dpda
from pdanet.verify import intervals as iv
from pdanet.verify.certify import compact as cc
from tests.test_certify_compact import _mutant

F32 = np.float32
T = float(F32(math.tanh(1.0)))                  # a state ±tanh 1 as one float32
SMALL = {"max_length": 3, "samples": 60, "sample_lengths": (4, 20), "long_samples": 3,
         "long_length": 200}


def _f32(x: float) -> float:
    return float(F32(x))


def _evaluate(terms: list[float], order: str, rng: np.random.Generator) -> float:
    """fl32 of the sum of the float32 ``terms`` in one order: a chain from the first term
    (``chain``), from the last (``reverse``), pairwise, or a random binary tree."""
    if order == "reverse":
        terms = terms[::-1]
    if order in ("chain", "reverse"):
        s = terms[0]
        for t in terms[1:]:
            s = _f32(s + t)                       # float64 sum of two float32s is exact
        return s
    pool = list(terms)
    if order == "pairwise":
        while len(pool) > 1:
            pool = [_f32(pool[i] + pool[i + 1]) if i + 1 < len(pool) else pool[i]
                    for i in range(0, len(pool), 2)]
        return pool[0]
    while len(pool) > 1:
        i, j = sorted(rng.choice(len(pool), 2, replace=False).tolist())
        b, a = pool.pop(j), pool.pop(i)
        pool.append(_f32(a + b))
    return pool[0]


def _bound(w: np.ndarray, h: np.ndarray, bias: float) -> tuple[float, Fraction, float]:
    """(`_sum_error` of the row Σ w_j h_j + bias, its exact value, the classical γₙ·Σ|t|)."""
    exact = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(w, h)),
                Fraction(bias))
    tot = math.fsum(np.abs(w.astype(np.float64)) * abs(T)) + abs(bias)
    tot *= 1 + 2.0**-40
    tm = cc._terms(w.astype(np.float64)[None, :], [np.array([bias])])
    zmag = abs(float(exact)) * (1 + 2.0**-40)
    got = cc._sum_error(tm, np.array([0]), np.array([tot]), np.array([zmag]), T, torch.float32)
    n = int(tm.n[0])
    return float(got[0]), exact, float(iv.gamma(n, 2.0**-24)) * tot


@st.composite
def rows(draw):
    n = draw(st.integers(2, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):                               # equal weights, as the lookup gates
        w = np.full(n, F32(draw(st.floats(0.5, 40.0))), F32)
    else:
        w = (rng.uniform(0.1, 40.0, n) * rng.choice([-1, 1], n)).astype(F32)
    on = draw(st.floats(0.0, 1.0))
    h = np.where(rng.random(n) < on, T, -T)
    prods = [_f32(float(a) * float(b)) for a, b in zip(w, h)]
    bias = _f32(-math.fsum(prods) + draw(st.floats(-30.0, 30.0)))   # nearly cancels, or not
    if draw(st.booleans()):
        bias = _f32(draw(st.floats(-1e4, 1e4)))
    return w, h, prods, bias, seed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows())
def test_sum_error_holds_for_every_order(row):
    w, h, prods, bias, seed = row
    bound, exact, _ = _bound(w, h, bias)
    assert math.isfinite(bound)
    rng = np.random.default_rng(seed)
    for first in (True, False):                            # the bias first or last
        terms = [bias, *prods] if first else [*prods, bias]
        for order in ("chain", "reverse", "pairwise", "tree"):
            got = _evaluate(terms, order, rng)
            assert abs(Fraction(got) - exact) <= Fraction(bound), (order, first)


def test_sum_error_halves_cancelling_rows():
    """2,000 equal terms ±q·tanh 1 that cancel a bias of ~22,000 (a lookup gate): the bound is
    about half of γₙ·Σ|t|, and the bias-first chain really loses a sizeable part of it."""
    n = 2000
    w = np.full(n, F32(14.77), F32)
    h = np.full(n, -T)
    h[:3] = T
    prods = [_f32(float(a) * float(b)) for a, b in zip(w, h)]
    bias = _f32(-math.fsum(prods) + 11.0)
    bound, exact, classical = _bound(w, h, bias)
    assert bound < 0.55 * classical
    err = abs(Fraction(_evaluate([bias, *prods], "chain", np.random.default_rng(0))) - exact)
    assert err <= Fraction(bound) and float(err) > 0.01 * bound


def test_sum_error_refuses_too_many_terms():
    tm = cc._terms(np.ones((1, 2**23 + 2), np.float32), [np.zeros(1)])
    got = cc._sum_error(tm, np.array([0]), np.array([2.0**23]), np.array([1.0]), 1.0,
                        torch.float32)
    assert np.isnan(got).all()                             # (n − 1)u ≥ ½: no bound claimed


# --- a wide machine: certified as LSTM in float32, and it verifies --------------------------------

def test_wide_random_dpda_lstm_certifies_and_verifies():
    """A random 4-state DPDA over 64 symbols at m = 2 (4,219 units): rows of ~2,000 gate terms.
    The classical γₙ bound alone does not certify it (see the module docstring of the
    certifier); the sharpened one does, and `pn.verify` agrees on short and long strings."""
    b = random_dpda(64, states=4, seed=0).bounded(2)
    net = pn.compile(b, target="lstm", method="compact")
    assert net.dtype == torch.float32
    cert = cc.certify_structural(b, net, kernel="saturating")
    assert cert.ok and cert.all_lengths, cert
    rep = pn.verify(b, net, max_length=1, samples=64, sample_lengths=(2, 10), long_samples=2,
                    long_length=200)
    assert rep.ok, rep.counterexample


@pytest.mark.parametrize(("k", "what"), [(16, "lookup"), (8, "copy"), (8, "readout")])
def test_lstm_mutants_refused(k, what):
    """One weight of a certified compact LSTM flipped: `pn.verify` refutes it and the
    certificate refuses it."""
    b = random_dpda(k, states=4, seed=0).bounded(2)
    net = pn.compile(b, target="lstm", method="compact")
    assert cc.certify_structural(b, net, kernel="saturating").ok
    mut = _mutant(net, what)
    assert not pn.verify(b, mut, **SMALL).ok             # the mutation really breaks the net
    cert = cc.certify_structural(b, mut, kernel="saturating")
    assert not cert.ok and cert.failing is not None
    assert cert.failing.kind in ("step", "readout", "nonfinite"), cert
