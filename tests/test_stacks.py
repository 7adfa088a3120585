"""Differentiable memories: the paper's worked example, the superposition stack's live band,
step/scan/resume agreement, the Store protocol and discrete semantics on saturated actions
(agreement with the per-cell references: tests/test_store_references.py)."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.constructions.stacks import (
    BabyNTM,
    BabyNTMActions,
    DequeActions,
    InputBuffer,
    NeuralDeQue,
    NeuralQueue,
    NeuralStack,
    OutputBuffer,
    StackActions,
    Store,
    SuperpositionActions,
    SuperpositionStack,
    SuzgunActions,
    SuzgunStack,
    check_store,
)
from pdanet.constructions.stacks.superposition import live_band
from pdanet.errors import InputError

F64 = torch.float64
SETTINGS = settings(max_examples=20, deadline=None)
shapes = st.tuples(st.integers(1, 3), st.integers(1, 6), st.integers(1, 3))   # B, T, m


def leaves(*tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def assert_same_values_and_grads(out, expected, inputs, gen):
    """Equal outputs, and equal gradients of one random linear functional of them."""
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    probe = torch.randn(out.shape, dtype=F64, generator=gen)
    got = torch.autograd.grad((out * probe).sum(), inputs, allow_unused=True)
    want = torch.autograd.grad((expected * probe).sum(), inputs, allow_unused=True)
    for x, g, w in zip(inputs, got, want):
        g = torch.zeros_like(x) if g is None else g
        w = torch.zeros_like(x) if w is None else w
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def stratified_actions(B, T, m, gen):
    push = torch.rand(B, T, dtype=F64, generator=gen)
    pop = 1.5 * torch.rand(B, T, dtype=F64, generator=gen)       # u > 1 allowed (multi-pop)
    value = torch.randn(B, T, m, dtype=F64, generator=gen)
    return push, pop, value


# --- Grefenstette et al. (2015), Fig. 1a -------------------------------------------------------

def test_stack_worked_example_fig1a():
    push = torch.tensor([[0.8, 0.5, 0.9]], dtype=F64)
    pop = torch.tensor([[0.0, 0.1, 0.9]], dtype=F64)
    value = torch.tensor([[[1.0], [2.0], [3.0]]], dtype=F64)
    stack = NeuralStack()
    final, readings = stack.scan(StackActions(push, pop, value))
    for got, want in zip(readings.flatten().tolist(), [0.8, 1.5, 2.8]):
        assert math.isclose(got, want, rel_tol=2e-16, abs_tol=0), (got, want)
    for got, want in zip(final.strengths.flatten().tolist(), [0.3, 0.0, 0.9]):
        assert math.isclose(got, want, rel_tol=2e-16, abs_tol=1e-300), (got, want)
    state = stack.init_state(1, 1, 3, F64)
    for t in range(3):
        state, r = stack.step(state, StackActions(push[:, t], pop[:, t], value[:, t]))
        assert r.item() == readings[0, t].item()
    assert [c.flatten().tolist() for c in stack.contents(final)] == [[3.0]]


# --- the live band of the superposition stack ---------------------------------------------------
# (agreement of every store with its per-cell reference: tests/test_store_references.py)

@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 40), depth=st.one_of(st.none(), st.integers(1, 8)),
       cut=st.integers(0, 40), B=st.integers(1, 3))
def test_superposition_band_equals_full_update(seed, T, depth, cut, B):
    """`forward` updates only the live band; on longer runs, with and without a depth limit,
    resumed after ``cut`` steps, with and without autograd, its readings and gradients are those
    of the full update (`scan`)."""
    gen = torch.Generator().manual_seed(seed)
    m, cut = 2, min(cut, T)
    ops, value = leaves(torch.softmax(3 * torch.randn(B, T, 3, dtype=F64, generator=gen), -1),
                        torch.randn(B, T, m, dtype=F64, generator=gen))
    stack = SuperpositionStack(depth)
    want = stack.scan(SuperpositionActions(ops, value))[1]
    first, r1 = stack.scan(SuperpositionActions(ops[:, :cut], value[:, :cut]),
                           stack.init_state(B, m, T, F64))
    got = torch.cat([r1, stack(SuperpositionActions(ops[:, cut:], value[:, cut:]), first)], 1)
    assert_same_values_and_grads(got, want, [ops, value], gen)
    with torch.no_grad():
        first, r1 = stack.scan(SuperpositionActions(ops[:, :cut], value[:, :cut]),
                               stack.init_state(B, m, T, F64))
        plain = torch.cat([r1, stack(SuperpositionActions(ops[:, cut:], value[:, cut:]), first)], 1)
    torch.testing.assert_close(plain, want.detach(), rtol=1e-12, atol=1e-12)


def test_live_band_is_the_cells_that_can_reach_the_top():
    assert live_band(6, 0, 6) == [1, 2, 3, 3, 2, 1]
    assert live_band(7, 0, 2) == [1, 2, 2, 2, 2, 2, 1]
    assert live_band(3, 4, 9) == [3, 2, 1]
    for steps, live, depth in ((9, 0, 9), (12, 3, 5), (5, 5, 5)):
        band = live_band(steps, live, depth)
        assert all(abs(a - b) <= 1 for a, b in itertools.pairwise(band))
        assert all(1 <= L <= depth for L in band)


def test_superposition_forward_checks_its_input():
    stack = SuperpositionStack()
    state = stack.init_state(2, 3, 4)
    state, _ = stack.scan(SuperpositionActions(torch.full((2, 3, 3), 1 / 3), torch.ones(2, 3, 3)),
                          state)
    with pytest.raises(InputError, match="max_time"):
        stack(SuperpositionActions(torch.full((2, 2, 3), 1 / 3), torch.ones(2, 2, 3)), state)
    with pytest.raises(InputError, match="value"):
        stack(SuperpositionActions(torch.full((2, 1, 3), 1 / 3), torch.ones(2, 1, 4)), state)
    with pytest.raises(InputError, match="ops"):
        stack(SuperpositionActions(torch.full((2, 3), 1 / 3), torch.ones(2, 3)))
    assert stack(SuperpositionActions(torch.ones(2, 0, 3), torch.ones(2, 0, 3))).shape == (2, 0, 3)


def test_stack_gradcheck_against_finite_differences():
    gen = torch.Generator().manual_seed(0)
    inputs = leaves(*stratified_actions(2, 4, 2, gen))
    assert torch.autograd.gradcheck(lambda *a: NeuralStack()(StackActions(*a)), inputs)


# --- step, scan and resumed scans agree ---------------------------------------------------------

def _step_all(module, state, actions, steps):
    readings = []
    for t in range(steps):
        state, r = module.step(state, type(actions)(*(a[:, t] for a in actions)))
        readings.append(r)
    return state, readings


@pytest.mark.parametrize("module", [NeuralStack(), NeuralQueue()])
def test_stratified_step_equals_scan_and_resume(module):
    gen = torch.Generator().manual_seed(1)
    B, T, m = 3, 7, 2
    actions = StackActions(*stratified_actions(B, T, m, gen))
    final, readings = module.scan(actions)
    state, steps = _step_all(module, module.init_state(B, m, T, F64), actions, T)
    torch.testing.assert_close(torch.stack(steps, 1), readings, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(state.strengths, final.strengths, rtol=1e-13, atol=1e-13)
    first, r1 = module.scan(StackActions(*(a[:, :3] for a in actions)),
                            module.init_state(B, m, T, F64))
    second, r2 = module.scan(StackActions(*(a[:, 3:] for a in actions)), first)
    torch.testing.assert_close(torch.cat([r1, r2], 1), readings, rtol=1e-13, atol=1e-13)
    assert second.time == T


def test_deque_step_equals_scan_and_resume():
    gen = torch.Generator().manual_seed(2)
    B, T, m = 2, 6, 3
    actions = DequeActions(*stratified_actions(B, T, m, gen), *stratified_actions(B, T, m, gen))
    dq = NeuralDeQue()
    final, readings = dq.scan(actions)
    state, steps = _step_all(dq, dq.init_state(B, m, T, F64), actions, T)
    torch.testing.assert_close(torch.stack([r.top for r in steps], 1), readings.top)
    torch.testing.assert_close(torch.stack([r.bottom for r in steps], 1), readings.bottom)
    torch.testing.assert_close(state.values, final.values)
    first, r1 = dq.scan(DequeActions(*(a[:, :2] for a in actions)), dq.init_state(B, m, T, F64))
    _, r2 = dq.scan(DequeActions(*(a[:, 2:] for a in actions)), first)
    torch.testing.assert_close(torch.cat([r1.top, r2.top], 1), readings.top)
    torch.testing.assert_close(torch.cat([r1.bottom, r2.bottom], 1), readings.bottom)


@pytest.mark.parametrize("module,k", [(SuperpositionStack(), 3), (SuperpositionStack(2), 3),
                                      (SuzgunStack(3), 2), (BabyNTM(4), 5)])
def test_superposed_step_equals_scan_and_resume(module, k):
    gen = torch.Generator().manual_seed(3)
    B, T, m = 2, 6, 2
    cls = {3: SuperpositionActions, 2: SuzgunActions, 5: BabyNTMActions}[k]
    actions = cls(torch.softmax(torch.randn(B, T, k, dtype=F64, generator=gen), -1),
                  torch.randn(B, T, m, dtype=F64, generator=gen))
    final, readings = module.scan(actions)
    state, steps = _step_all(module, module.init_state(B, m, T, F64), actions, T)
    torch.testing.assert_close(torch.stack(steps, 1), readings)
    for field in dataclasses.fields(final):
        torch.testing.assert_close(getattr(state, field.name), getattr(final, field.name))
    first, r1 = module.scan(cls(*(a[:, :4] for a in actions)), module.init_state(B, m, T, F64))
    _, r2 = module.scan(cls(*(a[:, 4:] for a in actions)), first)
    torch.testing.assert_close(torch.cat([r1, r2], 1), readings)


# --- saturated actions behave like discrete data structures -------------------------------------

def _ids(values):
    return [int(v[0]) for v in values]


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 12))
def test_saturated_stack_and_queue_are_lists(seed, T):
    gen = torch.Generator().manual_seed(seed)
    B = 4
    push = torch.randint(0, 2, (B, T), generator=gen).to(F64)
    pop = torch.randint(0, 4, (B, T), generator=gen).to(F64)       # pop up to 3 items at once
    value = torch.arange(1, T + 1, dtype=F64).view(1, T, 1).expand(B, T, 1)
    for module, is_stack in ((NeuralStack(), True), (NeuralQueue(), False)):
        final, readings = module.scan(StackActions(push, pop, value))
        for b in range(B):
            items: list[int] = []
            for t in range(T):
                for _ in range(int(pop[b, t])):
                    if items:
                        items.pop(-1 if is_stack else 0)
                if push[b, t]:
                    items.append(t + 1)
                expected = (items[-1] if is_stack else items[0]) if items else 0
                assert readings[b, t, 0].item() == expected
            assert _ids(module.contents(final)[b]) == items


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 10))
def test_saturated_deque_is_collections_deque(seed, T):
    gen = torch.Generator().manual_seed(seed)
    B = 4
    bits = [torch.randint(0, 2, (B, T), generator=gen).to(F64) for _ in range(4)]
    v_top = torch.arange(1, T + 1, dtype=F64).view(1, T, 1).expand(B, T, 1)
    v_bot = -v_top
    dq = NeuralDeQue()
    final, readings = dq.scan(DequeActions(bits[0], bits[1], v_top, bits[2], bits[3], v_bot))
    for b in range(B):
        items: collections.deque[int] = collections.deque()
        for t in range(T):
            if bits[1][b, t] and items:
                items.pop()
            if bits[3][b, t] and items:
                items.popleft()
            if bits[2][b, t]:
                items.appendleft(-(t + 1))
            if bits[0][b, t]:
                items.append(t + 1)
            assert readings.top[b, t, 0].item() == (items[-1] if items else 0)
            assert readings.bottom[b, t, 0].item() == (items[0] if items else 0)
        assert _ids(dq.contents(final)[b]) == list(items)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 12),
       depth=st.one_of(st.none(), st.integers(1, 4)), noop=st.booleans())
def test_one_hot_superposition_is_a_discrete_stack(seed, T, depth, noop):
    gen = torch.Generator().manual_seed(seed)
    B = 4
    k = 3 if noop else 2
    choice = torch.randint(0, k, (B, T), generator=gen)
    ops = torch.nn.functional.one_hot(choice, k).to(F64)
    value = torch.arange(1, T + 1, dtype=F64).view(1, T, 1).expand(B, T, 1)
    if noop:
        module, cls, push_id, pop_id = SuperpositionStack(depth), SuperpositionActions, 0, 2
    else:
        depth = depth or T
        module, cls, push_id, pop_id = SuzgunStack(depth), SuzgunActions, 0, 1
    final, readings = module.scan(cls(ops, value))
    for b in range(B):
        items: list[int] = []
        for t in range(T):
            if choice[b, t] == push_id:
                items.append(t + 1)
                if depth is not None and len(items) > depth:
                    items.pop(0)                       # the bottom cell falls off
            elif choice[b, t] == pop_id and items:
                items.pop()
            assert readings[b, t, 0].item() == (items[-1] if items else 0)
        assert _ids(module.contents(final)[b]) == items


def test_saturated_buffers_read_and_write_sequences():
    inputs = torch.arange(1, 6, dtype=F64).view(1, 5, 1).repeat(2, 1, 1)
    pops = torch.tensor([[0, 1, 0, 1, 1, 1, 1], [0, 0, 1, 1, 0, 1, 0]], dtype=F64)
    xs = InputBuffer()(inputs, pops, torch.tensor([5, 3]))
    assert xs[..., 0].tolist() == [[1, 2, 2, 3, 4, 5, 0], [1, 1, 2, 3, 3, 0, 0]]
    ys = torch.arange(10, 16, dtype=F64).view(1, 6, 1).repeat(2, 1, 1)
    keep = torch.tensor([[1, 0, 1, 1, 0, 1], [0, 0, 0, 1, 0, 0]], dtype=F64)
    out = OutputBuffer()(ys, keep, 5)
    assert out[..., 0].tolist() == [[10, 12, 13, 15, 0], [13, 0, 0, 0, 0]]
    state = OutputBuffer().scan(ys, keep)
    assert [_ids(c) for c in OutputBuffer().contents(state)] == [[10, 12, 13, 15], [13]]


def test_output_buffer_step_equals_scan():
    gen = torch.Generator().manual_seed(4)
    ys, o = torch.randn(2, 4, 3, dtype=F64, generator=gen), torch.rand(2, 4, dtype=F64, generator=gen)
    ob = OutputBuffer()
    state = ob.init_state(2, 3, 4, F64)
    for t in range(4):
        state = ob.step(state, ys[:, t], o[:, t])
    torch.testing.assert_close(ob.drain(state, 4), ob(ys, o, 4))


# --- the Store protocol: one class for users and compiled controllers ----------------------------

STORES = (NeuralStack(), NeuralQueue(), NeuralDeQue(), SuperpositionStack(), SuperpositionStack(2),
          SuzgunStack(), SuzgunStack(2))
CODES = [[0, 1], [1, 0], [1, 1], [0, 0]]          # three symbols and the empty code (row G)


@pytest.mark.parametrize("store", STORES, ids=lambda s: f"{type(s).__name__}({s.depth})")
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_every_store_run_is_its_discrete_semantics(store, dtype):
    """Lemma 2: on every saturated op sequence the in-place run reads and holds, bit for bit,
    what `apply` says."""
    assert isinstance(store, Store)
    assert check_store(store, CODES, dtype, steps=3) is None


def test_check_store_names_a_mismatch():
    wrong = [[0, 0], [1, 0], [1, 1], [0, 1]]      # symbol 0 codes as the empty reading
    msg = check_store(NeuralStack(), wrong, torch.float32, steps=2)
    assert msg is not None and "NeuralStack" in msg


def test_actions_and_apply_are_the_op_encoding():
    assert NeuralStack().actions("replace") == (1, 1)
    assert NeuralQueue().apply((1, 2), "replace", 3) == (2, 3)          # dequeue front, enqueue
    assert NeuralDeQue().actions("pop_bottom") == (0, 0, 0, 1)
    assert NeuralDeQue().apply((1, 2), "push_bottom", 0) == (0, 1, 2)
    assert SuperpositionStack().actions("noop") == (0, 1, 0)
    assert SuperpositionStack().apply((1,), "replace", 2) is None       # two steps on this stack
    assert SuzgunStack(2).apply((1, 2), "push", 0) == (2, 0)            # the bottom falls off
    assert SuzgunStack().apply((), "pop", -1) == ()
    with pytest.raises(InputError, match="noop"):
        SuzgunStack().actions("noop")


def _run_readings(store, act, value, codes):
    B, T = act.shape[:2]
    run = store.run(B, T, value, codes)
    out = []
    for t in range(T):
        out.append(run.step(act[:, t], value[:, t]))
        if run.k == run.BLOCK:
            run.flush()
    return torch.stack(out, 1)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 40))
def test_run_and_scan_are_one_implementation(seed, T):
    """Unsaturated actions: the in-place run gives the public `scan`'s readings and gradients."""
    gen = torch.Generator().manual_seed(seed)
    B, m = 3, 2
    codes = [[1, 0], [0, 1], [0, 0]]
    for store in (NeuralStack(), NeuralQueue(), NeuralDeQue(), SuperpositionStack(),
                  SuzgunStack()):
        C = len(store.channels)
        act = torch.rand(B, T, C, dtype=F64, generator=gen)
        if store.name != "grefenstette":
            act = torch.softmax(3 * act, -1)
        value = torch.randn(B, T, store.slots * m, dtype=F64, generator=gen)
        act, value = leaves(act, value)
        if isinstance(store, NeuralDeQue):
            want = torch.cat(store.scan(DequeActions(
                act[..., 0], act[..., 1], value[..., :m], act[..., 2], act[..., 3],
                value[..., m:]))[1], -1)
        elif store.name == "grefenstette":
            want = store.scan(StackActions(act[..., 0], act[..., 1], value))[1]
        else:
            want = store.scan(type(store)._actions(act, value))[1]
        got = _run_readings(store, act, value, codes)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
        probe = torch.randn(got.shape, dtype=F64, generator=gen)
        g = torch.autograd.grad((got * probe).sum(), [act, value])
        w = torch.autograd.grad((want * probe).sum(), [act, value])
        for x, y in zip(g, w):
            torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-9)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 70), depth=st.one_of(st.none(), st.integers(1, 4)),
       saturated=st.booleans())
def test_superposition_run_without_autograd_is_the_same_update(seed, T, depth, saturated):
    """Without autograd the run updates on two fixed buffers: the same readings and read-back,
    bit for bit, as the run under autograd (and across BLOCK flushes)."""
    gen = torch.Generator().manual_seed(seed)
    B, m = 3, 2
    if saturated:
        act = torch.nn.functional.one_hot(torch.randint(0, 3, (B, T), generator=gen), 3).float()
        value = torch.randint(0, 2, (B, T, m), generator=gen).float()
    else:
        act = torch.softmax(3 * torch.randn(B, T, 3, generator=gen), -1)
        value = torch.rand(B, T, m, generator=gen)
    store, codes = SuperpositionStack(depth), [[1, 0], [0, 1], [1, 1], [0, 0]]
    results = []
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            run = store.run(B, T, value, codes)
            readings, backs = [], []
            for t in range(T):
                readings.append(run.step(act[:, t], value[:, t]))
                if run.k == run.BLOCK:
                    backs.append(run.flush())
            if run.k:
                backs.append(run.flush())
            results.append((torch.stack(readings, 1).detach(), backs))
    (r1, b1), (r2, b2) = results
    assert torch.equal(r1, r2)
    for (c1, n1), (c2, n2) in zip(b1, b2, strict=True):
        assert torch.equal(c1, c2) and torch.equal(n1, n2)
    torch.testing.assert_close(r2, store.scan(SuperpositionActions(act, value))[1])


# --- errors --------------------------------------------------------------------------------------

def test_bad_shapes_and_overflow_raise_input_error():
    stack = NeuralStack()
    state = stack.init_state(2, 3, 1)
    with pytest.raises(InputError, match="value"):
        stack.step(state, StackActions(torch.ones(2), torch.zeros(2), torch.ones(2, 4)))
    state, _ = stack.step(state, StackActions(torch.ones(2), torch.zeros(2), torch.ones(2, 3)))
    with pytest.raises(InputError, match="max_time"):
        stack.step(state, StackActions(torch.ones(2), torch.zeros(2), torch.ones(2, 3)))
    with pytest.raises(InputError, match="dtype|float64"):
        stack.step(stack.init_state(2, 3, 2, torch.float32),
                   StackActions(torch.ones(2, dtype=F64), torch.zeros(2), torch.ones(2, 3)))
    with pytest.raises(InputError, match="ops"):
        SuperpositionStack(3)(SuperpositionActions(torch.ones(2, 4, 2), torch.ones(2, 4, 3)))
    with pytest.raises(InputError, match="max_time"):
        SuperpositionStack().init_state(2, 3)
    with pytest.raises(InputError, match="lengths"):
        InputBuffer().init_state(torch.ones(2, 3, 1), torch.tensor([4, 1]))
    with pytest.raises(InputError, match="depth"):
        SuzgunStack(0)
