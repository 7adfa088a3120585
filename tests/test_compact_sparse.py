"""The sparse form of the compact construction (`compile_compact(..., sparse=True)`,
`SparseRecurrentNet`): its integer program equals the dense one entry for entry, its float weights
densify to the dense module's, it agrees with the bounded machine on every string up to length 6
(Elman and LSTM, random machines), it is chosen automatically over the memory limit, it runs
through `pn.verify`, `with_scale` and `save_network`/`load_network`, and bad input is refused
with typed errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet import limits
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pda import DPDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.tasks import dusell2021
from pdanet.constructions import compact, realtime
from pdanet.constructions.modules import SparseRecurrentNet
from pdanet.errors import InputError, ResourceError

OPS = ("noop", "push", "pop", "replace")


def random_machine(seed: int, n: int, G: int, k: int, kind: str):
    """A random real-time DPDA (kind "final_state" / "empty_stack") or DPDT ("dpdt"): n states,
    G stack symbols, k input symbols; each (state, symbol, top) has a move with probability
    11/12 (⊥ only kept or pushed on)."""
    rng = np.random.default_rng(seed)
    sigma, gamma = "abc"[:k], "XYZW"[:G]
    t: dict = {}
    for q in range(n):
        for a in sigma:
            same = rng.random() < 0.3          # one move whatever the top: "any written code"
            one = (OPS[rng.integers(4)], int(rng.integers(n)), gamma[rng.integers(G)])
            for x in (BOTTOM, *gamma):
                if rng.random() < 1 / 12 and not (same and x is not BOTTOM):
                    continue
                op = OPS[rng.integers(2)] if x is BOTTOM else OPS[rng.integers(4)]
                q2, y = int(rng.integers(n)), gamma[rng.integers(G)]
                if same and x is not BOTTOM:
                    op, q2, y = one
                pushed = {"noop": (x,), "push": (y, x), "pop": (), "replace": (y,)}[op]
                t[(q, a, x)] = ((q2, (EPSILON, "u", "v")[rng.integers(3)], pushed)
                                if kind == "dpdt" else (q2, pushed))
    if kind == "dpdt":
        return DPDT(range(n), sigma, "uv", gamma, t, 0, name=f"random_dpdt_{seed}")
    acc = {q for q in range(n) if rng.random() < 0.5} if kind == "final_state" else ()
    return DPDA(range(n), sigma, gamma, t, 0, accepting=acc, acceptance=kind,
                name=f"random_dpda_{seed}")


machines = st.builds(random_machine, st.integers(0, 2**32 - 1), st.integers(1, 5),
                     st.integers(1, 4), st.integers(1, 3),
                     st.sampled_from(("final_state", "empty_stack", "dpdt")))


def marked_reversal(k: int) -> DPDA:
    """w#w^R over k symbols (the benchmark's machine)."""
    return dusell2021.marked_reversal_machine(tuple(f"s{i}" for i in range(k)))


def programs(machine, m: int):
    bounded = machine.bounded(m)
    view = realtime.table(bounded.machine)
    cases = compact.lookup_cases(view, m, view.empty_stack, tuple(view.accepting))
    transducer = isinstance(machine, DPDT)
    return (compact.build_program(cases, view, m, view.empty_stack, transducer),
            compact.build_sparse_program(cases, view, m, view.empty_stack, transducer), cases)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 7))
def test_sparse_program_equals_dense(machine, m):
    """S + G·F is the dense update entry for entry; U, biases, readout, A·1 and W agree; the
    entry count is within `sparse_entries` (what the memory estimate counts)."""
    dense, sparse, cases = programs(machine, m)
    back = sparse.dense()
    assert np.array_equal(back.A, dense.A.astype(np.int64))
    assert np.array_equal(back.U, dense.U)
    for name in ("b2", "R", "r2", "u0"):
        assert np.array_equal(getattr(back, name), getattr(dense, name)), name
    assert np.array_equal(sparse.row_sums(), dense.A.astype(np.int64).sum(1))
    assert sparse.row_norm() == compact._row_norm(dense)
    stored = len(sparse.S[0]) + len(sparse.G[0]) + len(sparse.F[0]) + len(sparse.U[0])
    assert stored <= compact.sparse_entries(cases, dense.layout)
    rows, cols, _ = sparse.S                          # coalesced: sorted, no duplicates
    key = rows * dense.layout.H + cols
    assert np.all(np.diff(key) > 0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 5))
def test_sparse_networks_agree_with_machine(machine, m):
    """Sparse Elman and LSTM: the same float weights as the dense module (densified), the same
    decisions on every string up to length 6 (brute force through `pn.verify`), and on random
    strings the states agree with the dense module's to float rounding."""
    bounded = machine.bounded(m)
    rng = np.random.default_rng(0)
    ids = torch.as_tensor(rng.integers(-1, len(machine.alphabet), (20, 12)))
    for target in ("elman", "lstm"):
        net = pn.compile(bounded, target=target, method="compact", sparse=True)
        dense = pn.compile(bounded, target=target, method="compact", sparse=False)
        assert isinstance(net.module, SparseRecurrentNet) and net.info["sparse"] is True
        assert dense.info["sparse"] is False
        assert net.hidden_units == dense.hidden_units == net.bound_value
        assert net.scale == dense.scale
        a, b = net.module.blocks(), dense.module.blocks()
        for f in ("embedding", "weight_ih", "weight_hh", "bias_ih", "bias_hh", "h0",
                  "readout_weight", "readout_bias"):
            assert torch.equal(getattr(a, f), getattr(b, f)), f
        report = pn.verify(bounded, net, max_length=6, samples=10, sample_lengths=(7, 12),
                           long_samples=1, long_length=25, overlap=False)
        assert report.ok, report.counterexample
        s1, l1 = net.forward(ids)
        s2, l2 = dense.forward(ids)
        assert torch.allclose(s1, s2, atol=1e-5) and torch.allclose(l1, l2, rtol=1e-5, atol=1e-4)
        assert np.array_equal(net.readout(l1), dense.readout(l2))
        assert {k: v for k, v in net.decode(s1).items()}.keys() == dense.decode(s2).keys()
        for k, v in net.decode(s1).items():
            assert np.array_equal(v, dense.decode(s2)[k]), k


def test_step_and_preactivations_match_forward():
    machine = random_machine(7, 4, 3, 3, "final_state")
    net = pn.compile(machine.bounded(4), target="lstm", method="compact", sparse=True)
    dense = pn.compile(machine.bounded(4), target="lstm", method="compact", sparse=False)
    ids = torch.tensor([[0, 1, 2, 1, 0], [2, 2, 1, 0, 1]])
    states, _ = net.forward(ids)
    mod = net.module
    h, c = mod.h0.detach().expand(2, -1), mod.c0.detach().expand(2, -1)
    for t in range(ids.shape[1]):
        x = mod.embedding.weight[ids[:, t]].detach()
        z = mod.preactivations(x, h)
        z_dense = dense.module.preactivations(x, h)
        assert torch.allclose(z, z_dense, rtol=1e-6, atol=1e-3)
        h, c = mod.step((h, c), ids[:, t])
        assert torch.allclose(h, states[:, t + 1], atol=1e-6)
    logits = mod.column_logits(states[:, -1].T)
    assert torch.allclose(logits.T, mod.logits(states[:, -1]))


def test_automatic_choice_follows_the_memory_limit():
    bounded = marked_reversal(8).bounded(30)
    assert pn.compile(bounded, target="elman", method="compact").info["sparse"] is False
    H = pn.compile(bounded, target="elman", method="compact").hidden_units
    dense_bytes = compact.estimate_bytes(H, False, 9, 1)
    with limits.raised(max_bytes=dense_bytes - 1):
        net = pn.compile(bounded, target="elman", method="compact")
        assert net.info["sparse"] is True and isinstance(net.module, SparseRecurrentNet)
        with pytest.raises(ResourceError, match="sparse=True"):
            pn.compile(bounded, target="elman", method="compact", sparse=False)
    with limits.raised(max_bytes=10_000), pytest.raises(ResourceError, match="sparse form"):
        pn.compile(bounded, target="lstm", method="compact")     # the sparse form is over too


def test_marked_reversal_128_sparse_agrees_with_dense_at_depth_64():
    """|Σ| = 129 at m = 64: decisions and decoded stacks equal on random strings that keep the
    stack busy (writing then reading back)."""
    machine = marked_reversal(128)
    bounded = machine.bounded(64)
    net = pn.compile(bounded, target="elman", method="compact", sparse=True)
    dense = pn.compile(bounded, target="elman", method="compact", sparse=False)
    rng = np.random.default_rng(1)
    w = rng.integers(0, 128, (30, 40))
    ids = np.concatenate([w, np.full((30, 1), 128), w[:, ::-1]], axis=1)
    ids[::3, -5:] = rng.integers(0, 129, (10, 5))             # some rejected
    s1, l1 = net.forward(ids)
    s2, l2 = dense.forward(ids)
    assert np.array_equal(net.readout(l1), dense.readout(l2))
    assert np.array_equal(net.decode(s1)["stack"], dense.decode(s2)["stack"])
    expected = bounded.run_batch(ids, np.full(len(ids), ids.shape[1]))
    assert np.array_equal(net.readout(l1), expected["output"])


def test_with_scale_and_float_weights_carry_the_indices():
    bounded = random_machine(3, 3, 2, 2, "empty_stack").bounded(3)
    net = pn.compile(bounded, target="elman", method="compact", sparse=True)
    floats = net.float_weights()
    idx = floats["rnn.weight_hh_indices"]
    assert idx.dtype == torch.int64 and idx.shape[0] == 2
    wide = net.with_scale(dtype="float64")
    assert wide.dtype == torch.float64
    assert torch.equal(wide.module.rnn.weight_hh_indices, net.module.rnn.weight_hh_indices)
    assert pn.verify(bounded, wide, max_length=5, samples=10, long_samples=1,
                     long_length=20).ok


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_export_round_trip(tmp_path, suffix):
    """The sparse layout (values and (2, nnz) int64 indices per block) is written as is; the
    network is rebuilt (sparse again: the same automatic choice) with the same weights."""
    bounded = marked_reversal(3).bounded(5)
    H = pn.compile(bounded, target="lstm", method="compact").hidden_units
    with limits.raised(max_bytes=compact.estimate_bytes(H, True, 4, 1) - 1):
        net = pn.compile(bounded, target="lstm", method="compact")
        assert net.info["sparse"] is True
        path = pn.save_network(net, tmp_path / f"net{suffix}")
        tensors, _ = pn.export.read_weights(path)
        assert tensors["rnn.weight_hh_indices"].dtype == torch.int64
        back = pn.load_network(path)
    assert isinstance(back.module, SparseRecurrentNet)
    assert back.info["weights_match_exact"] is True
    ids = torch.tensor([[0, 1, 3, 1, 0], [2, 3, 2, 0, 0]])
    assert torch.equal(back.forward(ids)[0], net.forward(ids)[0])


def test_typed_errors():
    bounded = marked_reversal(2).bounded(3)
    with pytest.raises(InputError, match="sparse="):
        pn.compile(bounded, target="elman", method="compact", sparse="yes")
    with pytest.raises(InputError, match="float32 or float64"):
        pn.compile(bounded, target="elman", method="compact", sparse=True, dtype="float16")
    net = pn.compile(bounded, target="elman", method="compact", sparse=True)
    half = net.with_scale(dtype="float16")
    with pytest.raises(InputError, match="float32 or float64"):
        half.forward(torch.tensor([[0, 1]]))
    with limits.raised(max_bytes=1000):
        with pytest.raises(ResourceError, match="max_batch_steps"):
            net.forward(torch.zeros((4, 50), dtype=torch.long))
        with pytest.raises(ResourceError, match="densifying"):
            net.module.blocks()
    with pytest.raises(InputError, match="outside"):
        SparseRecurrentNet("rnn", 2, 2, 3, 1, 0, {"weight_ih": [[0], [5]], "weight_hh": [[], []],
                                                  "share_out": [[], []], "share_in": [[], []]})
    with pytest.raises(InputError, match="blocks"):
        SparseRecurrentNet("rnn", 2, 2, 3, 1, 0, {"weight_ih": [[0], [1]]})
    with pytest.raises(InputError, match="cell"):
        SparseRecurrentNet("gru", 2, 2, 3, 1, 0, {})
    with pytest.raises(InputError, match="dense_weights"):
        net.module.dense_weights("bias")
