"""The models of Suzgun et al. (2019) — Stack-RNN, Stack-LSTM and Baby-NTM, compiled —
checked against the machines they are compiled from, step by step on whole stacks."""

import math
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import realtime_dpda

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.bounded import DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.store import sequence_copy
from pdanet.constructions.stacks.suzgun import (
    NTM_NOOP,
    POP_LEFT,
    POP_RIGHT,
    BabyNTM,
    SuzgunActions,
    SuzgunStack,
)
from pdanet.errors import CompileError, InputError, PdanetError, ResourceError, UnboundedStackError
from pdanet.models.suzgun import (
    EXAMPLE_SUZGUN_BABY_NTM,
    EXAMPLE_SUZGUN_STACK_LSTM,
    EXAMPLE_SUZGUN_STACK_RNN,
    HEAD,
    RHO,
    SuzgunBabyNTM,
    SuzgunController,
    SuzgunStackLSTM,
    SuzgunStackRNN,
    compile_suzgun_baby_ntm,
    compile_suzgun_stack_lstm,
    compile_suzgun_stack_rnn,
    requires_suzgun_baby_ntm,
    requires_suzgun_stack_lstm,
    requires_suzgun_stack_rnn,
)

COMPILE = {"rnn": compile_suzgun_stack_rnn, "lstm": compile_suzgun_stack_lstm}
REQUIRES = {"rnn": requires_suzgun_stack_rnn, "lstm": requires_suzgun_stack_lstm}
SMALL = {"sequence_reversal": {"vocab_size": 4}, "bigram_flip": {"vocab_size": 4},
         "sequence_copy": {"vocab_size": 4}}


def _seed_tasks():
    """(name, machine) of every seed task (small vocabularies where the task has one)."""
    return [(n, pn.tasks.get(n, **SMALL.get(n, {}))) for n in pn.tasks.names()]


def _applicable():
    out = []
    for name, m in _seed_tasks():
        if requires_suzgun_stack_rnn(m) is None:
            out.append((name, m))
    return out


APPLICABLE = _applicable()


def test_applicable_seed_tasks_are_the_stack_and_finite_state_ones():
    names = {n for n, _ in APPLICABLE}
    assert {"dyck2", "dyck3", "dyck6", "w_phi_wr", "w_wr_marked", "reversal", "parity",
            "boolean_formula", "parenthesis_prediction", "sequence_reversal"} <= names
    for name, m in _seed_tasks():
        if name not in names:       # queues, nondeterministic PDAs, non-real-time machines
            err = requires_suzgun_stack_rnn(m)
            assert isinstance(err, PdanetError), name


def _compile_or_skip(kind, m):
    try:
        return COMPILE[kind](m)
    except ResourceError:           # the controller is over pdanet.limits (e.g. solve_equation)
        return None


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
@pytest.mark.parametrize("name, machine", APPLICABLE, ids=[n for n, _ in APPLICABLE])
def test_seed_task_compiles_and_verifies(name, machine, kind):
    net = _compile_or_skip(kind, machine)
    if net is None:
        assert name in ("solve_equation",), name
        return
    big = net.hidden_units > 200 or len(machine.alphabet) > 8
    rep = pn.verify(machine, net, max_length=3 if big else 5, samples=20 if big else 60,
                    long_samples=0, overlap=False)
    assert rep.ok, (name, kind, rep.counterexample)
    assert net.hidden_units <= net.bound_value
    assert net.method == f"suzgun_stack_{kind}"


# --- Suzgun's own tasks, as small as the construction gets them ------------------------------------
PAPER = {"dyck2": (7, 3), "dyck3": (9, 3), "dyck6": (15, 4), "w_phi_wr": (13, 3),
         "w_wr_marked": (13, 3)}


@pytest.mark.parametrize("name", ["dyck2", "dyck3", "w_phi_wr", "w_wr_marked"])
def test_paper_tasks_exhaustive_to_8(name):
    m = pn.tasks.get(name)
    net = compile_suzgun_stack_rnn(m)
    assert (net.hidden_units, net.info["stack_width"]) == PAPER[name]
    rep = pn.verify(m, net, max_length=8, samples=40, sample_lengths=(9, 60), long_samples=0,
                    overlap=False)
    assert rep.ok, rep.counterexample
    assert rep.phases[0].complete


def test_dyck_units_are_2k_plus_2():
    """Opening brackets: one unit per (bracket, stack empty or not); closing: one unit per
    (bottom bit of the top: 0 or 1), shared by all bracket types (the code search gives the
    bottom-marked symbols one common bit); one relay for that bit."""
    for k in (2, 3, 6):
        net = compile_suzgun_stack_rnn(pn.tasks.get(f"dyck{k}"))
        assert net.info["controller_units"] == 2 * k + 2 and net.info["relay_units"] == 1
        closing = [u for u in net.abstraction.units if u.op == "pop"]
        assert len(closing) == 2 and all(len(u.inputs) == k for u in closing)


def test_dyck6_units_and_exhaustive_to_6():
    m = pn.tasks.get("dyck6")
    net = compile_suzgun_stack_rnn(m)
    assert (net.hidden_units, net.info["stack_width"]) == PAPER["dyck6"]
    rep = pn.verify(m, net, max_length=6, samples=20, long_samples=0, overlap=False)
    assert rep.ok, rep.counterexample


@pytest.mark.slow
def test_dyck6_exhaustive_to_7():
    """801,552 live prefixes (length 8 has 5.6 million: minutes on one core)."""
    m = pn.tasks.get("dyck6")
    rep = pn.verify(m, compile_suzgun_stack_rnn(m), max_length=7, samples=0, long_samples=0)
    assert rep.ok, rep.counterexample


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_long_strings_float32(kind):
    """Long in-domain strings (compared incrementally through ``forward_window``) and the same
    network's full forward on a shorter batch agree with the machine."""
    m = pn.tasks.get("dyck2")
    net = COMPILE[kind](m)
    strings = pn.tasks.sample("dyck2", 8, 600, rng=0)
    rep = pn.verify(m, net, max_length=None, samples=0, long_samples=0, strings=strings,
                    overlap=False)
    assert rep.ok, rep.counterexample
    ids, _ = net.encode(strings)
    window = net.module.forward_window(ids, 3)
    assert window is not None
    with torch.no_grad():
        full = net.module(ids[:, :200])
    assert torch.equal(full[0][:, :, :net.hidden_units], window[0][:, :201, :net.hidden_units])
    assert torch.equal(full[1], window[1][:, :201])


# --- random machines ---------------------------------------------------------------------------------
random_dpda = partial(realtime_dpda, max_states=4)


@given(m=random_dpda(), kind=st.sampled_from(["rnn", "lstm"]))
@settings(max_examples=30, deadline=None)
def test_random_dpdas(m, kind):
    net = COMPILE[kind](m)
    rep = pn.verify(m, net, max_length=6, samples=15, sample_lengths=(7, 40), long_samples=0,
                    seed=1, overlap=False)
    assert rep.ok, (kind, rep.counterexample)


def _brute_force(m, net, L):
    """Every string over the alphabet up to length L (dead ones included): on every live prefix
    the network's readout equals the machine's acceptance / output."""
    syms = list(m.alphabet.symbols)
    strings = [()]
    frontier = [()]
    for _ in range(L):
        frontier = [s + (a,) for s in frontier for a in syms]
        strings += frontier
    ids, lengths = m.encode(strings)
    trace = m.run_batch(ids, lengths)
    _, logits = net.forward(ids)
    got = net.readout(logits)
    want = trace.fields["output"]
    state = trace.fields["state"]
    for b, n in enumerate(lengths):
        for t in range(n + 1):
            if state[b, t] < 0:
                break
            assert got[b, t] == want[b, t], (strings[b][:t], got[b, t], want[b, t])


@given(m=random_dpda())
@settings(max_examples=25, deadline=None)
def test_random_dpdas_brute_force_outputs(m):
    _brute_force(m, compile_suzgun_stack_rnn(m), 6 if len(m.alphabet) <= 2 else 4)


def test_brute_force_paper_tasks():
    for name in ("dyck2", "w_wr_marked"):
        m = pn.tasks.get(name)
        _brute_force(m, compile_suzgun_stack_lstm(m), 6)


def test_empty_stack_recogniser_is_bottom_marked():
    """The output reads h_t only, so an empty-stack recogniser is compiled with its bottom symbol
    marked; noops and replaces on and above the bottom, decoded back to the machine's stack."""
    t = {(0, "a", BOTTOM): (0, ("A", BOTTOM)), (0, "a", "A"): (0, ("A", "A")),
         (0, "b", "A"): (1, ()), (1, "b", "A"): (1, ()), (0, "c", "A"): (0, ("B",)),
         (0, "c", "B"): (0, ("B",)), (0, "b", "B"): (1, ()), (1, "b", "B"): (1, ()),
         (0, "c", BOTTOM): (0, (BOTTOM,)), (1, "c", BOTTOM): (0, (BOTTOM,)),
         (1, "a", BOTTOM): (0, ("A", BOTTOM))}
    m = DPDA([0, 1], "abc", ["A", "B"], t, 0, acceptance="empty_stack")
    for kind in ("rnn", "lstm"):
        net = COMPILE[kind](m)
        assert net.info["bottom_marked"] and net.abstraction.marked
        rep = pn.verify(m, net, max_length=8, samples=50, long_samples=2, long_length=600,
                        overlap=False)
        assert rep.ok, rep.counterexample


# --- exactness ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_float_weights_are_the_exact_weights(kind):
    net = COMPILE[kind](pn.tasks.get("w_phi_wr"))
    state = net.module.state_dict()
    assert set(state) == set(net.weights)
    for name, w in net.weights.items():
        assert torch.equal(state[name], w.to_float(net.scale, torch.float32)), name
    n64 = net.with_scale(dtype=torch.float64)
    for name, w in net.weights.items():
        assert torch.equal(n64.module.state_dict()[name], w.to_float(net.scale, torch.float64))


def _heads(module, ids):
    """The actions a_t, pushed values n_t and outputs y_t = σ(logits) at every step."""
    acts, vals, hs = [], [], []
    orig_actions = module.actions

    def spy(h):
        a = orig_actions(h)
        acts.append(a)
        vals.append(torch.sigmoid(module.W_n(h)))
        hs.append(h)
        return a

    module.actions = spy
    try:
        _, logits = module(ids)
    finally:
        del module.actions
    return torch.stack(acts, 1), torch.stack(vals, 1), torch.sigmoid(logits), torch.stack(hs, 1)


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_saturated_heads_are_exactly_one_hot(kind, dtype):
    m = pn.tasks.get("w_phi_wr")
    net = COMPILE[kind](m, dtype=dtype)
    strings = pn.tasks.sample("w_phi_wr", 16, 41, rng=3)
    ids, _ = net.encode(strings)
    with torch.no_grad():
        a, n, y, h = _heads(net.module, ids)
    assert torch.equal(a.sum(-1), torch.ones_like(a[..., 0]))
    assert bool(((a == 0) | (a == 1)).all())
    assert bool(((n == 0) | (n == 1)).all())
    assert bool(((y == 0) | (y == 1)).all())
    ab = net.abstraction
    assert ab.latches                            # the held top is latched after "#"
    units = h[..., :(ab.start is not None) + len(ab.units)]
    level = 1.0 if kind == "rnn" else math.tanh(1)
    assert bool((units.abs() - level).abs().max() < 1e-6)
    assert bool((units > 0).sum(-1).eq(1).all())             # one active unit per step
    assert bool((h[..., list(ab.latches)].abs() - level).abs().max() < 1e-6)
    assert bool((h[..., list(ab.relays)] == 0).all())


@pytest.mark.parametrize("tau", [1, 2, 0.25])
def test_temperature_is_folded_into_W_a(tau):
    m = pn.tasks.get("dyck2")
    base, net = compile_suzgun_stack_rnn(m), compile_suzgun_stack_rnn(m, temperature=tau)
    assert net.module.temperature == float(tau)
    assert torch.allclose(net.module.W_a.weight, base.module.W_a.weight * float(tau))
    ids, _ = net.encode(pn.tasks.sample("dyck2", 4, 30, rng=0))
    with torch.no_grad():
        a0 = _heads(base.module, ids)[0]
        a1 = _heads(net.module, ids)[0]
    assert torch.equal(a0, a1)
    assert pn.verify(m, net, max_length=6, samples=10, long_samples=0).ok


def test_gumbel_noise_within_the_margin_keeps_actions_one_hot():
    """With Gumbel noise g, W_a h/τ has gap β·HEAD = 2048 before noise; the action is still
    exactly one-hot while g_lose − g_win < β·HEAD − 750 τ (e^{−750} underflows in float64)."""
    m = pn.tasks.get("dyck2")
    net = compile_suzgun_stack_rnn(m, gumbel=True, dtype=torch.float64)
    mod = net.module
    assert not mod.training                      # compiled in eval mode: no noise
    h = -torch.ones(1, net.hidden_units, dtype=torch.float64)
    h[0, 1] = 1                                  # unit 1 on
    h[0, list(net.abstraction.relays)] = 0
    gap = float(net.scale) * HEAD
    for bound in (gap - 750, 0.0):
        logits = mod.W_a(h)
        win = int(logits.argmax())
        g = torch.zeros_like(logits)
        g[0, 1 - win] = bound                     # the worst noise within the condition
        a = torch.softmax((logits + g) / mod.temperature, -1)
        assert a[0, win] == 1 and a[0, 1 - win] == 0
    mod.train()                                  # training: noise is drawn (and in the bound)
    torch.manual_seed(0)
    ids, _ = net.encode(pn.tasks.sample("dyck2", 8, 40, rng=1))
    with torch.no_grad():
        a = _heads(mod, ids)[0]
    assert bool(((a == 0) | (a == 1)).all())
    mod.eval()
    assert pn.verify(m, net, max_length=6, samples=10, long_samples=0).ok


# --- trainability --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_adam_steps_from_compiled_weights(kind):
    """Adam on the paper's loss (MSE of σ(y) against the per-prefix targets): from the compiled
    weights the gradients are finite (zero where saturated and right); from a less saturated
    instance (β = 2) they are finite and move every block."""
    m = pn.tasks.get("dyck2")
    strings = pn.tasks.sample("dyck2", 8, 20, rng=0)
    target = torch.as_tensor(m.run_batch(*m.encode(strings)).fields["output"], dtype=torch.float32)
    compiled = COMPILE[kind](m, temperature=2, gumbel=True)
    ids, _ = compiled.encode(strings)
    for net in (compiled, compiled.with_scale(2)):
        mod = net.module.train()
        opt = torch.optim.Adam(mod.parameters(), lr=1e-3)
        before = {k: v.clone() for k, v in mod.state_dict().items()}
        for _ in range(3):
            _, logits = mod(ids)
            loss = torch.nn.functional.mse_loss(torch.sigmoid(logits[..., 0]), target)
            opt.zero_grad()
            loss.backward()
            grads = [p.grad for p in mod.parameters() if p.grad is not None]
            assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
            opt.step()
    assert not torch.equal(before["W_y.weight"], mod.state_dict()["W_y.weight"])
    assert not torch.equal(before["cell.weight_hh"], mod.state_dict()["cell.weight_hh"])


def test_random_init_module_runs():
    mod = SuzgunStackRNN(4, 8, np.array([[0, 1], [1, 0], [0, 0]]), 4)   # the paper's H = 8
    states, logits = mod(torch.tensor([[0, 1, 2, -1]]))
    assert states.shape[:2] == (1, 5) and logits.shape == (1, 5, 4)
    lstm = SuzgunStackLSTM(4, 8, np.array([[1], [0]]), 2, temperature=0.5)
    states, logits = lstm(torch.tensor([[0, 3, 2]]))
    assert logits.shape == (1, 4, 2)
    logits.sum().backward()
    assert lstm.cell.weight_hh.grad is not None


def test_stack_step_matches_the_papers_equations():
    """The module's memory update is the paper's s_t (§3.1), checked on one hand-made step."""
    st_ = SuzgunStack(3)
    state = st_.init_state(1, 1)
    state, r = st_.step(state, SuzgunActions(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.5]])))
    state, r = st_.step(state, SuzgunActions(torch.tensor([[0.75, 0.25]]), torch.tensor([[0.2]])))
    # s^(0) = 0.75·0.2 + 0.25·s^(1)_{t−1} (= 0);  s^(1) = 0.75·0.5 + 0.25·0
    assert torch.allclose(state.cells[0, :, 0], torch.tensor([0.15, 0.375, 0.0]))
    assert torch.allclose(r, torch.tensor([[0.15]]))


# --- Baby-NTM (module only) ------------------------------------------------------------------------------
def test_baby_ntm_module_shapes_gradients_and_one_step():
    torch.manual_seed(0)
    mod = SuzgunBabyNTM(3, 8, 1, 3, size=5)
    states, logits = mod(torch.tensor([[0, 1, 2, -1], [2, 2, 1, 0]]))
    assert states.shape == (2, 5, 8 + 5) and logits.shape == (2, 5, 3)
    assert torch.equal(states[0, 4], states[0, 3])            # padding keeps the state
    logits.sum().backward()
    assert all(bool(torch.isfinite(p.grad).all()) for p in mod.parameters() if p.grad is not None)
    assert mod.cell.weight_hh.grad is not None and mod.W_a.weight.grad is not None
    # one step by hand (§3.3): h_1 = tanh(W_ih x + b_ih + W_hh(h_0 + W_m M_0^(0)) + b_hh),
    # a = softmax(W_a h_1), n = σ(W_n h_1), M_1 = Σ a_i OP_i M_0, M_1^(0) += n
    with torch.no_grad():
        x = torch.tensor([1.0, 0.0, 0.0])
        h1 = torch.tanh(mod.cell.weight_ih @ x + mod.cell.bias_ih + mod.cell.weight_hh @ mod.h0
                        + mod.cell.bias_hh)
        a = torch.softmax(mod.W_a(h1), -1)
        n = torch.sigmoid(mod.W_n(h1))
        M1 = torch.zeros(5, 1)
        M1[0] += n
        states, _ = mod(torch.tensor([[0]]))
    assert torch.allclose(states[0, 1, :8], h1, atol=1e-6)
    assert torch.allclose(states[0, 1, 8:], M1.flatten(), atol=1e-6)
    assert torch.allclose(a.sum(), torch.tensor(1.0))
    mem = BabyNTM(5)
    M = torch.arange(5.0).view(1, 5, 1)
    ops = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]])                 # POP_RIGHT: [0,a,b,c,d]
    assert torch.equal(mem._update(M, ops, torch.zeros(1, 1))[0, :, 0],
                       torch.tensor([0.0, 0.0, 1.0, 2.0, 3.0]))


# --- bad input ------------------------------------------------------------------------------------------
def test_epsilon_moves_name_the_buffered_model():
    t = {("p", "a", BOTTOM): ("p", ("A", BOTTOM)), ("p", "a", "A"): ("p", ("A", "A")),
         ("p", "#", "A"): ("r", ("A",)), ("r", EPSILON, "A"): ("r", ())}
    m = DPDA(["p", "r"], "a#", "A", t, "p", accepting=["r"])
    assert isinstance(requires_suzgun_stack_rnn(m), CompileError)
    with pytest.raises(CompileError, match="buffered"):
        compile_suzgun_stack_rnn(m)


def test_nondeterministic_pda_names_ns_rnn():
    m = pn.tasks.get("unmarked_reversal")
    with pytest.raises(CompileError, match="ns_rnn"):
        compile_suzgun_stack_lstm(m)


def test_queue_names_grefenstette():
    err = requires_suzgun_stack_rnn(sequence_copy(2))
    assert isinstance(err, CompileError) and "grefenstette" in str(err)
    with pytest.raises(CompileError, match="Queue"):
        compile_suzgun_stack_rnn(sequence_copy(2))


def test_unbounded_machine_in_a_fixed_stack():
    with pytest.raises(UnboundedStackError, match="depth"):
        compile_suzgun_stack_rnn(pn.tasks.get("dyck2"), depth=4)
    net = compile_suzgun_stack_rnn(pn.tasks.get("parity"), depth=2)
    assert pn.verify(pn.tasks.get("parity"), net, max_length=6, samples=5, long_samples=0).ok


@pytest.mark.parametrize("bad", [0, -1, True, "2", float("inf"), float("nan")])
def test_bad_temperature(bad):
    with pytest.raises(InputError, match="temperature"):
        compile_suzgun_stack_rnn(pn.tasks.get("dyck2"), temperature=bad)
    with pytest.raises(InputError, match="temperature"):
        SuzgunStackRNN(2, 4, np.array([[1], [0]]), 1, temperature=bad)


def test_bad_module_arguments():
    with pytest.raises(InputError, match="gumbel"):
        compile_suzgun_stack_rnn(pn.tasks.get("dyck2"), gumbel=1)
    with pytest.raises(InputError, match="depth"):
        compile_suzgun_stack_rnn(pn.tasks.get("parity"), depth=0)
    with pytest.raises(InputError, match="hidden"):
        SuzgunStackRNN(2, 0, np.array([[1], [0]]), 1)
    mod = SuzgunStackRNN(2, 4, np.array([[1], [0]]), 1)
    with pytest.raises(InputError, match="batch, time"):
        mod(torch.tensor([0, 1]))
    with pytest.raises(InputError, match="out of range"):
        mod(torch.tensor([[0, 5]]))


# --- registry hooks ------------------------------------------------------------------------------------
def test_examples_and_abstraction():
    for kind, ex in (("rnn", EXAMPLE_SUZGUN_STACK_RNN), ("lstm", EXAMPLE_SUZGUN_STACK_LSTM)):
        assert REQUIRES[kind](ex) is None
        net = COMPILE[kind](ex)
        ab = net.abstraction
        assert isinstance(ab, SuzgunController) and ab.cell == kind
        assert len(ab.labels) == net.hidden_units
        assert len(ab.relays) == net.info["relay_units"] == 1 < net.info["stack_width"]
        assert ab.start is None and net.info["controller_units"] == 6
        assert ab.rho == (RHO if kind == "lstm" else 1)
        assert isinstance(net.module, SuzgunStackLSTM if kind == "lstm" else SuzgunStackRNN)
        assert "tanh" in net.scale_argument and net.bound_value >= net.hidden_units


# --- Baby-NTM, compiled ---------------------------------------------------------------------------------
def _verify(machine, net, max_length=6, samples=30, **kw):
    report = pn.verify(machine, net, max_length=max_length, samples=samples,
                       sample_lengths=(7, 20), long_samples=kw.pop("long_samples", 0), **kw)
    assert report.ok, report
    return report


def _baby_seed_tasks():
    """Every seed task whose store fits the Baby-NTM: DFAs / Mealy machines as they are,
    real-time DPDAs / DPDTs bounded to depth 3, Dyck-(k, m)."""
    out = []
    for name, m in _seed_tasks():
        if isinstance(m, DPDA | DPDT) and m.is_realtime:
            m = m.bounded(3)
        if requires_suzgun_baby_ntm(m) is None:
            out.append((name, m))
    return out


BABY_APPLICABLE = _baby_seed_tasks()


def test_baby_ntm_seed_tasks_cover_finite_state_bounded_stack_and_dyck():
    names = {n for n, _ in BABY_APPLICABLE}
    assert {"dyck", "dyck2", "dyck6", "w_wr_marked", "w_phi_wr", "parity", "reversal",
            "boolean_formula", "bigram_flip", "cumulative_xor"} <= names


@pytest.mark.parametrize("name, machine", BABY_APPLICABLE, ids=[n for n, _ in BABY_APPLICABLE])
def test_baby_ntm_seed_task_compiles_and_verifies(name, machine):
    try:
        net = compile_suzgun_baby_ntm(machine)
    except ResourceError:           # over pdanet.limits (solve_equation's controller)
        assert name in ("solve_equation",), name
        return
    assert isinstance(net.module, SuzgunBabyNTM) and net.method == "suzgun_baby_ntm"
    assert net.hidden_units <= net.bound_value
    _verify(machine, net, max_length=5, samples=20)


@settings(max_examples=40, deadline=None)
@given(realtime_dpda(max_states=4), st.integers(1, 3), st.sampled_from(["held", "memory", "auto"]))
def test_baby_ntm_random_bounded_dpda_verifies_exhaustively(machine, m, layout):
    bounded = machine.bounded(m)
    if layout == "memory" and machine.acceptance == "empty_stack":
        with pytest.raises(InputError, match="layout 'held'"):
            compile_suzgun_baby_ntm(bounded, layout=layout)
        layout = "held"
    net = compile_suzgun_baby_ntm(bounded, layout=layout)
    rows = {"held": max(m - 1, 1), "memory": m}[net.info["layout"]]
    assert net.info["memory_rows"] == rows and net.module.memory.size == rows
    if layout == "auto":                          # the layout with fewer units
        other = compile_suzgun_baby_ntm(bounded, layout="held")
        assert net.hidden_units <= other.hidden_units
    _verify(bounded, net, max_length=7, samples=10)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4))
def test_baby_ntm_dyck_km_verifies_exhaustively(k, m):
    machine = DyckKM(k, m)
    net = compile_suzgun_baby_ntm(machine)
    _verify(machine, net, max_length=8 if k == 1 else 6, samples=10)


@st.composite
def _dfa(draw):
    """A random DFA (missing transitions allowed) or Mealy machine over ≤ 3 symbols."""
    nq, nk = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    Q, K = list(range(nq)), "abc"[:nk]
    t = {}
    for q in Q:
        for a in K:
            q2 = draw(st.sampled_from([None] + Q))
            if q2 is not None:
                t[(q, a)] = q2
    if draw(st.booleans()):
        outs = {key: draw(st.sampled_from("xy")) for key in t}
        return DFA(Q, K, t, 0, (), outputs=outs, output_alphabet="xy")
    return DFA(Q, K, t, 0, draw(st.sets(st.sampled_from(Q))))


@settings(max_examples=25, deadline=None)
@given(_dfa(), st.sampled_from(["held", "memory"]))
def test_baby_ntm_random_dfa_and_mealy_verify(machine, layout):
    net = compile_suzgun_baby_ntm(machine, layout=layout)
    assert net.info["memory_rows"] == 1
    _verify(machine, net, max_length=7, samples=10)


def test_baby_ntm_long_strings_float64_and_exact_memory():
    machine = DyckKM(3, 6)
    net = compile_suzgun_baby_ntm(machine)
    _verify(machine, net, max_length=4, samples=10, long_samples=8, long_length=2000)
    net64 = compile_suzgun_baby_ntm(machine, dtype=torch.float64, size=104)   # §4: 104 rows
    assert net64.module.memory.size == 104 and net64.info["memory_rows"] == 104
    _verify(machine, net64, max_length=4, samples=10, long_samples=4, long_length=500)
    ids = torch.as_tensor(machine.sample(16, 200, rng=0))
    states, _ = net.forward(ids)
    mem = states[..., net.hidden_units:]
    assert bool(((mem == 0) | (mem == 1)).all())          # rows are exact 0/1 codes
    h = states[..., :net.hidden_units]
    with torch.no_grad():
        act = net.module.actions(h)
    assert bool(((act == 0) | (act == 1)).all()) and bool((act.sum(-1) == 1).all())
    used = set(act.argmax(-1).flatten().tolist())
    assert used <= {NTM_NOOP, POP_LEFT, POP_RIGHT}         # rotations are never chosen


def test_baby_ntm_memory_layout_for_a_bounded_stack():
    """The stack below the held top lies in rows 0 … m − 2, row 0 just under the top, empty
    rows 0; push = POP_RIGHT, pop = POP_LEFT."""
    dyck = EXAMPLE_SUZGUN_BABY_NTM                       # Suzgun's Dyck-2 DPDA, depth ≤ 3
    net = compile_suzgun_baby_ntm(dyck, layout="held")
    assert "POP_RIGHT" in net.info["memory_layout"] and net.info["memory_rows"] == 2
    ids, _ = net.encode(["([(", "([()", "([()]"])
    states, _ = net.forward(ids)
    H, W = net.hidden_units, net.info["memory_width"]
    codes = net.abstraction.codes
    type_of = net.abstraction.type_of
    run = dyck.machine.run_batch(np.asarray(ids))
    for b, t in [(0, 3), (1, 4), (2, 5)]:
        rows = states[b, t, H:].view(2, W).numpy().astype(np.int64)
        syms = [int(np.flatnonzero((codes == r).all(1))[0]) for r in rows]
        depth = int(run["depth"][b, t])
        assert depth == [3, 2, 1][b]
        stack = [int(x) for x in run["stack"][b, t, 1:depth + 1]]      # bottom first
        under = stack[:-1][::-1]                                       # under the top, top first
        assert [type_of[g] for g in syms[:len(under)]] == under
        assert all(g == len(codes) - 1 for g in syms[len(under):])     # empty rows: ⊥'s code 0
    acts = net.module.actions(states[0, 1:4, :H]).argmax(-1).tolist()
    assert acts == [NTM_NOOP, POP_RIGHT, POP_RIGHT]                   # push on ⊥ is NOOP
    acts = net.module.actions(states[2, 4:6, :H]).argmax(-1).tolist()
    assert acts == [POP_LEFT, POP_LEFT]


def test_baby_ntm_memory_layout_keeps_the_top_in_row_0():
    """Layout "memory": the whole stack in rows 0 … m − 1, top in row 0; push = POP_RIGHT
    writing the pushed code, pop = POP_LEFT; it needs fewer units than "held" on Dyck-2."""
    dyck = EXAMPLE_SUZGUN_BABY_NTM
    net = compile_suzgun_baby_ntm(dyck)
    assert net.info["layout"] == "memory" and net.info["memory_rows"] == 3
    assert net.hidden_units < compile_suzgun_baby_ntm(dyck, layout="held").hidden_units
    ids, _ = net.encode(["([(", "([()]"])
    states, _ = net.forward(ids)
    H, W = net.hidden_units, net.info["memory_width"]
    codes, type_of = net.abstraction.codes, net.abstraction.type_of
    run = dyck.machine.run_batch(np.asarray(ids))
    for b, t in [(0, 3), (1, 4), (1, 5)]:
        rows = states[b, t, H:].view(3, W).numpy().astype(np.int64)
        syms = [int(np.flatnonzero((codes == r).all(1))[0]) for r in rows]
        depth = int(run["depth"][b, t])
        stack = [int(x) for x in run["stack"][b, t, 1:depth + 1]][::-1]   # top first
        assert [type_of[g] for g in syms[:depth]] == stack
        assert all(g == len(codes) - 1 for g in syms[depth:])
    acts = net.module.actions(states[0, 1:4, :H]).argmax(-1).tolist()
    assert acts == [POP_RIGHT] * 3
    assert net.module.actions(states[1, 4:6, :H]).argmax(-1).tolist() == [POP_LEFT] * 2


def test_baby_ntm_temperature_and_gumbel_keep_it_exact():
    machine = DyckKM(2, 3)
    base = compile_suzgun_baby_ntm(machine)
    hot = compile_suzgun_baby_ntm(machine, temperature=Fraction(1, 8), gumbel=True)
    assert hot.module.temperature == 0.125 and not hot.module.training
    ids = torch.as_tensor(machine.sample(8, 60, rng=1))
    hot.module.train()                                   # Gumbel noise on: still one-hot
    torch.manual_seed(0)
    with torch.no_grad():
        s_hot, y_hot = hot.module(ids)
        s_base, y_base = base.module(ids)
    assert torch.equal(s_hot, s_base) and torch.equal(y_hot, y_base)
    hot.module.eval()
    _verify(machine, hot, max_length=5, samples=10)


def _literal_baby_ntm(mod: SuzgunBabyNTM, ids: torch.Tensor):
    """§3.3 written out row by row: h̃ = h + W_m M^(0), h = tanh(W_ih x + b_ih + W_hh h̃ + b_hh),
    a = softmax(W_a h / τ), n = σ(W_n h), M_t^(i) = Σ_j a_j (OP_j M_{t−1})^(i), M_t^(0) += n."""
    B, T = ids.shape
    N, W = mod.memory.size, mod.width
    cell = mod.cell
    out_s, out_y = [], []
    for b in range(B):
        h = mod.h0
        M = [torch.zeros(W, dtype=h.dtype) for _ in range(N)]
        hs, ms = [h], [torch.cat(M)]
        for t in range(T):
            a_id = int(ids[b, t])
            if a_id < 0:
                hs.append(h)
                ms.append(torch.cat(M))
                continue
            x = torch.zeros(mod.num_symbols, dtype=h.dtype)
            x[a_id] = 1
            h_tilde = h + mod.W_sh.weight @ M[0]
            h = torch.tanh(cell.weight_ih @ x + cell.bias_ih + cell.weight_hh @ h_tilde
                           + cell.bias_hh)
            a = torch.softmax((mod.W_a.weight @ h + mod.W_a.bias) / mod.temperature, 0)
            n = torch.sigmoid(mod.W_n.weight @ h + mod.W_n.bias)
            zero = torch.zeros(W, dtype=h.dtype)
            new = []
            for i in range(N):
                rr = M[(i - 1) % N]                              # ROTATE_RIGHT [e,a,b,c,d]
                rl = M[(i + 1) % N]                              # ROTATE_LEFT  [b,c,d,e,a]
                pl = M[i + 1] if i + 1 < N else zero             # POP_LEFT     [b,c,d,e,0]
                pr = M[i - 1] if i >= 1 else zero                # POP_RIGHT    [0,a,b,c,d]
                row = a[0] * rr + a[1] * rl + a[2] * M[i] + a[3] * pl + a[4] * pr
                new.append(row + n if i == 0 else row)
            M = new
            hs.append(h)
            ms.append(torch.cat(M))
        hs_t = torch.stack(hs)
        out_s.append(torch.cat([hs_t, torch.stack(ms)], 1))
        out_y.append(hs_t @ mod.W_y.weight.T + mod.W_y.bias)
    return torch.stack(out_s), torch.stack(out_y)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4), st.integers(1, 3), st.integers(0, 6))
def test_baby_ntm_module_equals_literal_equations(seed, size, width, T):
    torch.manual_seed(seed)
    mod = SuzgunBabyNTM(3, 5, width, 2, size=size, temperature=0.7).double()
    with torch.no_grad():
        for p in mod.parameters():
            p.normal_(0, 1)
    ids = torch.randint(0, 3, (2, T))
    if T:
        ids[1, -1] = -1                                   # padding keeps the state
    s1, y1 = mod(ids)
    s2, y2 = _literal_baby_ntm(mod, ids)
    assert torch.allclose(s1, s2, atol=1e-12) and torch.allclose(y1, y2, atol=1e-12)
    wts = torch.randn_like(s1)
    loss1 = (s1 * wts).sum() + y1.sum()
    g1 = torch.autograd.grad(loss1, list(mod.parameters()), allow_unused=True)
    loss2 = (s2 * wts).sum() + y2.sum()
    g2 = torch.autograd.grad(loss2, list(mod.parameters()), allow_unused=True)
    for a, b in zip(g1, g2):
        if a is None or b is None:
            assert (a is None or not a.any()) and (b is None or not b.any())
        else:
            assert torch.allclose(a, b, atol=1e-10)


def test_baby_ntm_refusals_are_typed_and_name_the_models():
    err = requires_suzgun_baby_ntm(pn.tasks.get("dyck2"))
    assert isinstance(err, UnboundedStackError)
    assert "suzgun_stack_rnn" in str(err) and "bounded" in str(err)
    with pytest.raises(UnboundedStackError, match="suzgun_stack_lstm"):
        compile_suzgun_baby_ntm(pn.tasks.get("reversal"))
    with pytest.raises(UnboundedStackError, match="fixed number of rows"):
        compile_suzgun_baby_ntm(sequence_copy(2))             # a queue: unbounded store
    with pytest.raises(CompileError, match="ns_rnn"):
        compile_suzgun_baby_ntm(pn.tasks.get("unmarked_reversal"))
    eps = DPDA(["q", "r"], "a", ["X"], {("q", "a", BOTTOM): ("r", ("X", BOTTOM)),
                                        ("r", EPSILON, "X"): ("q", ())}, "q", accepting=["q"])
    with pytest.raises(CompileError, match="ε"):
        compile_suzgun_baby_ntm(eps.bounded(2))
    with pytest.raises(CompileError, match="DFA"):
        compile_suzgun_baby_ntm("not a machine")
    for bad in ({"temperature": 0}, {"temperature": True}, {"temperature": float("nan")},
                {"gumbel": 1}, {"size": 0}, {"size": 2.0}, {"size": True},
                {"layout": "top"}, {"layout": "memory"}):
        with pytest.raises(InputError):
            compile_suzgun_baby_ntm(DyckKM(1, 2), **bad)
    assert requires_suzgun_baby_ntm(DyckKM(2, 2)) is None
    assert isinstance(requires_suzgun_baby_ntm(DyckKM(10**9, 3)), ResourceError)
    assert requires_suzgun_baby_ntm(EXAMPLE_SUZGUN_BABY_NTM) is None


@settings(max_examples=25, deadline=None)
@given(_dfa(), st.booleans(), st.integers(0, 2**16))
def test_stack_models_on_a_dfa_decode_from_the_window_run(machine, lstm, seed):
    """On a DFA (``control_only``) verify runs `forward_decoded` = the O(1)-per-step window run:
    the same logits and decoded states as `forward`, padding included."""
    compile_ = compile_suzgun_stack_lstm if lstm else compile_suzgun_stack_rnn
    net = compile_(machine)
    assert net.module.control_only
    rng = np.random.default_rng(seed)
    ids = torch.as_tensor(rng.integers(-1, len(machine.alphabet), (4, 12)))
    ids[0] = torch.as_tensor(rng.integers(0, len(machine.alphabet), 12))
    full, fast = net.module.forward(ids), net.module.forward_decoded(ids)
    assert torch.equal(full[1], fast[1])
    np.testing.assert_array_equal(net.decode(full[0])["state"], net.decode(fast[0])["state"])


def test_stack_model_on_a_dfa_long_strings_and_a_mutant():
    m = pn.tasks.get("cycle_navigation")
    net = compile_suzgun_stack_rnn(m)
    ids, _ = pn.tasks.long_strings("cycle_navigation", 16, 2000, 0)
    assert pn.verify(m, net, strings=ids, max_length=None, samples=0, long_samples=0,
                     dtype="float32").ok
    with torch.no_grad():                  # a wrong readout bias: verify reports, never raises
        net.module.W_y.bias.add_(1e4)
    rep = pn.verify(m, net, strings=ids, max_length=None, samples=0, long_samples=0)
    assert not rep.ok and rep.counterexample is not None
