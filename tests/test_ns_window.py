"""The windowed NS stack (`ns_window`): band layout, exactness for every window, hand-written
gradient, and the denormal mode it restores."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.constructions.stacks.ns import NondeterministicStack
from pdanet.constructions.stacks.ns_window import Band, flush_denormals
from pdanet.constructions.stacks.reference_ns import reference_ns


@pytest.mark.parametrize("D", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("Q,G", [(1, 2), (2, 3)])
def test_band_views_are_disjoint_in_bounds_and_zero_below_the_diagonal(D, Q, G):
    """Write every column t = 1..T through `Band.column` with distinct values: no entry is
    written twice, every write stays in the buffer, and `pop_block` reads back exactly
    E[i→k] for rows i < k (from the columns written) and zero for i ≥ k."""
    B, T = 2, 3 * D + 4
    band = Band(B, Q, G, D, T)
    M = torch.zeros(band.length, dtype=torch.float64)
    hits = torch.zeros(band.length, dtype=torch.int64)
    idx = torch.arange(band.length, dtype=torch.float64)
    cols = {}
    for t in range(1, T + 1):
        pos = band.column(idx, t).long()
        assert pos.min() >= 0 and pos.max() < band.length
        hits.view(-1).index_add_(0, pos.reshape(-1), torch.ones(pos.numel(), dtype=torch.int64))
        vals = torch.rand(B, D, Q, G, Q, G, dtype=torch.float64) + 1
        rows = torch.arange(t - D, t)
        vals[:, rows < 0] = 0                                   # rows before the string
        band.column(M, t).copy_(vals)
        cols[t] = vals
    assert hits.max() == 1
    n = D - 2
    for t in range(1, T + 1):
        if n <= 0:
            break
        got = band.pop_block(M, t).view(B, G, n, Q, G, n, Q)    # [b, y, i, q, x, k, u]
        for a in range(n):
            for c in range(n):
                i, k = t - D + a, t - D + 1 + c
                want = (cols[k][:, i - (k - D)].permute(0, 4, 1, 2, 3) if 1 <= k and i < k
                        else torch.zeros(B, G, Q, G, Q, dtype=torch.float64))
                assert torch.equal(got[:, :, a, :, :, c], want), (t, i, k)


@pytest.mark.parametrize("D", [1, 2, 3, 5, 8, 30])
def test_every_window_equals_lang_and_its_gradient_a_central_difference(D, ns_checks):
    rng = np.random.default_rng(D)
    B, T, Q, G = 2, 24, 2, 3
    la = torch.tensor(rng.normal(size=(B, T, Q, G, Q, 2 * G + 1)), requires_grad=True)
    w = torch.tensor(rng.random((B, T + 1, Q, G)))
    ns_checks(NondeterministicStack(Q, G, window=D, bottom="extended"), la, D,
              lambda r: r.log_norm.sum() + (r.reading * w).sum(), rng)


@pytest.mark.parametrize("D", [1, 2, 3, 5])
def test_gradcheck_small_windows(D):
    torch.manual_seed(D)
    Q, G, T = 2, 2, 8
    x = torch.randn(1, T, Q, G, Q, 2 * G + 1, dtype=torch.float64, requires_grad=True)
    net = NondeterministicStack(Q, G, window=D, mode="ns", bottom="extended")
    w = torch.rand(1, T + 1, G, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda z: (net(z).reading * w).sum() + net(z).log_norm.sum(),
                                    (x,))


def test_minus_infinity_actions_give_finite_gradients_and_zero_where_no_run_passes():
    """Actions of weight 0 (−inf) everywhere but two pushes: the chart is −inf almost
    everywhere; the gradient is finite, and zero for the state no run reaches."""
    B, T, Q, G = 1, 12, 2, 3
    la = torch.full((B, T, Q, G, Q, 2 * G + 1), float("-inf"), dtype=torch.float64)
    la[..., 0, 0, 0, 1] = 0.0                                  # q0, ⊥: push symbol 1
    la[..., 0, 1, 0, 1] = 0.0                                  # q0, 1: push 1
    la.requires_grad_()
    res = NondeterministicStack(Q, G, window=4, bottom="extended")(la)
    res.log_norm[:, -1].sum().backward()
    assert torch.isfinite(res.log_norm).all()
    assert torch.isfinite(la.grad).all()
    assert la.grad[..., 1, :, :, :].abs().sum() == 0           # state 1 is never reached


@pytest.mark.parametrize("before", [False, True])
def test_the_denormal_mode_is_restored(before):
    assert torch.set_flush_denormal(before)
    try:
        x = torch.randn(1, 6, 2, 3, 2, 7, requires_grad=True)
        res = NondeterministicStack(2, 3, window=3, bottom="extended")(x)
        res.log_norm.sum().backward()
        tiny = torch.full((1,), 1e-40, dtype=torch.float32) * 1.0
        assert (tiny.item() == 0.0) == before
        with flush_denormals():
            assert (torch.full((1,), 1e-40) * 1.0).item() == 0.0
        assert ((torch.full((1,), 1e-40) * 1.0).item() == 0.0) == before
    finally:
        torch.set_flush_denormal(False)


def test_a_long_string_in_float64_against_lang_and_a_central_difference(ns_checks):
    """T = 400: the chart equals Lang's algorithm with the same window and the gradient a
    central difference along a random direction (float64 reaches no denormals here, so the
    flushed mode changes nothing)."""
    rng = np.random.default_rng(0)
    B, T, Q, G, D = 1, 400, 2, 2, 6
    la = torch.tensor(rng.normal(size=(B, T, Q, G, Q, 2 * G + 1)), requires_grad=True)
    ns_checks(NondeterministicStack(Q, G, window=D, bottom="extended"), la, D,
              lambda r: r.log_norm[:, -1].sum() + r.reading[:, ::7].sum(), rng)


def test_without_gradients_two_segments_take_turns_and_the_chart_is_the_same():
    """T = 300 spans 5 segments of 64 steps: the forward without gradients (two band buffers
    taking turns, each restarted from zeros) gives the chart of the forward that keeps every
    segment, and holds a fixed number of chart entries whatever T."""
    rng = np.random.default_rng(3)
    Q, G, D = 2, 3, 5
    net = NondeterministicStack(Q, G, window=D, bottom="extended")
    la = torch.tensor(rng.normal(size=(2, 300, Q, G, Q, 2 * G + 1)))
    kept = net(la.clone().requires_grad_())
    with torch.no_grad():
        light = net(la)
    assert torch.equal(kept.log_alpha.detach(), light.log_alpha)
    assert torch.equal(kept.reading.detach(), light.reading)
    with torch.no_grad():
        sizes = [net(torch.zeros(1, T, Q, G, Q, 2 * G + 1)).stored for T in (200, 400, 800)]
    v = Q * G                                                  # v's: (T + 1 + D)·B·QG
    assert sizes[1] - sizes[0] == 200 * v and sizes[2] - sizes[1] == 400 * v
    assert kept.stored > 2 * light.stored                      # 5 segments against 2


def test_float32_with_flushed_denormals_stays_within_the_float32_tolerance():
    """T = 300, float32: the windowed chart (computed with denormals flushed) against Lang's
    algorithm in float64 with the same window: finite exactly where Lang's is (the bottom level,
    here up to 94 nats below the other entries of its step, has its own shift) and within
    float32 rounding elsewhere."""
    from pdanet.automata.weighted import lang_log_batch

    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 300, 2, 3, 2, 7))
    got = NondeterministicStack(2, 3, window=6, bottom="extended")(torch.tensor(x, dtype=torch.float32))
    ref = lang_log_batch(x, 0, 6)
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(got.log_alpha.numpy()), finite)
    assert np.allclose(got.log_alpha.numpy()[finite], ref[finite], rtol=1e-6, atol=1e-3)


# ---- the paper's bottom semantics (the default) ------------------------------------------------


@pytest.mark.parametrize("D", [1, 2, 3, 5])
@pytest.mark.parametrize("Q,G", [(1, 2), (2, 2)])
def test_paper_windows_equal_the_literal_windowed_equations(Q, G, D):
    """T = 16 (several windows): log α, reading, log Σα and gradients of the windowed stack
    (paper convention with RNS and NS+U reading, "reachable" with RNS reading, −inf entries)
    equal `reference_ns` with the same D, computed cell by cell."""
    rng = np.random.default_rng(10 * D + Q)
    T = 16
    la = rng.normal(size=(2, T, Q, G, Q, 2 * G + 1))
    la[rng.random(la.shape) < 0.2] = -np.inf
    for mode, bottom in (("rns", "paper"), ("ns", "paper"), ("rns", "reachable")):
        x = torch.tensor(la, requires_grad=True)
        y = torch.tensor(la, requires_grad=True)
        got = NondeterministicStack(Q, G, mode=mode, window=D, bottom=bottom)(x)
        ref = reference_ns(y, window=D, mode=mode, bottom=bottom)
        fin = torch.isfinite(ref["log_norm"])
        assert torch.equal(torch.isfinite(got.log_norm), fin)
        assert torch.allclose(got.reading, ref["reading"], rtol=1e-9, atol=1e-12)
        assert torch.allclose(got.log_norm[fin], ref["log_norm"][fin], rtol=1e-9, atol=1e-9)
        w = torch.tensor(rng.random(tuple(got.reading.shape)))
        loss = lambda r, ln, w=w, fin=fin: (r * w).sum() + torch.where(fin, ln, 0.0).sum()
        loss(got.reading, got.log_norm).backward()
        loss(ref["reading"], ref["log_norm"]).backward()
        assert torch.allclose(x.grad, y.grad, rtol=1e-8, atol=1e-10)


def test_paper_without_gradients_two_segments_take_turns():
    """T = 300 (5 band segments): the forward without gradients equals the one that keeps
    every segment, and its gradient a central difference."""
    rng = np.random.default_rng(5)
    Q, G, D = 2, 3, 5
    net = NondeterministicStack(Q, G, window=D)
    la = torch.tensor(rng.normal(size=(2, 300, Q, G, Q, 2 * G + 1)))
    x = la.clone().requires_grad_()
    kept = net(x)
    with torch.no_grad():
        light = net(la)
    assert torch.equal(kept.log_alpha.detach(), light.log_alpha)
    loss = lambda r: r.log_norm[:, -1].sum() + r.reading[:, ::5].sum()
    loss(kept).backward()
    v = torch.tensor(rng.normal(size=la.shape))
    with torch.no_grad():
        fd = (loss(net(la + 1e-6 * v)) - loss(net(la - 1e-6 * v))) / 2e-6
    assert torch.isclose((x.grad * v).sum(), fd, rtol=1e-6)


# ---- the paper's equations in linear scale (one frame per window) ------------------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 2), st.integers(2, 3), st.integers(1, 6), st.integers(0, 9),
       st.sampled_from(["paper", "reachable"]), st.integers(0, 2 ** 31 - 1))
def test_paper_windows_equal_the_literal_equations_to_1e12(Q, G, D, T, bottom, seed):
    """Random sizes, windows and lengths (T = 0 included), actions with −inf entries: log α,
    reading, log Σα and their gradients of the windowed stack equal `reference_ns` computed cell
    by cell in float64 to 1e-12 (relative where the values are large)."""
    rng = np.random.default_rng(seed)
    la = 2 * rng.normal(size=(2, T, Q, G, Q, 2 * G + 1))
    la[rng.random(la.shape) < 0.3] = -np.inf
    x = torch.tensor(la, requires_grad=True)
    y = torch.tensor(la, requires_grad=True)
    got = NondeterministicStack(Q, G, window=D, bottom=bottom)(x)
    ref = reference_ns(y, window=D, bottom=bottom)
    fin = torch.isfinite(ref["log_norm"])
    assert torch.equal(torch.isfinite(got.log_norm), fin)
    assert torch.equal(torch.isfinite(got.log_alpha), ref["alpha"] > 0)
    assert torch.allclose(got.reading, ref["reading"], rtol=1e-12, atol=1e-12)
    assert torch.allclose(got.log_norm[fin], ref["log_norm"][fin], rtol=1e-12, atol=1e-12)
    if T:                                           # (T = 0: nothing depends on the actions)
        w = torch.tensor(rng.random(tuple(got.reading.shape)))
        ((got.reading * w).sum() + torch.where(fin, got.log_norm, 0.0).sum()).backward()
        ((ref["reading"] * w).sum() + torch.where(fin, ref["log_norm"], 0.0).sum()).backward()
        assert torch.allclose(x.grad, y.grad, rtol=1e-12, atol=1e-12)
    with torch.no_grad():
        light = NondeterministicStack(Q, G, window=D, bottom=bottom)(x.detach())
    assert torch.equal(light.log_alpha, got.log_alpha.detach())


def test_paper_float32_long_string_against_float64():
    """T = 300, D = 10, log actions of spread 6 (α falls and rises by many nats within a
    window): float32 (the window rescaled to a largest entry of 1 every step, denormals
    flushed) is finite exactly where float64 is and within float32 rounding of it."""
    rng = np.random.default_rng(6)
    la = 6 * rng.normal(size=(2, 300, 2, 3, 2, 7))
    net = NondeterministicStack(2, 3, window=10)
    with torch.no_grad():
        lo = net(torch.tensor(la, dtype=torch.float32))
        hi = net(torch.tensor(la))
    fin = torch.isfinite(hi.log_alpha)
    assert torch.equal(torch.isfinite(lo.log_alpha), fin)
    assert torch.allclose(lo.log_alpha[fin].double(), hi.log_alpha[fin], rtol=1e-5, atol=2e-2)
    assert torch.allclose(lo.reading.double(), hi.reading, atol=1e-4)


def test_paper_all_zero_columns_give_minus_infinity_not_nan():
    """Only a push of symbol 1 from (q0, ⊥) at step 1, nothing after: every later column of
    the chart is zero (its scale is the floor, the smallest normal number); log α is −inf from
    step 2 on, with finite gradients and no NaN."""
    T, Q, G = 6, 2, 3
    la = torch.full((1, T, Q, G, Q, 2 * G + 1), float("-inf"), dtype=torch.float64)
    la[0, 0, 0, 0, 0, 1] = 0.0
    la.requires_grad_()
    res = NondeterministicStack(Q, G, window=3)(la)
    assert not torch.isnan(res.log_alpha).any()
    assert torch.isfinite(res.log_alpha[0, 1, 0, 1])
    assert torch.isinf(res.log_alpha[0, 2:]).all()
    res.log_norm[:, 1].sum().backward()
    assert torch.isfinite(la.grad).all()
