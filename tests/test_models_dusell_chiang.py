"""DuSell & Chiang's LSTM + nondeterministic stack (`pdanet.models.dusell_chiang`): the module
against a literal reimplementation of its equations, the compiled networks against the machine."""

import numpy as np
import pytest
import strategies
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.weighted import WeightedPDA
from pdanet.constructions.stacks.ns import NondeterministicStack, NSState
from pdanet.constructions.stacks.reference_ns import reference_ns
from pdanet.errors import CompileError, InputError
from pdanet.models import dusell_chiang as dc

COMPILERS = {"ns": dc.compile_dusell_chiang_ns, "ns_s": dc.compile_dusell_chiang_ns_s,
             "ns_u": dc.compile_dusell_chiang_ns_u, "rns": dc.compile_dusell_chiang_rns}
VARIANTS = ("ns", "ns+s", "ns+u", "rns")
FAST = {"samples": 5, "long_samples": 0}


# --- the module against its equations ---------------------------------------------------------
def literal(module: dc.DuSellChiangRNN, ids: torch.Tensor):
    """The model's equations written out: an LSTM cell by its gate formulas, Eq. 1 (or exp)
    and Eqs. 2–5 by `reference_ns` (cell by cell) on the actions so far, at every step."""
    B, T = ids.shape
    K, H = module.num_symbols, module.hidden
    mode, norm = {"ns": ("ns", True), "ns+s": ("rns", True), "ns+u": ("ns", False),
                  "rns": ("rns", False)}[module.variant]
    Q, N = module.num_states, module.num_stack
    cell = module.cell
    h = torch.zeros(B, H, dtype=torch.float64)
    c = torch.zeros(B, H, dtype=torch.float64)
    r = torch.zeros(B, Q, N, dtype=torch.float64)
    r[:, module.start, 0] = 1
    r = r.sum(1) if mode == "ns" else r.reshape(B, -1)
    hs, rs, ys, acts = [h], [r], [module.out.weight @ h.T + module.out.bias[:, None]], []
    for t in range(T):
        x = torch.zeros(B, K, dtype=torch.float64)
        for b in range(B):
            if ids[b, t] >= 0:
                x[b, ids[b, t]] = 1
        z = torch.cat([x, r], 1) @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T \
            + cell.bias_hh
        i, f, g, o = (z[:, k * H:(k + 1) * H] for k in range(4))
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        acts.append((h @ module.actions.weight.T + module.actions.bias)
                    .view(B, Q, N, Q, 2 * N + 1))
        ref = reference_ns(torch.stack(acts, 1), start=module.start, window=module.window,
                           mode=mode, normalize=norm)
        r = ref["reading"][:, -1].reshape(B, -1)
        hs.append(h)
        rs.append(r)
        ys.append(module.out.weight @ h.T + module.out.bias[:, None])
    return (torch.stack(hs, 1), torch.stack(rs, 1), torch.stack([y.T for y in ys], 1),
            ref["log_norm"] if T else None)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("window", [None, 2])
def test_module_equals_literal_equations(variant, window):
    torch.manual_seed(hash((variant, window)) % 1000)
    m = dc.DuSellChiangRNN(3, 2, 3, variant, hidden=4, num_outputs=2, window=window).double()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(3)                                  # actions far from uniform
    ids = torch.tensor([[0, 2, 1, 0], [1, 2, 0, -1]])
    run = m.run(ids)
    h, r, y, log_norm = literal(m, ids)
    for got, exp in ((run.h, h), (run.reading, r), (run.logits, y)):
        assert torch.allclose(got, exp, rtol=1e-9, atol=1e-12)
    assert torch.allclose(run.log_norm, log_norm, rtol=1e-9, atol=1e-9)
    wr, wy = torch.randn_like(r), torch.randn_like(y)
    params = list(m.parameters())
    g1 = torch.autograd.grad((run.reading * wr).sum() + (run.logits * wy).sum(), params)
    g2 = torch.autograd.grad((r * wr).sum() + (y * wy).sum(), params)
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("variant", VARIANTS)
def test_inference_chart_equals_autograd_path(variant):
    """Runs with and without autograd give the same numbers."""
    torch.manual_seed(3)
    m = dc.DuSellChiangRNN(3, 2, 3, variant, hidden=5, num_outputs=2).double()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(3)
    ids = torch.randint(-1, 3, (4, 9))
    if variant == "rns":                      # long enough for the chart's row pieces
        m = dc.DuSellChiangRNN(2, 1, 2, variant, hidden=3, num_outputs=1).double()
        ids = torch.randint(0, 2, (2, 52))
    a = m.run(ids)
    with torch.no_grad():
        b = m.run(ids)
    for x, y in ((a.reading, b.reading), (a.logits, b.logits), (a.log_norm, b.log_norm)):
        assert torch.allclose(x, y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_random_initialisation_is_finite_and_trainable(variant):
    torch.manual_seed(1)
    m = dc.DuSellChiangRNN(4, 2, 3, variant, hidden=20, num_outputs=5)
    ids = torch.randint(0, 4, (3, 12))
    states, logits = m(ids)
    assert states.shape == (3, 13, 20 + m.reading_size) and logits.shape == (3, 13, 5)
    assert torch.isfinite(states).all() and torch.isfinite(logits).all()
    reading = states[..., 20:]
    assert torch.allclose(reading.sum(-1), torch.ones(3, 13))      # a distribution (Eq. 5)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 5), ids.reshape(-1))
    loss.backward()
    grads = [p.grad for p in m.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in (m.cell.weight_ih.grad, m.actions.weight.grad))
    assert m.actions.weight.grad.abs().sum() > 0                   # the stack passes gradient


def test_module_bad_input():
    with pytest.raises(InputError, match="variant"):
        dc.DuSellChiangRNN(2, 1, 2, "nss")
    with pytest.raises(InputError, match="num_stack"):
        dc.DuSellChiangRNN(2, 1, 1)
    with pytest.raises(InputError, match="window"):
        dc.DuSellChiangRNN(2, 1, 2, window=0)
    with pytest.raises(InputError, match="start"):
        dc.DuSellChiangRNN(2, 1, 2, start=1)
    m = dc.DuSellChiangRNN(2, 1, 2)
    with pytest.raises(InputError, match="batch, time"):
        m(torch.tensor([0, 1]))
    with pytest.raises(InputError, match="outside"):
        m(torch.tensor([[0, 2]]))
    with pytest.raises(InputError, match="integer"):
        m(torch.tensor([[0.0]]))


# --- compiled networks --------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(sorted(COMPILERS)))
def test_random_dpda_verifies(machine, variant):
    net = COMPILERS[variant](machine)
    report = pn.verify(machine, net, max_length=5, **FAST)
    assert report.ok, report
    assert set(report.fields) >= {"state", "top", "output"}


@settings(max_examples=10, deadline=None)
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(sorted(COMPILERS)))
def test_compiled_readings_are_exactly_one_hot(machine, variant):
    """Every action but the machine's move underflows to exactly 0 in float32: one run, a
    one-hot reading, the move's weight exactly 1 (after Eq. 1) on live prefixes."""
    net = COMPILERS[variant](machine)
    K = len(machine.alphabet)
    rng = np.random.default_rng(0)
    ids = torch.as_tensor(rng.integers(0, K, (20, 6)))
    trace = machine.run_batch(ids.numpy(), np.full(20, 6))
    run = net.module.run(ids)
    live = trace.fields["state"] >= 0
    rd = run.reading.detach().numpy()
    assert np.all((rd[live] == 0) | (rd[live] == 1))
    assert np.all(rd[live].sum(-1) == 1)


@pytest.mark.parametrize("variant", sorted(COMPILERS))
@pytest.mark.parametrize("task", ["dyck2", "marked_reversal"])
def test_paper_tasks_verify(variant, task):
    machine = pn.tasks.get(task)
    net = COMPILERS[variant](machine)
    report = pn.verify(machine, net, max_length=5, samples=5, long_samples=1, long_length=30)
    assert report.ok, report


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_example_and_dfa(dtype):
    for variant, f in COMPILERS.items():
        assert getattr(dc, f"requires_dusell_chiang_{variant}")(dc.EXAMPLE_DUSELL_CHIANG_RNS) is None
        net = f(dc.EXAMPLE_DUSELL_CHIANG_RNS, dtype=dtype)
        assert net.dtype == dtype
        assert pn.verify(dc.EXAMPLE_DUSELL_CHIANG_RNS, net, max_length=5, **FAST).ok
    parity = DFA(states=[0, 1], alphabet="ab", transitions={(0, "a"): 1, (1, "a"): 0,
                                                            (0, "b"): 0, (1, "b"): 1},
                 start=0, accepting={0})
    for f in COMPILERS.values():
        assert pn.verify(parity, f(parity, dtype=dtype), max_length=6, **FAST).ok


def test_verify_catches_a_wrong_network():
    machine = dc.EXAMPLE_DUSELL_CHIANG_RNS
    net = dc.compile_dusell_chiang_rns(machine)
    with torch.no_grad():
        net.module.out.bias.neg_()                     # the verdict of the empty string flips
    assert not pn.verify(machine, net, max_length=3, **FAST).ok
    net = dc.compile_dusell_chiang_ns(machine)
    with torch.no_grad():
        w = net.module.actions.weight
        w.copy_(w[torch.randperm(w.shape[0], generator=torch.Generator().manual_seed(0))])
    assert not pn.verify(machine, net, max_length=4, **FAST).ok


@pytest.mark.parametrize("variant", sorted(COMPILERS))
def test_window(variant):
    machine = dc.EXAMPLE_DUSELL_CHIANG_RNS
    net = COMPILERS[variant](machine, window=4)
    assert net.module.window == 4 and "4" in net.info["exact_for"]
    assert pn.verify(machine, net, max_length=4, samples=0, long_samples=0).ok   # to length D
    full = COMPILERS[variant](machine)
    ids = torch.tensor([[0, 1, 0, 2, 0, 1, 0]])                    # 010#010: the first push
    a, b = net.module.run(ids), full.module.run(ids)                # is older than D at the end
    assert torch.equal(a.reading[:, :5], b.reading[:, :5])
    assert not torch.equal(a.reading[:, -1], b.reading[:, -1])


def test_units_and_bound():
    for task in ("dyck2", "marked_reversal"):
        machine = pn.tasks.get(task)
        for f in COMPILERS.values():
            net = f(machine)
            assert net.hidden_units <= net.bound_value
            n = net.info["network_stack_symbols"]
            assert net.module.num_stack == n == 2 * len(machine.stack_alphabet) + 2
            assert net.info["parameters"] == sum(p.numel() for p in net.module.parameters())


def test_refusals():
    nd = PDA([0], "a", ["A"], {(0, "a", BOTTOM): [(0, ("A", BOTTOM)), (0, (BOTTOM,))]}, 0,
             accepting={0})
    for f in COMPILERS.values():
        with pytest.raises(CompileError, match="ns_rnn"):
            f(nd)
        with pytest.raises(CompileError, match="ns_rnn"):
            f(WeightedPDA.from_pda(nd))
    assert isinstance(dc.requires_dusell_chiang_rns(nd), CompileError)
    pdt = DPDT([0], ["0", "1"], ["0", "1"], ["0"], {(0, "0", BOTTOM): (0, "1", (BOTTOM,))}, 0)
    with pytest.raises(CompileError, match="hao_lstm"):
        dc.compile_dusell_chiang_ns(pdt)
    eps = DPDA([0, 1], "a", ["A"], {(0, "a", BOTTOM): (1, ("A", BOTTOM)),
                                   (1, pn.EPSILON, "A"): (0, ())}, 0, accepting={0})
    with pytest.raises(CompileError, match="ε"):
        dc.compile_dusell_chiang_rns(eps)
    m = dc.EXAMPLE_DUSELL_CHIANG_RNS
    with pytest.raises(InputError, match="window"):
        dc.compile_dusell_chiang_rns(m, window=0)
    with pytest.raises(InputError, match="window"):
        dc.compile_dusell_chiang_rns(m, window=True)
    with pytest.raises(InputError, match="neg"):
        dc.compile_dusell_chiang_ns(m, neg=5)


@pytest.mark.parametrize("variant", sorted(COMPILERS))
def test_compiled_network_is_a_trainable_instance(variant):
    net = COMPILERS[variant](dc.EXAMPLE_DUSELL_CHIANG_RNS)
    assert type(net.module) is dc.DuSellChiangRNN
    assert net.module.variant == dc.MODEL_VARIANTS[variant]
    run = net.module.run(torch.tensor([[0, 1, 2, 1, 0], [1, 2, 1, -1, -1]]))
    (run.logits.sum() + run.reading.sum()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in net.module.parameters())


def test_chart_memory_is_checked():
    m = dc.DuSellChiangRNN(2, 2, 4)
    with pn.limits.raised(max_bytes=10**6), torch.no_grad(), \
            pytest.raises(pn.errors.ResourceError, match="batch_size"):
        m(torch.zeros(4, 100, dtype=torch.long))


# --- the stack's step interface against its whole-sequence forward -----------------------------
def _stepped(stack: NondeterministicStack, la: torch.Tensor):
    """Readings, log α and log Σα of every step of `NondeterministicStack.step` on ``la``."""
    state = stack.initial_state(la.shape[0], la.dtype)
    rs, las, lns = [state.reading], [state.log_alpha], [state.log_norm]
    for t in range(la.shape[1]):
        state, r = stack.step(state, la[:, t])
        assert state.time == t + 1 and r is state.reading
        rs.append(r)
        las.append(state.log_alpha)
        lns.append(state.log_norm)
    return torch.stack(rs, 1), torch.stack(las, 1), torch.stack(lns, 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(Q=st.integers(1, 3), G=st.integers(2, 3), B=st.integers(1, 2), T=st.integers(0, 8),
       window=st.sampled_from([None, 1, 2, 3, 5]), bottom=st.sampled_from(
           ["paper", "reachable", "extended"]), variant=st.sampled_from(VARIANTS),
       scale=st.sampled_from([0.5, 3.0]), dead=st.booleans(), seed=st.integers(0, 10**6))
def test_stepping_equals_forward(Q, G, B, T, window, bottom, variant, scale, dead, seed):
    """`NondeterministicStack.step` step by step = its forward on all steps at once: readings,
    log α, log Σα and the gradients of all three, every bottom, with and without a window."""
    gen = torch.Generator().manual_seed(seed)
    start = int(torch.randint(0, Q, (1,), generator=gen))
    stack = NondeterministicStack.variant(variant, Q, G, window=window, bottom=bottom,
                                          start=start)
    la = torch.randn(B, T, Q, G, Q, 2 * G + 1, generator=gen, dtype=torch.float64) * scale
    if dead:                                             # some actions impossible (weight 0)
        la = la.masked_fill(torch.rand(la.shape, generator=gen) < 0.4, float("-inf"))
    la.requires_grad_()
    res = stack(la)
    r, lal, ln = _stepped(stack, la)
    assert torch.allclose(r, res.reading, rtol=1e-10, atol=1e-12)
    fin = torch.isfinite(res.log_alpha)
    assert torch.equal(fin, torch.isfinite(lal))
    assert torch.allclose(lal[fin], res.log_alpha[fin], rtol=1e-10, atol=1e-10)
    assert torch.equal(torch.isfinite(ln), torch.isfinite(res.log_norm))
    if T == 0:
        return
    wr = torch.randn(r.shape, generator=gen, dtype=torch.float64)
    wa = torch.randn(lal.shape, generator=gen, dtype=torch.float64)
    wn = torch.randn(ln.shape, generator=gen, dtype=torch.float64)

    def loss(rr, aa, nn_):
        return ((rr * wr).sum() + torch.where(fin, aa, 0.0).mul(wa).sum()
                + torch.where(torch.isfinite(nn_), nn_, 0.0).mul(wn).sum())

    g_step, = torch.autograd.grad(loss(r, lal, ln), la)
    g_fwd, = torch.autograd.grad(loss(res.reading, res.log_alpha, res.log_norm), la)
    assert torch.isfinite(g_step).all()
    assert torch.allclose(g_step, g_fwd, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("window", [None, 4])
def test_step_cost_follows_the_equations(window):
    """What a step keeps: all columns unlimited (Eq. 3's pop term reads them all), the last
    D − 1 (and the newest) with a window D, whatever the length."""
    stack = NondeterministicStack(2, 3, window=window)
    state = stack.initial_state(1)
    with torch.no_grad():
        for t in range(1, 13):
            state, _ = stack.step(state, torch.randn(stack.action_shape(1, 1))[:, 0])
            rows = [c.shape[1] for c in state.cols if c is not None]
            if window is None:
                assert rows == list(range(1, t + 1))
            else:
                assert len(state.cols) <= window and max(rows) <= window
                assert len(state.vs) <= window + 1


def test_step_bad_input():
    stack = NondeterministicStack(2, 3)
    state = stack.initial_state(2)
    assert isinstance(state, NSState) and state.time == 0 and state.batch == 2
    good = torch.zeros(2, 2, 3, 2, 7)
    for bad, match in ((0, "batch"), (True, "batch"), ("2", "batch")):
        with pytest.raises(InputError, match=match):
            stack.initial_state(bad)
    with pytest.raises(InputError, match="dtype"):
        stack.initial_state(2, torch.int64)
    with pytest.raises(InputError, match="NSState"):
        stack.step("state", good)
    with pytest.raises(InputError, match="Q=3"):
        NondeterministicStack(3, 3).step(state, good)
    with pytest.raises(InputError, match="shape"):
        stack.step(state, torch.zeros(2, 1, 2, 3, 2, 7))
    with pytest.raises(InputError, match="shape"):
        stack.step(state, torch.zeros(3, 2, 3, 2, 7))
    with pytest.raises(InputError, match="float64"):
        stack.step(state, good.double())
    with pytest.raises(InputError, match="NaN"):
        stack.step(state, torch.full_like(good, float("nan")))
    with pytest.raises(InputError, match="inf"):
        stack.step(state, torch.full_like(good, float("inf")))
    _, r = stack.step(state, good)                       # the old state stays usable
    _, r2 = stack.step(state, good)
    assert state.time == 0 and torch.equal(r, r2) and r.shape == (2, 2, 3)


# --- forward_decoded / forward_window: the stack as symbol ids --------------------------------
def _live_ids(machine, n: int, lengths, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    from pdanet.verify.strings import random_live_strings

    ids, lens = random_live_strings(machine, n, lengths, np.random.default_rng(seed))
    return torch.as_tensor(ids), lens


def _specified(lens: np.ndarray, T: int) -> np.ndarray:
    """(B, T+1) bool: the positions t ≤ length of each row (what forward specifies)."""
    return np.arange(T + 1)[None, :] <= lens[:, None]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(sorted(COMPILERS)),
       window=st.sampled_from([None, None, 1, 2, 3]), seed=st.integers(0, 10**6))
def test_forward_decoded_equals_forward(machine, variant, window, seed):
    """On live strings of random compiled machines (every action row exactly one-hot), the run
    with the stack as symbol ids is taken and equals `forward` bit for bit at every specified
    position (states, logits, the decoded fields); with a window, runs die as in forward."""
    net = COMPILERS[variant](machine, window=window)
    ids, lens = _live_ids(machine, 12, (0, 7), seed)
    if ids.shape[1] == 0:
        return
    mod = net.module
    fast = mod._discrete(ids, None)
    assert fast is not None                                   # the discrete path is taken
    slow = mod.forward(ids)
    spec = torch.as_tensor(_specified(lens, ids.shape[1]))
    for a, b in zip(fast, slow):
        assert torch.equal(a[spec], b[spec])
    assert torch.equal(mod.forward_decoded(ids)[0][spec], slow[0][spec])
    da, db = net.decode(fast[0]), net.decode(slow[0])
    for k in db:
        assert np.array_equal(da[k][spec.numpy()], db[k][spec.numpy()]), k


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(sorted(COMPILERS)),
       seed=st.integers(0, 10**6))
def test_forward_window_fields_equal_the_machines(machine, variant, seed):
    """forward_window + the compiled window_decoder give the machine's ``run_batch_window``
    fields (state, depth, top, the top three cells) at every live position."""
    net = COMPILERS[variant](machine)
    ids, lens = _live_ids(machine, 10, (0, 24), seed)
    if ids.shape[1] == 0:
        return
    out = net.module.forward_window(ids, 3)
    assert out is not None
    got = net.module.window_decoder(out[0].numpy())
    exp = machine.run_batch_window(ids.numpy(), lens, 3).fields
    live = _specified(lens, ids.shape[1]) & (exp["state"] >= 0)
    for k in ("state", "depth", "top", "stack_top"):
        assert np.array_equal(got[k][live], exp[k][live]), k
    assert np.array_equal(net.readout(out[1])[live], exp["output"][live])


@pytest.mark.parametrize("variant", sorted(COMPILERS))
def test_forward_decoded_float64(variant):
    machine = dc.EXAMPLE_DUSELL_CHIANG_RNS
    net = COMPILERS[variant](machine, dtype=torch.float64)
    ids, lens = _live_ids(machine, 16, (0, 9), 2)
    fast, slow = net.module._discrete(ids, None), net.module(ids)
    assert fast is not None and fast[0].dtype == torch.float64
    spec = torch.as_tensor(_specified(lens, ids.shape[1]))
    for a, b in zip(fast, slow):
        assert torch.equal(a[spec], b[spec])


@pytest.mark.parametrize("variant", sorted(COMPILERS))
def test_not_one_hot_falls_back_to_forward(variant):
    """A perturbed compiled network (actions no longer exactly one-hot) and a randomly
    initialised one: forward_window is None and forward_decoded is forward."""
    machine = pn.tasks.get("dyck2")
    net = COMPILERS[variant](machine)
    ids, _ = _live_ids(machine, 6, (3, 8), 1)
    with torch.no_grad():
        net.module.actions.weight.mul_(1e-3)           # saturation lost: Δ rows spread out
    rand = dc.DuSellChiangRNN(3, 2, 3, dc.MODEL_VARIANTS[variant], hidden=5)
    for mod, x in ((net.module, ids), (rand, torch.randint(-1, 3, (4, 6)))):
        assert mod._discrete(x, None) is None and mod.forward_window(x, 3) is None
        for a, b in zip(mod.forward_decoded(x), mod(x)):
            assert torch.equal(a, b)


def test_not_one_hot_on_long_strings_names_the_step():
    """Where the stack cannot be kept as symbol ids (the action gap shrunk to 5%: below the
    test's cut) and forward's O(T²)-memory chart is over the limits, the typed ResourceError
    says which step of which row was not one-hot."""
    machine = pn.tasks.get("dyck2")
    net = dc.compile_dusell_chiang_rns(machine)
    ids, _ = _live_ids(machine, 2, 1500, 4)
    assert net.module.forward_window(ids, 3) is not None
    with torch.no_grad():
        net.module.actions.weight.mul_(0.05)
    assert net.module.forward_window(ids, 3) is None
    with pytest.raises(pn.errors.ResourceError, match=r"step 1 of row 0: the action row"):
        net.module.forward_decoded(ids)


def test_forward_window_bad_input():
    net = dc.compile_dusell_chiang_rns(dc.EXAMPLE_DUSELL_CHIANG_RNS)
    for bad in (0, True, 1.5):
        with pytest.raises(InputError, match="cells"):
            net.module.forward_window(torch.zeros(1, 2, dtype=torch.long), bad)
    with pytest.raises(InputError, match="batch, time"):
        net.module.forward_decoded(torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("variant", sorted(COMPILERS))
def test_verify_long_strings(variant):
    """32 busy Dyck-2 strings of length 2,000 (float32) verify through forward_window (state,
    depth, top, the top three cells, output at every step)."""
    machine = pn.tasks.get("dyck2")
    net = COMPILERS[variant](machine)
    rep = pn.verify(machine, net, max_length=None, samples=0, long_samples=32, long_length=2000,
                    seed=5)
    assert rep.ok, rep.counterexample
    assert rep.phases[-1].name == "long" and rep.strings_checked == 32
    assert {"state", "depth", "top", "stack_top", "output"} <= set(rep.fields)


def _push_pop_machine() -> DPDA:
    """a pushes A, b pushes B, c pops (a no-op on ⊥); accepts on the empty stack: every (state,
    input, top) has a move, so a compiled network with a wrong move stays one-hot."""
    t = {}
    for x in ("A", "B", BOTTOM):
        t[(0, "a", x)] = (0, ("A", x))
        t[(0, "b", x)] = (0, ("B", x))
        t[(0, "c", x)] = (0, (x,) if x is BOTTOM else ())
    return DPDA([0], "abc", ["A", "B"], t, 0, acceptance="empty_stack")


@pytest.mark.parametrize("variant", ["ns", "rns"])
def test_wrong_push_weight_fails_on_long_strings_at_its_first_use(variant):
    """One wrong weight: the unit of (a, top A) pushes B instead of A (one entry of W_ha
    moved). Verify on long strings only reports it, at the first step where a is read on an
    unmarked A (machine depth ≥ 2), on the top cells."""
    machine = _push_pop_machine()
    net = COMPILERS[variant](machine)
    mod = net.module
    Q, N = mod.num_states, mod.num_stack
    A_, B_ = machine.stack_alphabet.index("A"), machine.stack_alphabet.index("B")
    a = machine.alphabet.index("a")
    j, (q, _, n, r, v) = next((j, mv) for j, mv in enumerate(net.abstraction.moves)
                              if mv[1] == a and mv[2] == 1 + A_)
    assert v == 1 + A_                                  # push the unmarked A
    row = ((q * N + n) * Q + r) * (2 * N + 1)
    with torch.no_grad():
        w = mod.actions.weight
        w[row + 1 + B_, j], w[row + v, j] = w[row + v, j].clone(), 0.0
    rep = pn.verify(machine, net, max_length=None, samples=0, long_samples=2, long_length=2000,
                    seed=3)
    assert not rep.ok
    cex = rep.counterexample
    assert cex.phase == "long" and len(cex.string) == 2000
    assert cex.field in ("top", "stack_top") and cex.expected != cex.got
    ids = machine.alphabet.encode(cex.string)[None]
    tr = machine.run_batch(ids, np.array([ids.shape[1]])).fields
    hits = [t for t in range(1, ids.shape[1] + 1) if ids[0, t - 1] == a
            and tr["depth"][0, t - 1] >= 2 and tr["top"][0, t - 1] == A_]
    assert cex.step == hits[0]
    assert not pn.verify(machine, net, strings=[cex.string[:cex.step]], max_length=None,
                         samples=0, long_samples=0).ok          # and the whole-stack check


@pytest.mark.parametrize("variant", ["ns_s", "ns_u"])
def test_wrong_output_weight_fails_on_long_strings(variant):
    """Dyck-2 (ε accepted: units moving into rejecting configurations vote −1): one readout
    weight zeroed makes that move accept. Verify on long strings only finds it, with the string
    and the step, at the first step the unit fires."""
    machine = pn.tasks.get("dyck2")
    net = COMPILERS[variant](machine)
    G = net.abstraction.machine_stack
    j = next(j for j, w in enumerate(net.module.out.weight[0].tolist())   # on an unmarked top
             if w < 0 and 1 <= net.abstraction.moves[j][2] <= G)
    with torch.no_grad():
        net.module.out.weight[0, j] = 0.0
    rep = pn.verify(machine, net, max_length=None, samples=0, long_samples=2, long_length=2000,
                    seed=5)
    assert not rep.ok
    cex = rep.counterexample
    assert cex.phase == "long" and cex.field == "output" and len(cex.string) == 2000
    assert cex.expected != cex.got
    ids = torch.as_tensor(machine.alphabet.encode(cex.string))[None]
    h = net.module.forward_decoded(ids)[0][0, 1:, j]        # the unit's activation per step
    assert cex.step == 1 + int(torch.nonzero(h > 0.5)[0])
