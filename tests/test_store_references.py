"""Every store's readings (and final contents) equal a literal per-cell implementation of its
paper's equations (`pdanet.constructions.stacks.reference`) on random actions: values and the
gradients of a random projection, float64.

One row per (store path, reference): the public ``scan``/``forward`` of each module, resumed
scans, and the in-place ``run`` that compiled controllers drive. A new store is one more row."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
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
    SuperpositionActions,
    SuperpositionStack,
    SuzgunActions,
    SuzgunStack,
)
from pdanet.constructions.stacks import reference as ref

F64 = torch.float64


def leaves(*tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def flat(*parts):
    return torch.cat([p.reshape(-1) for p in parts])


def per_batch(B, fn):
    """Stack ``fn(b)`` over the batch (fn returns one tensor per batch element)."""
    return torch.stack([fn(b) for b in range(B)])


def strat(B, T, m, gen):
    push = torch.rand(B, T, dtype=F64, generator=gen)
    pop = 1.5 * torch.rand(B, T, dtype=F64, generator=gen)        # u > 1 pops several cells
    return push, pop, torch.randn(B, T, m, dtype=F64, generator=gen)


def softmax_ops(B, T, k, gen):
    return torch.softmax(3 * torch.randn(B, T, k, dtype=F64, generator=gen), -1)


def codes_for(m):
    """A symbol code table for `Store.run` (one-hot rows, then the empty code); the readings do
    not depend on it."""
    return np.vstack([np.eye(m), np.zeros((1, m))])


def run_readings(store, act, value):
    """Readings (B, T, slots·m) of ``store.run`` stepped over ``act`` (B, T, C), ``value``."""
    B, T = act.shape[:2]
    m = value.shape[-1] // store.slots
    run = store.run(B, T, value, codes_for(m))
    out = []
    for t in range(T):
        out.append(run.step(act[:, t], value[:, t]))
        if run.k == run.BLOCK:
            run.flush()
    return torch.stack(out, 1)


# --- the rows: (B, T, m, k, gen) -> (inputs, got, want) --------------------------------------------

def stratified_scan(module, reference):
    def case(B, T, m, k, gen):
        inputs = leaves(*strat(B, T, m, gen))
        final, readings = module.scan(StackActions(*inputs))
        per_b = [reference(*(x[b] for x in inputs)) for b in range(B)]
        want = flat(torch.stack([p[0] for p in per_b]), torch.stack([torch.stack(p[1]) for p in per_b]))
        return inputs, flat(readings, final.strengths), want
    return case


def deque_scan(B, T, m, k, gen):
    inputs = leaves(*strat(B, T, m, gen), *strat(B, T, m, gen))
    final, r = NeuralDeQue().scan(DequeActions(*inputs))
    per_b = [ref.deque(*(x[b] for x in inputs)) for b in range(B)]
    want = flat(*(torch.stack([p[i] for p in per_b]) for i in (0, 1)),
                torch.stack([torch.stack(p[2]) for p in per_b]))
    return inputs, flat(r.top, r.bottom, final.strengths[:, final.live()]), want


def superposition_paths(B, T, m, k, gen):
    """forward (the live band), scan (all cells, with the final state) and a scan resumed by a
    forward after k steps, each against the reference; depth k − 1 (0 = no limit)."""
    depth = None if k == 1 else k - 1
    inputs = leaves(softmax_ops(B, T, 3, gen), torch.randn(B, T, m, dtype=F64, generator=gen))
    stack = SuperpositionStack(depth)
    final, scanned = stack.scan(SuperpositionActions(*inputs))
    cut = min(k, T)
    first, r1 = stack.scan(SuperpositionActions(*(x[:, :cut] for x in inputs)),
                           stack.init_state(B, m, T, F64))
    r2 = stack(SuperpositionActions(*(x[:, cut:] for x in inputs)), first)
    per_b = [ref.superposition(inputs[0][b], inputs[1][b], depth) for b in range(B)]
    readings = torch.stack([p[0] for p in per_b])
    cells = torch.stack([torch.stack(p[1]) for p in per_b])
    got = flat(stack(SuperpositionActions(*inputs)), scanned, final.cells[:, :cells.shape[1]],
               torch.cat([r1, r2], 1))
    return inputs, got, flat(readings, readings, cells, readings)


def suzgun_scan(B, T, m, k, gen):
    depth = None if k == 1 else k - 1
    inputs = leaves(softmax_ops(B, T, 2, gen), torch.rand(B, T, m, dtype=F64, generator=gen))
    final, readings = SuzgunStack(depth).scan(SuzgunActions(*inputs))
    per_b = [ref.superposition(inputs[0][b], inputs[1][b], depth, noop=False) for b in range(B)]
    cells = torch.stack([torch.stack(p[1]) for p in per_b])
    return (inputs, flat(readings, final.cells[:, :cells.shape[1]]),
            flat(torch.stack([p[0] for p in per_b]), cells))


def baby_ntm_scan(B, T, m, k, gen):
    inputs = leaves(softmax_ops(B, T, 5, gen), torch.rand(B, T, m, dtype=F64, generator=gen))
    final, readings = BabyNTM(k).scan(BabyNTMActions(*inputs))
    per_b = [ref.baby_ntm(inputs[0][b], inputs[1][b], k) for b in range(B)]
    return (inputs, flat(readings, final.memory),
            flat(torch.stack([p[0] for p in per_b]), torch.stack([torch.stack(p[1]) for p in per_b])))


def input_buffer(B, T, m, k, gen):
    lengths = torch.randint(0, k + 1, (B,), generator=gen)
    inputs = leaves(torch.randn(B, k, m, dtype=F64, generator=gen),
                    torch.rand(B, T, dtype=F64, generator=gen))
    got = InputBuffer()(inputs[0], inputs[1], lengths)
    want = per_batch(B, lambda b: ref.input_buffer(inputs[0][b], int(lengths[b]), inputs[1][b])[0])
    return inputs, got, want


def output_buffer(B, T, m, k, gen):
    inputs = leaves(torch.randn(B, T, m, dtype=F64, generator=gen),
                    torch.rand(B, T, dtype=F64, generator=gen))
    got = OutputBuffer()(inputs[0], inputs[1], k)
    return inputs, got, per_batch(B, lambda b: ref.output_drain(inputs[0][b], inputs[1][b], k))


def stratified_run(store, reference):
    def case(B, T, m, k, gen):
        push, pop, value = inputs = leaves(*strat(B, T, m, gen))
        got = run_readings(store, torch.stack([push, pop], -1), value)
        return inputs, got, per_batch(B, lambda b: reference(push[b], pop[b], value[b])[0])
    return case


def deque_run(B, T, m, k, gen):
    inputs = leaves(*strat(B, T, m, gen), *strat(B, T, m, gen))
    pt, ut, vt, pb, ub, vb = inputs
    got = run_readings(NeuralDeQue(), torch.stack([pt, ut, pb, ub], -1), torch.cat([vt, vb], -1))
    per_b = [ref.deque(*(x[b] for x in inputs)) for b in range(B)]
    want = torch.cat([torch.stack([p[0] for p in per_b]), torch.stack([p[1] for p in per_b])], -1)
    return inputs, got, want


def superposed_run(store, noop):
    def case(B, T, m, k, gen):
        ops, value = inputs = leaves(softmax_ops(B, T, 3 if noop else 2, gen),
                                     torch.randn(B, T, m, dtype=F64, generator=gen))
        got = run_readings(store, ops, value)
        want = per_batch(B, lambda b: ref.superposition(ops[b], value[b], None, noop=noop)[0])
        return inputs, got, want
    return case


class Row(NamedTuple):
    name: str
    case: Callable


ROWS = [
    Row("NeuralStack.scan ~ stack (Grefenstette Eqs. 1-3)", stratified_scan(NeuralStack(), ref.stack)),
    Row("NeuralQueue.scan ~ queue (Eqs. 1, 4-5)", stratified_scan(NeuralQueue(), ref.queue)),
    Row("NeuralDeQue.scan ~ deque, both ends (Eqs. 6-11)", deque_scan),
    Row("SuperpositionStack forward/scan/resumed ~ superposition", superposition_paths),
    Row("SuzgunStack.scan ~ superposition without no-op", suzgun_scan),
    Row("BabyNTM.scan ~ baby_ntm", baby_ntm_scan),
    Row("InputBuffer ~ input_buffer (Hao et al.)", input_buffer),
    Row("OutputBuffer ~ output_drain (Hao et al.)", output_buffer),
    Row("NeuralStack.run ~ stack", stratified_run(NeuralStack(), ref.stack)),
    Row("NeuralQueue.run ~ queue", stratified_run(NeuralQueue(), ref.queue)),
    Row("NeuralDeQue.run ~ deque", deque_run),
    Row("SuperpositionStack.run ~ superposition", superposed_run(SuperpositionStack(), True)),
    Row("SuzgunStack.run ~ superposition without no-op", superposed_run(SuzgunStack(), False)),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
@settings(max_examples=20, deadline=None)
@given(B=st.integers(1, 3), T=st.integers(1, 6), m=st.integers(1, 3), k=st.integers(1, 5),
       seed=st.integers(0, 2**31 - 1))
def test_store_equals_its_papers_equations(row, B, T, m, k, seed):
    gen = torch.Generator().manual_seed(seed)
    inputs, got, want = row.case(B, T, m, k, gen)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    probe = torch.randn(got.shape, dtype=F64, generator=gen)
    g = torch.autograd.grad((got * probe).sum(), inputs, allow_unused=True)
    w = torch.autograd.grad((want * probe).sum(), inputs, allow_unused=True)
    assert any(x is not None for x in w)             # the projection reaches the inputs
    for x, a, b in zip(inputs, g, w):
        a = torch.zeros_like(x) if a is None else a
        b = torch.zeros_like(x) if b is None else b
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)

