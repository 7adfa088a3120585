"""`GrefenstetteRNN`'s fused training path (one autograd node, backward through time written out)
equals its step-by-step autograd path (``fused = False``): states, logits and every parameter's
gradient, float64, random models (strengths beyond 1, u > 1 pops), random padding, and compiled
(saturated: ties in Eq. 3's min) networks."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.store import sequence_copy
from pdanet.models import GrefenstetteRNN
from pdanet.models.grefenstette import compile_grefenstette


def both_paths(model, ids, seed=0):
    out = []
    for fused in (True, False):
        model.fused = fused
        model.zero_grad()
        states, logits = model(ids)
        g = torch.Generator().manual_seed(seed)
        loss = ((logits * torch.randn(logits.shape, generator=g, dtype=logits.dtype)).sum()
                + (states * torch.randn(states.shape, generator=g, dtype=logits.dtype)).sum())
        loss.backward()
        out.append((states.detach(), logits.detach(),
                    {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    return out


def assert_same(a, b):
    (s1, l1, g1), (s2, l2, g2) = a, b
    torch.testing.assert_close(s1, s2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(l1, l2, rtol=1e-12, atol=1e-12)
    assert g1.keys() == g2.keys() and g1
    for n in g1:
        torch.testing.assert_close(g1[n], g2[n], rtol=1e-9, atol=1e-10, msg=n)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["lstm", "rnn"]), st.sampled_from(["stack", "queue"]),
       st.integers(1, 4), st.integers(1, 9), st.floats(0.0, 0.5), st.integers(0, 2**16))
def test_fused_equals_stepwise(controller, store, B, T, pad, seed):
    torch.manual_seed(seed)
    model = GrefenstetteRNN(4, 6, 3, 5, controller=controller, store=store).double()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3)                                    # strengths beyond 1, pops u > 1
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 4, (B, T), generator=g)
    ids[torch.rand(B, T, generator=g) < pad] = -1        # padding anywhere
    assert_same(*both_paths(model, ids, seed))


@pytest.mark.parametrize("store", ["stack", "queue"])
@pytest.mark.parametrize("controller", ["lstm", "rnn"])
@pytest.mark.parametrize("noise", [0.0, 1e-3])
def test_fused_equals_stepwise_on_compiled_networks(store, controller, noise):
    machine = (sequence_copy(3, "queue") if store == "queue" else
               pn.tasks.get("sequence_reversal", vocab_size=3, store="stack"))
    module = compile_grefenstette(machine, controller, dtype=torch.float64).module
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(noise * torch.randn_like(p))
    ids = torch.randint(0, module.embedding.num_embeddings, (3, 8),
                        generator=torch.Generator().manual_seed(1))
    ids[1, 5:] = -1
    a, b = both_paths(module, ids)
    if noise == 0:                                       # saturated: bit-exact states
        assert torch.equal(a[0], b[0])
    assert_same(a, b)
