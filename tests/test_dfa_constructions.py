"""DFA / Mealy constructions: network and machine agree step by step (exhaustively and on long
strings), unit counts equal their bounds, and bad input raises typed errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.dfa import DFA
from pdanet.constructions import dfa_rnn
from pdanet.errors import AutomatonError, CompileError, DeterminismError

TARGETS = [("elman", "minsky"), ("lstm", "minsky"), ("second_order", "omlin_giles"),
           ("elman", "compressed")]
MAX_STRINGS = 4096


def random_dfa(rng: np.random.Generator, n: int, k: int, kind: str, missing: float = 0.0) -> DFA:
    """A random DFA (states 0..n-1, symbols a, b, …), partial when `missing` > 0."""
    table = rng.integers(0, n, size=(n, k))
    table[rng.random((n, k)) < missing] = -1
    alphabet = "abcdefghij"[:k]
    accepting = np.flatnonzero(rng.random(n) < 0.4).tolist()
    if kind == "mealy":
        n_out = int(rng.integers(1, 4))
        return DFA.from_table(table, alphabet, 0, accepting,
                              out_table=rng.integers(0, n_out, size=(n, k)),
                              output_alphabet="xyz"[:n_out])
    return DFA.from_table(table, alphabet, 0, accepting, output_kind=kind)


def all_strings(k: int, max_length: int = 8) -> np.ndarray:
    """Every string of the longest length L ≤ max_length with k^L ≤ MAX_STRINGS (their prefixes
    cover every shorter string, since all steps are compared)."""
    L = max_length
    while k ** L > MAX_STRINGS:
        L -= 1
    return np.array(list(itertools.product(range(k), repeat=L)), dtype=np.int64).reshape(-1, L)


def compare(net, ids: np.ndarray) -> None:
    """Decoded state and readout equal `run_batch` at every step (first mismatch reported)."""
    trace = net.machine.run_batch(ids)
    states, logits = net.forward(torch.as_tensor(ids))
    got_state = net.decode(states)["state"]
    got_out = net.readout(logits)
    for name, got, want in (("state", got_state, trace["state"]),
                            ("output", got_out, trace["output"])):
        assert got.shape == want.shape, (name, got.shape, want.shape)
        bad = got != want
        if bad.ndim == 3:
            bad = bad.any(axis=2)
        if bad.any():
            b, t = map(int, np.argwhere(bad)[0])
            raise AssertionError(
                f"{net.construction}: {name} differs on string {ids[b].tolist()} at step {t}: "
                f"machine {want[b, t]!r}, network {got[b, t]!r}"
            )


def minsky_units(dfa: DFA, reachable_only: bool = True) -> int:
    """Oracle for the Minsky unit count, by plain loops: distinct (state entered, symbol, output)
    over the transitions of the (reachable) states; transitions into the dead state count (one
    per symbol) only when "every unit off" must stand for the start (Mealy machines, or no
    transition re-enters the start)."""
    n, k = dfa.table.shape
    start = dfa.state_index(dfa.start)
    seen, todo = {start}, [start]
    while todo:
        p = todo.pop()
        for a in range(k):
            q = int(dfa.table[p, a])
            if q >= 0 and q not in seen:
                seen.add(q)
                todo.append(q)
    sources = sorted(seen) if reachable_only else range(n)
    trans = [(int(dfa.table[p, a]), a,
              int(dfa.out_table[p, a]) if dfa.out_table is not None else -1)
             for p in sources for a in range(k)]
    start_is_a_unit = dfa.output_kind != "symbol" and any(q == start for q, _, _ in trans)
    return len({t for t in trans if t[0] >= 0 or not start_is_a_unit})


def compile_(dfa: DFA, target: str, method: str, **kw):
    return pn.compile(dfa, target=target, method=method, **kw)


dfas = st.builds(
    lambda seed, n, k, kind, missing: random_dfa(np.random.default_rng(seed), n, k, kind, missing),
    st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(2, 6),
    st.sampled_from(["accept", "next_set", "mealy"]), st.sampled_from([0.0, 0.0, 0.15]),
)


@pytest.mark.parametrize("target,method", TARGETS)
@settings(max_examples=12)
@given(dfa=dfas)
def test_exhaustive_agreement(target, method, dfa):
    net = compile_(dfa, target, method)
    assert net.hidden_units == net.bound_value
    if method == "minsky":
        assert net.hidden_units == minsky_units(dfa) <= len(dfa.states) * len(dfa.alphabet)
    ids = all_strings(len(dfa.alphabet))
    assert net.forward(torch.as_tensor(ids[:1]))[0].shape[-1] == net.hidden_units
    compare(net, ids)


@pytest.mark.parametrize("target,method", TARGETS)
@pytest.mark.parametrize("kind", ["accept", "next_set", "mealy"])
def test_long_strings(target, method, kind):
    rng = np.random.default_rng(7)
    dfa = random_dfa(rng, 30, 4, kind)
    ids = rng.integers(0, 4, size=(3, 5000))
    for dtype in (torch.float32, torch.float64):
        compare(compile_(dfa, target, method, dtype=dtype), ids)


@pytest.mark.parametrize("target,method", TARGETS)
def test_partial_dfa_dead_state(target, method):
    # accepts a*b; anything after b, or a c anywhere, goes to the implicit dead state
    dfa = DFA([0, 1], "abc", {(0, "a"): 0, (0, "b"): 1}, 0, [1])
    net = compile_(dfa, target, method)
    ids = all_strings(3, 6)
    compare(net, ids)
    states, _ = net.forward(torch.as_tensor([[1, 0, 0]]))
    assert net.decode(states)["state"].tolist() == [[0, 1, -1, -1]]


@pytest.mark.parametrize("target,method", TARGETS)
@pytest.mark.parametrize("kind", ["accept", "next_set", "mealy"])
def test_minimised_and_unminimised_agree(target, method, kind):
    rng = np.random.default_rng(3)
    dfa = random_dfa(rng, 25, 3, kind, missing=0.1)
    small = dfa.minimize()
    assert small.num_states <= dfa.num_states
    ids = all_strings(3, 7)
    big_net, small_net = compile_(dfa, target, method), compile_(small, target, method)
    compare(big_net, ids)
    compare(small_net, ids)
    s1, l1 = big_net.forward(torch.as_tensor(ids))
    s2, l2 = small_net.forward(torch.as_tensor(ids))
    assert np.array_equal(big_net.readout(l1), small_net.readout(l2))
    # decoded states correspond through a function: unminimised state -> minimal state
    d1, d2 = big_net.decode(s1)["state"].ravel(), small_net.decode(s2)["state"].ravel()
    pairs = np.unique(np.stack([d1, d2], axis=1), axis=0)
    assert len(np.unique(pairs[:, 0])) == len(pairs)


def test_bounds_and_scale_arguments():
    dfa = random_dfa(np.random.default_rng(1), 12, 5, "accept")
    n, k = 12, 5
    minsky = compile_(dfa, "elman", "minsky")
    assert minsky.bound == sp.Symbol("P")
    assert minsky.hidden_units == minsky.bound_value == minsky_units(dfa) <= n * k
    everything = compile_(dfa, "elman", "minsky", reachable_only=False)
    assert everything.hidden_units == minsky_units(dfa, False) <= n * k
    so = compile_(dfa, "second_order", "omlin_giles")
    assert so.hidden_units == n and so.bound == sp.Symbol("Q")
    for net in (minsky, everything, so, compile_(dfa, "lstm", "minsky")):
        assert net.scale >= net.info["beta_min"]
        assert "β" in net.scale_argument
        assert net.margin > 0


@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_mealy_pairs_without_start_unit(target, missing):
    """Mealy machines get at most |Q|·|Σ| units, no start unit: the all-off state stands for the
    start (first output "none"), and the dead units hold."""
    rng = np.random.default_rng(11)
    n, k = 9, 3
    table = rng.integers(1, n, size=(n, k))  # states ≥ 1 only: 0 is never re-entered …
    table[rng.random((n, k)) < missing] = -1
    table[n - 1] = n - 1  # … and state n-1 is unreachable unless a transition hits it
    mealy = DFA.from_table(table, "abc", 0, [], out_table=rng.integers(0, 2, size=(n, k)),
                           output_alphabet="xy")
    reach = int(dfa_rnn.reachable_states(mealy).sum())
    full = compile_(mealy, target, "minsky", reachable_only=False)
    pruned = compile_(mealy, target, "minsky")
    assert full.hidden_units == full.bound_value == minsky_units(mealy, False) <= n * k
    assert pruned.hidden_units == pruned.bound_value == minsky_units(mealy) <= reach * k
    assert len(full.unit_labels) == full.hidden_units
    assert not any("start" in label for label in full.unit_labels)
    h0 = full.forward(torch.as_tensor([[0]]))[0][0, 0].numpy()
    assert (h0 == (-1 if target == "elman" else 0)).all()  # every unit off: the start
    for net in (full, pruned):
        compare(net, all_strings(k, 7))
        compare(net, rng.integers(0, k, size=(4, 2000)))
    for name in ("cumulative_xor", "delayed_xor", "modular_counter"):
        task = pn.tasks.get(name)
        net = compile_(task, target, "minsky")
        assert net.hidden_units == minsky_units(task) <= len(task.states) * len(task.alphabet)
        compare(net, all_strings(len(task.alphabet), 8))


def test_recogniser_never_reentering_start_has_no_start_unit():
    dfa = DFA([0, 1, 2], "ab", {(0, "a"): 1, (0, "b"): 2, (1, "a"): 2, (1, "b"): 1,
                                (2, "a"): 1}, 0, [1])  # partial: (2, b) is dead
    for target, method in TARGETS:
        net = compile_(dfa, target, method)
        assert net.hidden_units == net.bound_value
        if method == "minsky":  # →1 on a, →2 on b, →2 on a, →1 on b, dead on b
            assert net.hidden_units == 5 and net.info["all_off_state"] == 0
        compare(net, all_strings(2, 10))


def test_logit_margins_hold():
    """Correct logits are ≥ β·margin and wrong ones ≤ -β·margin at every step."""
    rng = np.random.default_rng(5)
    for kind in ("accept", "next_set", "mealy"):
        dfa = random_dfa(rng, 10, 3, kind, missing=0.1)
        ids = all_strings(3, 6)
        trace = dfa.run_batch(ids)
        for target, method in TARGETS:
            net = compile_(dfa, target, method, dtype=torch.float64)
            _, logits = net.forward(torch.as_tensor(ids))
            logits = logits.numpy()
            bound = float(net.scale * net.margin) * (1 - 1e-9)
            out = trace["output"]
            if kind == "accept":
                signed = np.where(out, logits[..., 0], -logits[..., 0])
            elif kind == "next_set":
                signed = np.where(out, logits, -logits)
            else:
                col = np.where(out >= 0, out, logits.shape[-1] - 1)
                right = np.take_along_axis(logits, col[..., None], axis=-1)
                wrong = np.where(np.eye(logits.shape[-1], dtype=bool)[col], -np.inf, logits)
                signed = np.concatenate([right, -wrong.max(axis=-1, keepdims=True)], axis=-1)
            assert signed.min() >= bound, (target, kind, signed.min(), bound)


def test_with_scale_and_dtype():
    dfa = random_dfa(np.random.default_rng(2), 8, 3, "accept")
    net = compile_(dfa, "elman", "minsky", dtype=torch.float64)
    assert net.dtype == torch.float64
    bigger = net.with_scale(net.scale * 2)
    compare(bigger, all_strings(3, 6))
    assert bigger.scale == 2 * net.scale


def test_large_machine_sparse_second_order_and_minsky_refuses():
    rng = np.random.default_rng(0)
    n, k = 10_000, 20
    dfa = DFA.from_table(rng.integers(0, n, size=(n, k)), [f"s{i}" for i in range(k)], 0,
                         np.flatnonzero(rng.random(n) < 0.5))
    with pytest.raises(CompileError, match="second_order"):
        compile_(dfa, "elman", "minsky")
    with pytest.raises(CompileError, match="compressed"):
        compile_(dfa, "lstm", "minsky")
    net = compile_(dfa, "second_order", "omlin_giles")
    assert net.info["sparse"] and net.hidden_units == n
    compare(net, rng.integers(0, k, size=(16, 50)))


def test_bad_input_raises_typed_errors():
    with pytest.raises(AutomatonError, match="no output"):
        DFA([0, 1], "ab", {(0, "a"): 1, (0, "b"): 0}, 0, outputs={(0, "a"): "x"})
    with pytest.raises(DeterminismError):
        DFA([0, 1], "ab", {(0, "a"): {0, 1}}, 0)
    dyck = pn.DyckKM(2, 2)
    for fn in (dfa_rnn.compile_minsky, dfa_rnn.compile_lstm, dfa_rnn.compile_second_order):
        with pytest.raises(CompileError, match="DFA"):
            fn(dyck)
    with pytest.raises(CompileError):
        pn.compile(dyck, target="second_order")


def test_registry_defaults():
    dfa = random_dfa(np.random.default_rng(4), 5, 2, "accept")
    assert pn.compile(dfa, target="elman").construction == "elman/minsky"
    assert pn.compile(dfa, target="lstm").construction == "lstm/minsky"
    assert pn.compile(dfa, target="second_order").construction == "second_order/omlin_giles"
    assert pn.compile(dfa, target="elman", method="compressed").steps_per_symbol == 2
