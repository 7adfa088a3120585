"""The NS-RNN stack module against Lang's algorithm and brute force (float64)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from pdanet.automata import BOTTOM
from pdanet.automata import semiring as S
from pdanet.automata.weighted import WeightedPDA, lang_log_batch, valid_ops_mask
from pdanet.constructions.stacks.ns import VARIANTS, NondeterministicStack
from pdanet.constructions.stacks.reference_ns import action_weights, reference_ns
from pdanet.errors import InputError


def random_wpda(rng, Q, m, density=0.6):
    G = m + 1
    stack = tuple("abcdef"[:m])
    sym = lambda j: BOTTOM if j == 0 else stack[j - 1]
    valid = valid_ops_mask(G)
    trans = {}
    for a in "xy":
        for q in range(Q):
            for x in range(G):
                for r in range(Q):
                    for o in range(2 * G + 1):
                        if valid[x, o] and rng.random() < density:
                            op, y = ("pop", None) if o == 2 * G else \
                                ("replace", sym(o - G)) if o >= G else ("push", sym(o))
                            trans[(q, sym(x), a, r, op, y)] = float(rng.uniform(0.2, 2.0))
    return WeightedPDA(range(Q), "xy", stack, trans, 0)


@pytest.mark.parametrize("window", [None, 1, 2, 4])
@pytest.mark.parametrize("Q,m", [(1, 1), (2, 2), (3, 2)])
def test_module_equals_lang_and_brute_force(Q, m, window):
    rng = np.random.default_rng(Q * 10 + m)
    M = random_wpda(rng, Q, m)
    W = torch.tensor(M.weight_tensor(S.LOG))
    strings = ["".join(rng.choice(list("xy"), n)) for n in (0, 1, 3, 6)]
    for s in strings:
        ids = M.alphabet.encode(s)
        res = NondeterministicStack(Q, m + 1, window=window, bottom="extended")(W[ids][None])
        got = torch.exp(res.log_alpha[0]).numpy()
        assert np.allclose(got, M.chart(s, S.REAL, window).alpha, rtol=1e-9, atol=1e-12)
        if len(s) <= 6:
            assert np.allclose(got, M.brute_force(s, S.REAL, window), rtol=1e-9, atol=1e-12)
        assert np.allclose(res.reading[0].numpy(), M.reading(s, window=window), atol=1e-12)


def test_batch_ns_mode_and_gradients():
    torch.manual_seed(3)
    B, T, Q, G = 3, 7, 2, 3
    la = torch.randn(B, T, Q, G, Q, 2 * G + 1, dtype=torch.float64, requires_grad=True)
    rns = NondeterministicStack(Q, G, bottom="extended")(la)
    ns = NondeterministicStack(Q, G, mode="ns", bottom="extended")(la)
    assert torch.allclose(ns.reading, rns.reading.sum(2))
    assert torch.allclose(rns.reading.sum((2, 3)), torch.ones(B, T + 1, dtype=torch.float64))
    # each batch row alone gives the same answer
    one = NondeterministicStack(Q, G, bottom="extended")(la[1:2])
    assert torch.allclose(one.log_alpha, rns.log_alpha[1:2])
    f = lambda x: NondeterministicStack(Q, G, window=3, bottom="extended")(x).log_norm[:, -1].sum()
    assert torch.autograd.gradcheck(f, (la[:1, :5].detach().clone().requires_grad_(),))
    rns.log_norm[:, -1].sum().backward()
    assert torch.isfinite(la.grad).all()


def test_windowed_equals_unlimited_when_window_covers_length_and_state_is_linear():
    T, Q, G = 12, 2, 3
    la = torch.randn(2, T, Q, G, Q, 2 * G + 1, dtype=torch.float64)
    full = NondeterministicStack(Q, G, bottom="extended")(la)
    same = NondeterministicStack(Q, G, window=T, bottom="extended")(la)
    assert torch.allclose(full.log_alpha, same.log_alpha)
    small = NondeterministicStack(Q, G, window=3, bottom="extended")(la)
    assert not torch.allclose(full.log_alpha, small.log_alpha)
    sizes = {}
    for T2 in (16, 32, 64):
        x = torch.randn(1, T2, Q, G, Q, 2 * G + 1)
        sizes[T2] = NondeterministicStack(Q, G, window=4, bottom="extended")(x).stored
    assert sizes[64] - sizes[32] == 2 * (sizes[32] - sizes[16])   # linear in T
    full_sizes = [NondeterministicStack(Q, G, bottom="extended")(torch.randn(1, n, Q, G, Q, 2 * G + 1)).stored
                  for n in (8, 16)]
    assert full_sizes[1] > 3 * full_sizes[0]                      # quadratic without a window


@pytest.mark.parametrize("window", [None, 4])
@pytest.mark.parametrize("Q,G,T", [(1, 2, 11), (2, 2, 7)])
def test_gradcheck_including_the_pop_term_and_the_window(Q, G, T, window):
    torch.manual_seed(Q * 100 + T)
    x = torch.randn(1, T, Q, G, Q, 2 * G + 1, dtype=torch.float64, requires_grad=True)
    net = NondeterministicStack(Q, G, window=window, bottom="extended")
    w = torch.rand(1, T + 1, Q, G, dtype=torch.float64)

    def f(z):
        res = net(z)
        return res.log_norm[:, -1].sum() + (res.reading * w).sum()

    assert torch.autograd.gradcheck(f, (x,))


@pytest.mark.parametrize("window", [None, 7])
def test_long_batch_against_lang_and_a_directional_derivative(window, ns_checks):
    """T = 60 (the split pop block, the window ring) against `lang_log_batch`; the gradient
    against a central difference along a random direction."""
    rng = np.random.default_rng(5)
    B, T, Q, G = 2, 60, 2, 3
    la = torch.tensor(rng.normal(size=(B, T, Q, G, Q, 2 * G + 1)), requires_grad=True)
    net = NondeterministicStack(Q, G, window=window, bottom="extended")
    w = torch.tensor(rng.random((B, T + 1, Q, G)))
    loss = lambda r: r.log_norm.sum() + (r.reading * w).sum()
    ns_checks(net, la, window, loss, rng)
    # a second backward through the same graph gives the same gradient (the tape is re-read)
    g1 = la.grad.clone()
    la.grad = None
    res2 = net(la)
    loss(res2).backward(retain_graph=True)
    la.grad = None
    loss(res2).backward()
    assert torch.allclose(la.grad, g1)


def test_float32_flushes_only_what_it_must():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 40, 2, 3, 2, 7))
    got = NondeterministicStack(2, 3, bottom="extended")(torch.tensor(x, dtype=torch.float32))
    ref = lang_log_batch(x, 0)
    assert np.allclose(got.log_alpha.numpy(), ref, rtol=1e-4, atol=1e-3)


def test_bad_actions_are_typed_errors():
    net = NondeterministicStack(2, 3, bottom="extended")
    with pytest.raises(InputError, match="expected"):
        net(torch.zeros(1, 4, 2, 3, 2, 6))
    with pytest.raises(InputError, match="tensor"):
        net(torch.zeros(4, 2, 3, 2, 7))
    bad = torch.zeros(1, 4, 2, 3, 2, 7)
    bad[0, 0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(InputError, match="NaN"):
        net(bad)
    with pytest.raises(InputError):
        NondeterministicStack(2, 3, window=0, bottom="extended")
    with pytest.raises(InputError, match="floating"):
        net(torch.zeros(1, 4, 2, 3, 2, 7, dtype=torch.int64))


def _span(x: torch.Tensor) -> int:
    """Elements from the first to the last one a (strided) tensor can touch."""
    return 0 if x.numel() == 0 else 1 + sum((n - 1) * abs(s) for n, s in zip(x.shape, x.stride()))


class _OpLog(TorchDispatchMode):
    """Records, for every aten op run, the largest span among its tensor inputs and outputs
    (0 for view ops, which touch no elements)."""

    def __init__(self):
        super().__init__()
        self.spans: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat = [a for a in tree_flatten((args, kwargs, out))[0] if isinstance(a, torch.Tensor)]
        self.spans.append(0 if func.is_view else max(map(_span, flat), default=0))
        return out


def test_windowed_step_work_and_memory_do_not_grow_with_length():
    """Every aten op of a windowed forward+backward, logged at T = 128, 256, 384 (2, 4, 6 band
    segments of 64 steps): the number of ops and the number of saved elements grow by the same
    amount per added step, and the ops whose operands span 2·T·B·(QG)² or more elements (the
    once-per-call ones, such as the actions in and the outputs out; a band segment is smaller)
    are as many at every T, so no step reads or writes memory whose extent grows with T."""
    B, Q, G, D = 2, 1, 2, 3
    net = NondeterministicStack(Q, G, window=D, bottom="extended")
    ops, big, saved = {}, {}, {}
    for T in (128, 256, 384):
        x = torch.randn(B, T, Q, G, Q, 2 * G + 1, dtype=torch.float64, requires_grad=True)
        sizes: list[int] = []

        def pack(t: torch.Tensor, sizes=sizes) -> torch.Tensor:
            sizes.append(t.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _OpLog() as log:
            res = net(x)
            (res.log_norm.sum() + res.reading.sum()).backward()
        ops[T], saved[T] = len(log.spans), sum(sizes)
        big[T] = sum(s >= 2 * T * B * (Q * G) ** 2 for s in log.spans)
    assert ops[384] - ops[256] == ops[256] - ops[128] > 0
    assert saved[384] - saved[256] == saved[256] - saved[128] > 0
    assert big[128] == big[256] == big[384]


# ---- the paper's bottom semantics (the default) ------------------------------------------------


def brute_force_paper(delta: np.ndarray, start: int, window, reachable: bool = False):
    """α of the paper's equations by enumerating runs (one batch row, Δ (T, Q, G, Q, 2G+1)):
    the stack is a tuple of (symbol, push time) over the initial (⊥, 0), which is never the top
    after time 0 nor popped; push any y, replace or pop the top unless that exposes or changes
    the initial ⊥ (pop needs two symbols above it); with a window D, the top at time t must have
    been pushed at p with t − p < D. ``reachable``: the initial ⊥ may be replaced and popped
    back to (it stands above a bottom that is never the top)."""
    T, Q, G = delta.shape[:3]
    configs = {(start, ((-1, 0), (0, 0)) if reachable else ((0, 0),)): 1.0}
    alpha = np.zeros((T + 1, Q, G))
    alpha[0, start, 0] = 1.0
    for t in range(1, T + 1):
        nxt: dict = {}
        for (q, stack), w in configs.items():
            x = stack[-1][0]
            assert x >= 0
            for r in range(Q):
                moves = [stack + ((y, t),) for y in range(G)]                 # push
                if len(stack) >= 2:
                    moves += [stack[:-1] + ((y, stack[-1][1]),) for y in range(G)]
                else:
                    moves += [None] * G
                moves.append(stack[:-1] if len(stack) >= 3 else None)       # pop
                for o, new in enumerate(moves):
                    wt = w * delta[t - 1, q, x, r, o]
                    if new is None or wt == 0:
                        continue
                    if window is not None and t - new[-1][1] >= window:
                        continue
                    nxt[r, new] = nxt.get((r, new), 0.0) + wt
        configs = nxt
        for (r, stack), w in configs.items():
            alpha[t, r, stack[-1][0]] += w
    return alpha


@st.composite
def paper_case(draw):
    Q = draw(st.integers(1, 2))
    G = draw(st.integers(2, 3))
    T = draw(st.integers(0, 5 if Q * G <= 3 else 4))
    seed = draw(st.integers(0, 2 ** 16))
    window = draw(st.sampled_from([None, 1, 2, 3, 4]))
    variant = draw(st.sampled_from(sorted(VARIANTS)))
    bottom = draw(st.sampled_from(["paper", "reachable"]))
    zeros = draw(st.sampled_from([0.0, 0.3]))
    rng = np.random.default_rng(seed)
    la = rng.normal(size=(2, T, Q, G, Q, 2 * G + 1))
    la[rng.random(la.shape) < zeros] = -np.inf                     # weight-0 actions
    return Q, G, T, window, variant, bottom, torch.tensor(la), rng


@settings(max_examples=30, deadline=None)
@given(paper_case())
def test_paper_semantics_equal_brute_force_and_the_literal_equations(case):
    """Random actions (with −inf entries), every variant and window: α equals the enumeration of
    runs, and the module's α, reading, log Σα and their gradients equal `reference_ns`."""
    Q, G, T, window, variant, bottom, la, rng = case
    net = NondeterministicStack.variant(variant, Q, G, window=window, bottom=bottom)
    x = la.clone().requires_grad_()
    got = net(x)
    y = la.clone().requires_grad_()
    ref = reference_ns(y, window=window, mode=net.mode, normalize=net.normalize, bottom=bottom)
    delta = action_weights(la, net.normalize).numpy()
    for b in range(la.shape[0]):
        assert np.allclose(ref["alpha"][b].detach().numpy(),
                           brute_force_paper(delta[b], 0, window, bottom == "reachable"),
                           rtol=1e-10, atol=1e-300)
    assert np.allclose(torch.exp(got.log_alpha).detach().numpy(), ref["alpha"].detach().numpy(),
                       rtol=1e-9, atol=0)
    assert torch.allclose(got.reading, ref["reading"], rtol=1e-9, atol=1e-12)
    assert torch.equal(torch.isfinite(got.log_norm), torch.isfinite(ref["log_norm"]))
    fin = torch.isfinite(ref["log_norm"])
    assert torch.allclose(got.log_norm[fin], ref["log_norm"][fin], rtol=1e-9, atol=1e-9)
    if T == 0:                                                   # nothing to differentiate
        return
    w = torch.tensor(rng.random(tuple(got.reading.shape)))
    loss = lambda r, ln: (r * w).sum() + torch.where(fin, ln, 0.0).sum()
    loss(got.reading, got.log_norm).backward()
    loss(ref["reading"], ref["log_norm"]).backward()
    assert torch.isfinite(x.grad).all()
    assert torch.allclose(x.grad, y.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("window", [None, 3])
def test_paper_gradcheck(window):
    torch.manual_seed(7)
    Q, G, T = 2, 2, 5
    x = torch.randn(1, T, Q, G, Q, 2 * G + 1, dtype=torch.float64, requires_grad=True)
    net = NondeterministicStack(Q, G, window=window)
    w = torch.rand(1, T + 1, Q, G, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda z: (net(z).reading * w).sum()
                                    + net(z).log_norm[:, -1].sum(), (x,))


def test_paper_and_extended_differ_and_step_one_only_pushes():
    """The two conventions read differently on the same random actions; under the paper's,
    step 1 pushes (replace and pop entries of step 1 change nothing) and a run that pops the one
    symbol above the initial ⊥ dies."""
    rng = np.random.default_rng(0)
    Q, G, T = 2, 3, 8
    la = torch.tensor(rng.normal(size=(4, T, Q, G, Q, 2 * G + 1)))
    paper = NondeterministicStack(Q, G)(la)
    ext = NondeterministicStack(Q, G, bottom="extended")(la)
    assert (paper.reading - ext.reading).abs().max() > 0.05
    la2 = la.clone()
    la2[:, 0, :, :, :, G:] = torch.tensor(rng.normal(size=(4, Q, G, Q, G + 1)))
    assert torch.allclose(NondeterministicStack(Q, G)(la2).log_alpha, paper.log_alpha)
    only = torch.full((1, 2, 1, 2, 1, 5), float("-inf"), dtype=torch.float64)
    only[0, 0, 0, 0, 0, 1] = 0.0                                  # push a on ⊥
    only[0, 1, 0, 1, 0, 4] = 0.0                                  # then pop a
    dead = NondeterministicStack(1, 2)(only)
    assert dead.log_norm[0, 2] == float("-inf") and torch.equal(dead.reading[0, 2],
                                                                  torch.zeros(1, 2,
                                                                              dtype=torch.float64))
    alive = NondeterministicStack(1, 2, bottom="extended")(only)
    assert alive.reading[0, 2, 0, 0] == 1.0                       # extended: back at ⊥


def test_windowed_paper_equals_unlimited_when_the_window_covers_the_string():
    rng = np.random.default_rng(4)
    Q, G, T = 2, 3, 9
    la = torch.tensor(rng.normal(size=(2, T, Q, G, Q, 2 * G + 1)))
    full = NondeterministicStack(Q, G)(la)
    assert torch.allclose(NondeterministicStack(Q, G, window=T)(la).log_alpha, full.log_alpha)
    assert not torch.allclose(NondeterministicStack(Q, G, window=3)(la).log_alpha,
                              full.log_alpha)


def test_paper_long_float32_against_float64():
    """T = 200, float32, windowed and unlimited (T = 60): the paper's chart within float32
    rounding of the float64 one (which equals the reference on short strings above)."""
    rng = np.random.default_rng(9)
    for T, D in ((200, 6), (60, None)):
        x = rng.normal(size=(2, T, 2, 3, 2, 7))
        lo = NondeterministicStack(2, 3, window=D)(torch.tensor(x, dtype=torch.float32))
        hi = NondeterministicStack(2, 3, window=D)(torch.tensor(x))
        assert torch.allclose(lo.reading.double(), hi.reading, atol=2e-5)
        assert torch.allclose(lo.log_norm.double(), hi.log_norm, rtol=1e-5, atol=1e-3)


def test_bad_options_are_typed_errors():
    with pytest.raises(InputError, match="bottom"):
        NondeterministicStack(2, 3, bottom="none")
    with pytest.raises(InputError, match="normalize"):
        NondeterministicStack(2, 3, normalize=1)
    with pytest.raises(InputError, match="variant"):
        NondeterministicStack.variant("ns+x", 2, 3)
    with pytest.raises(InputError, match="shape"):
        reference_ns(torch.zeros(1, 2, 2, 3, 2, 6))
    with pytest.raises(InputError, match="window"):
        reference_ns(torch.zeros(1, 2, 2, 3, 2, 7), window=0)
    with pytest.raises(InputError, match="start"):
        reference_ns(torch.zeros(1, 2, 2, 3, 2, 7), start=2)
