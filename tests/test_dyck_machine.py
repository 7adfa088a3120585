"""The Dyck-(k, m) generator: step semantics, batched simulation, sampling, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.bounded import END, DyckKM, dyck
from pdanet.errors import InputError


def test_step_semantics_and_outputs():
    d = dyck(2, 2)
    assert d.output(d.initial()) == frozenset({"(", "[", END})
    c = d.run("([")
    assert c.stack == (0, 1) and not c.dead
    assert d.output(c) == frozenset({"]"})            # depth m: no opens
    assert d.run("([(").dead                           # too deep
    assert d.run("(]").dead                            # mismatched close
    assert d.accepts("([])") and not d.accepts("([]")
    assert d.output(d.run(")")) == frozenset()


def step_oracle(d: DyckKM, ids: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """The batch fields computed string by string with `DyckKM.step` (dead configurations keep
    their stack; a row holds its last configuration past its length)."""
    B, T = ids.shape
    out = {"stack": np.full((B, T + 1, d.m), -1), "depth": np.zeros((B, T + 1), int),
           "top": np.full((B, T + 1), -1), "state": np.zeros((B, T + 1), int),
           "output": np.zeros((B, T + 1, 2 * d.k + 1), bool)}
    for b in range(B):
        config = d.initial()
        for t in range(T + 1):
            if 0 < t <= lengths[b]:
                config = d.step(config, d.alphabet.symbols[ids[b, t - 1]])
            out["stack"][b, t, :config.depth] = config.stack
            out["depth"][b, t] = config.depth
            out["top"][b, t] = config.stack[-1] if config.stack else -1
            out["state"][b, t] = -1 if config.dead else 0
            for s in d.output(config):
                out["output"][b, t, d.output_alphabet.index(s)] = True
    return out


@st.composite
def batches(draw, max_k=6, max_length=14):
    """(k, m, ids, lengths): walks that mostly follow the rules (so they go deep and live long)
    with occasional random symbols (so some die: too deep, wrong or unmatched close), padded
    after each row's length with -1 or with arbitrary symbols."""
    k = draw(st.integers(1, max_k))
    m = draw(st.integers(1, 5))
    B = draw(st.integers(1, 6))
    T = draw(st.integers(0, max_length))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    legal = DyckKM(k, m).sample(B, T, rng, busy=draw(st.floats(0.3, 0.95)))
    noise = rng.random((B, T)) < draw(st.sampled_from([0.0, 0.03, 0.3]))
    ids = np.where(noise, rng.integers(0, 2 * k, (B, T)), legal)
    lengths = rng.integers(0, T + 1, B)
    past = np.arange(T)[None, :] >= lengths[:, None]
    pad = rng.integers(-1, 2 * k, (B, T)) if draw(st.booleans()) else -1
    return k, m, np.where(past, pad, ids), lengths


def _assert_run_batch_agrees(batch) -> None:
    k, m, ids, lengths = batch
    d = DyckKM(k, m)
    tr = d.run_batch(ids, lengths)
    want = step_oracle(d, ids, lengths)
    for name in ("stack", "depth", "top", "state", "output"):
        assert tr[name].shape == want[name].shape, name
        assert np.array_equal(tr[name], want[name]), name


@settings(max_examples=150, deadline=None)
@given(batch=batches())
def test_run_batch_agrees_with_step(batch):
    _assert_run_batch_agrees(batch)


@settings(max_examples=10, deadline=None)
@given(batch=batches(max_k=130, max_length=600))
def test_run_batch_agrees_with_step_long_and_wide(batch):
    """Long strings and large k (the step/type keys need 32 bits)."""
    _assert_run_batch_agrees(batch)


def test_run_batch_names_dead_steps_exactly():
    d = dyck(2, 2)
    ids, lengths = d.encode(["([])", "(((", "(]", ")", "()[]", ""])
    tr = d.run_batch(ids, lengths)
    assert tr["state"].tolist() == [[0] * 5, [0, 0, 0, -1, -1], [0, 0, -1, -1, -1],
                                    [0, -1, -1, -1, -1], [0] * 5, [0] * 5]
    assert tr["stack"][1, 3].tolist() == [0, 0]          # dead: keeps the stack it had
    assert tr["stack"][0, 2].tolist() == [0, 1] and tr["depth"][0].tolist() == [0, 1, 2, 1, 0]
    assert not tr["output"][1, 3:].any()


@pytest.mark.parametrize("busy", [0.2, 0.9])
def test_sampled_strings_are_legal_prefixes(busy):
    d = dyck(3, 4)
    ids = d.sample(200, 50, rng=1, busy=busy)
    tr = d.run_batch(ids)
    assert (tr["state"] >= 0).all()
    mean_depth = tr["depth"].mean()
    assert (mean_depth > 2.5) if busy == 0.9 else (mean_depth < 1.5)


def test_complete_samples_are_words():
    d = dyck(2, 3)
    ids = d.sample(100, 20, rng=2, complete=True)
    assert all(d.accepts(d.alphabet.decode(r)) for r in ids)


def test_huge_k_is_cheap_and_uses_tokens():
    d = dyck(100_000, 3)
    assert len(d.alphabet) == 200_000 and d.num_configs == 1 + 10**5 + 10**10 + 10**15
    c = d.run("(7 (99999 )99999")
    assert c.stack == (7,)
    tr = d.run_batch(d.sample(4, 10, rng=0), with_output=False)
    assert "output" not in tr.fields and (tr["state"] == 0).all()


@pytest.mark.parametrize("k,m", [(0, 2), (2, 0), (-1, 3), (2.5, 2), (True, 2)])
def test_bad_parameters(k, m):
    with pytest.raises(InputError):
        DyckKM(k, m)


def test_unknown_symbol_named():
    with pytest.raises(InputError, match="'x'"):
        dyck(2, 2).run("(x")


def test_equality_and_hash():
    assert dyck(2, 3) == DyckKM(2, 3) and hash(dyck(2, 3)) == hash(DyckKM(2, 3))
    assert dyck(2, 3) != dyck(3, 2)
