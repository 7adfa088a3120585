"""StoreTransducer: validation, the instances against brute-force references, run_batch vs step."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.store import (
    BLANK,
    StoreTransducer,
    bigram_flip,
    sequence_copy,
    sequence_reversal,
)
from pdanet.errors import AutomatonError, InputError

V = ("s0", "s1", "s2")


def _flip(w):
    out = []
    for i in range(0, len(w), 2):
        out += [w[i + 1], w[i]]
    return tuple(out)


@pytest.mark.parametrize("make, f", [
    (lambda: sequence_copy(3, "queue"), lambda w: w),
    (lambda: sequence_copy(3, "deque"), lambda w: w),
    (lambda: sequence_reversal(3, "deque"), lambda w: w[::-1]),
    (lambda: sequence_reversal(3, "stack"), lambda w: w[::-1]),
    (lambda: bigram_flip(3), _flip),
])
@given(w=st.lists(st.sampled_from(V), min_size=0, max_size=12))
@settings(max_examples=30)
def test_instances_match_reference(make, f, w):
    m = make()
    w = tuple(w)
    if m.name == "bigram_flip_queue" and (len(w) % 2 or not w):
        with pytest.raises(InputError):
            m.transduce(w + (BLANK,) * max(len(w), 1))
        return
    assert m.transduce(w + (BLANK,) * len(w)) == (BLANK,) * len(w) + f(w)


@pytest.mark.parametrize("make", [lambda: sequence_copy(3), lambda: sequence_copy(3, "deque"),
                                  lambda: sequence_reversal(3), lambda: bigram_flip(3)])
def test_run_batch_agrees_with_step(make):
    m = make()
    rng = np.random.default_rng(1)
    strings = [tuple(m.alphabet.symbols[i] for i in rng.integers(0, len(m.alphabet), n))
               for n in rng.integers(0, 14, 60)]
    ids, lengths = m.encode(strings)
    tr = m.run_batch(ids, lengths)
    for b, s in enumerate(strings):
        for t, row in enumerate(m.trace(s)):
            c = row.config
            assert tr["state"][b, t] == (-1 if c.state is None else m.state_index(c.state))
            assert tr["size"][b, t] == (-1 if c.state is None else len(c.store))
            got = tuple(m.store_alphabet.symbols[i] for i in tr["store"][b, t] if i >= 0)
            assert got == c.store
            want = -1 if c.emitted is None else m.output_alphabet.index(c.emitted)
            assert tr["output"][b, t] == want


def test_validation_errors():
    with pytest.raises(AutomatonError, match="pops an empty"):
        StoreTransducer("stack", "q", "a", "a", "X", {("q", "a", BOTTOM): ("q", None, "pop")}, "q")
    with pytest.raises(AutomatonError, match="not one of"):
        StoreTransducer("queue", "q", "a", "a", "X",
                        {("q", "a", BOTTOM): ("q", None, ("push_top", "X"))}, "q")
    with pytest.raises(AutomatonError, match="store"):
        StoreTransducer("tape", "q", "a", "a", "X", {}, "q")
    with pytest.raises(AutomatonError, match="pushed symbol"):
        StoreTransducer("stack", "q", "a", "a", "X", {("q", "a", BOTTOM): ("q", None, "push")}, "q")


def test_run_batch_keeps_stores_as_wide_as_they_get():
    import tracemalloc

    m = StoreTransducer("stack", ["s"], "ab", "ab", "X",
                        {("s", "a", BOTTOM): ("s", "a", ("push", "X")),
                         ("s", "b", "X"): ("s", "b", "pop")}, "s")
    ids, lengths = m.encode(["ab" * 600])
    tracemalloc.start()
    try:
        trace = m.run_batch(ids, lengths)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert trace["store"].shape == (1, 1201, 1) and trace["size"].max() == 1
    assert peak < 4 * 2**20       # a (T+1) × T snapshot would be 11 MB


def test_a_stack_store_steps_in_constant_work():
    m = sequence_reversal(4, store="stack")
    w = ["s0", "s1", "s2", "s3"] * 500
    config, prev = m.initial(), []
    for sym in w:
        prev.append(config.store)
        config = m.step(config, sym)
        assert config.store.pop() is prev[-1]            # one new cell on the previous store
    assert config.store == tuple(w) and hash(config.store) == hash(tuple(w))
    assert m.transduce(w + ["#"] * len(w))[len(w):] == tuple(reversed(w))
