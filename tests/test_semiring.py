"""Semiring laws and einsum against explicit loops."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata import semiring as S
from pdanet.automata.weighted_ops import closure
from pdanet.errors import DivergenceError, InputError

weights = st.fractions(min_value=0, max_value=5, max_denominator=7)


@given(st.lists(weights, min_size=3, max_size=3))
def test_laws_in_every_semiring(ws):
    for sr in (S.BOOLEAN, S.REAL, S.LOG, S.VITERBI, S.RATIONAL, S.TROPICAL):
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


# --- tropical (min, +) ------------------------------------------------------------------------

def test_tropical_laws_and_values():
    T = S.TROPICAL
    assert S.get("tropical") is T and T.zero == math.inf and T.one == 0.0
    for a, b, c in [(1.5, -2.0, 3.0), (0.0, math.inf, -1.0), (2.0, 2.0, math.inf)]:
        assert T.times(a, T.plus(b, c)) == T.plus(T.times(a, b), T.times(a, c))
        assert T.plus(a, T.zero) == a and T.times(a, T.one) == a
        assert T.times(a, T.zero) == T.zero
    assert T.lift(1) == 0.0 and T.lift(0) == math.inf and math.isclose(T.lower(T.lift(0.25)), 0.25)
    A = np.array([[1.0, math.inf], [0.5, -2.0]])
    B = np.array([[3.0, 1.0], [math.inf, 0.0]])
    assert (T.einsum("ij,jk->ik", A, B) == (A[:, :, None] + B[None]).min(axis=1)).all()
    with pytest.raises(InputError, match="NaN or -inf"):
        T.check(-math.inf, "here")
    with pytest.raises(InputError, match="not a real number"):
        T.check("cheap", "here")
    assert T.check(-3, "here") == -3.0 and T.check(math.inf, "here") == math.inf


@st.composite
def cost_graphs(draw):
    """A small digraph with integer costs in −2..5 (some negative) and missing edges (+inf)."""
    n = draw(st.integers(1, 4))
    cells = draw(st.lists(st.one_of(st.none(), st.integers(-2, 5)), min_size=n * n,
                          max_size=n * n))
    return np.array([math.inf if c is None else float(c) for c in cells]).reshape(n, n)


def _walk_costs(M: np.ndarray, max_edges: int) -> np.ndarray:
    """min over all walks of 0..max_edges edges of their summed cost (enumerated)."""
    n = len(M)
    best = np.full((n, n), math.inf)
    for length in range(max_edges + 1):
        for walk in itertools.product(range(n), repeat=length + 1):
            cost = sum(M[a, b] for a, b in itertools.pairwise(walk))
            best[walk[0], walk[-1]] = min(best[walk[0], walk[-1]], cost)
    return best


@settings(max_examples=40, deadline=None)
@given(cost_graphs())
def test_tropical_closure_is_shortest_distance_or_names_a_negative_cycle(M):
    n = len(M)
    # a negative cycle exists iff some closed walk of at most n edges is negative
    cyc = _walk_costs(M, n).diagonal()
    short = _walk_costs(M, n - 1)          # without one, shortest walks are simple paths
    if (cyc < 0).any():
        with pytest.raises(DivergenceError, match="negative cycle"):
            closure(M, "tropical")
    else:
        assert (closure(M, "tropical") == short).all()


def test_tropical_closure_floyd_warshall_example():
    inf = math.inf
    M = np.array([[inf, 4.0, 1.0, inf], [inf, inf, inf, 1.0], [inf, 2.0, inf, 5.0],
                  [0.0, inf, inf, inf]])
    want = np.array([[0, 3, 1, 4], [1, 0, 2, 1], [3, 2, 0, 3], [0, 3, 1, 0]], dtype=float)
    assert (closure(M, "tropical") == want).all()
    M[3, 0] = -5.0                                     # cycle 0→2→1→3→0 costs −1
    with pytest.raises(DivergenceError, match=r"negative cycle.*\[0, 1, 2, 3\]"):
        closure(M, "tropical")
