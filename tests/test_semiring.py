"""Semiring laws and einsum against explicit loops."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdanet.automata import semiring as S
from pdanet.errors import InputError

weights = st.fractions(min_value=0, max_value=5, max_denominator=7)


@given(st.lists(weights, min_size=3, max_size=3))
def test_laws_in_every_semiring(ws):
    for sr in (S.BOOLEAN, S.REAL, S.LOG, S.VITERBI, S.RATIONAL):
        a, b, c = (sr.lift(w) for w in ws)
        lhs = sr.times(a, sr.plus(b, c))
        rhs = sr.plus(sr.times(a, b), sr.times(a, c))
        assert np.isclose(sr.lower(lhs), sr.lower(rhs)), sr.name
        assert np.isclose(sr.lower(sr.times(a, sr.one)), sr.lower(a))
        assert np.isclose(sr.lower(sr.plus(a, sr.zero)), sr.lower(a))


def test_rational_einsum_matches_loops():
    rng = np.random.default_rng(0)
    A = np.vectorize(lambda v: Fraction(int(v), 3), otypes=[object])(rng.integers(0, 5, (2, 3, 4)))
    B = np.vectorize(lambda v: Fraction(int(v), 2), otypes=[object])(rng.integers(0, 5, (4, 3, 2)))
    got = S.RATIONAL.einsum("ijk,kjl->il", A, B)
    for i in range(2):
        for l in range(2):
            assert got[i, l] == sum(A[i, j, k] * B[k, j, l] for j in range(3) for k in range(4))


def test_log_and_viterbi_einsum_against_real():
    rng = np.random.default_rng(1)
    A, B = rng.uniform(0, 2, (3, 4)), rng.uniform(0, 2, (4, 5))
    real = S.REAL.einsum("ij,jk->ik", A, B)
    assert np.allclose(np.exp(S.LOG.einsum("ij,jk->ik", np.log(A), np.log(B))), real)
    best, arg = S.VITERBI.einsum_argmax("ij,jk->ik", np.log(A), np.log(B))
    assert np.allclose(np.exp(best), (A[:, :, None] * B[None]).max(axis=1))
    assert np.array_equal(arg, (A[:, :, None] * B[None]).argmax(axis=1))
    assert np.array_equal(S.BOOLEAN.einsum("ij,jk->ik", A > 1, B > 1),
                          ((A > 1).astype(int) @ (B > 1).astype(int)) > 0)


def test_bad_weights_are_typed_errors():
    with pytest.raises(InputError, match="negative"):
        S.REAL.check(-1.0, "here")
    with pytest.raises(InputError, match="negative"):
        S.RATIONAL.check(Fraction(-1, 2), "here")
    with pytest.raises(InputError):
        S.get("tropical-ish")
    assert S.LOG.check(-3.0, "here") == -3.0
