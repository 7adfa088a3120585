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


# --- the persistent deque behind queue and deque stores --------------------------------------------
_OPS_ST = st.lists(st.one_of(st.tuples(st.sampled_from(["push_top", "push_bottom"]),
                                       st.integers(0, 5)),
                             st.tuples(st.sampled_from(["pop_top", "pop_bottom"]), st.none())),
                   max_size=80)


@given(ops=_OPS_ST, start=st.lists(st.integers(0, 5), max_size=6))
@settings(max_examples=200, deadline=None)
def test_deque_matches_a_list_model(ops, start):
    from pdanet.automata.pda import Stack
    from pdanet.automata.store import Deque

    d, model = Deque(start), list(start)
    history = [(d, tuple(model))]
    for op, x in ops:
        if op == "push_top":
            d = d.push_top(x)
            model.append(x)
        elif op == "push_bottom":
            d = d.push_bottom(x)
            model.insert(0, x)
        elif not model:
            with pytest.raises(IndexError):
                getattr(d, op)()
            continue
        else:
            d = getattr(d, op)()
            model.pop(-1 if op == "pop_top" else 0)
        want = tuple(model)
        assert len(d) == len(want) and bool(d) == bool(want)
        assert d == want and want == d and (d != want) is False and hash(d) == hash(want)
        assert tuple(d) == want and tuple(reversed(d)) == want[::-1] and d[1:3] == want[1:3]
        assert all(d[i] == want[i] and d[-1 - i] == want[-1 - i] for i in range(len(want)))
        if want:
            assert (d.bottom, d.top) == (want[0], want[-1])
        assert d == Deque(want) and hash(d) == hash(Deque(want)) and d == Stack(want)
        assert d != want + (9,) and d != Deque(want + (9,))
        history.append((d, want))
    for old, want in history:                      # earlier values are unchanged (persistence)
        assert old == want and repr(old) == repr(want)


def test_deque_errors_and_pickling():
    import pickle

    from pdanet.automata.store import Deque

    empty = Deque()
    assert empty == () and hash(empty) == hash(()) and not empty
    for op in ("pop_top", "pop_bottom"):
        with pytest.raises(IndexError):
            getattr(empty, op)()
    with pytest.raises(IndexError):
        _ = empty.top
    with pytest.raises(IndexError):
        empty[0]
    with pytest.raises(TypeError):
        Deque("ab")["x"]
    d = Deque("abc").push_bottom("z")
    assert pickle.loads(pickle.dumps(d)) == ("z", "a", "b", "c")
    assert (d == [1]) is False                      # only tuples, stacks and deques compare equal


@pytest.mark.parametrize("make, f, left", [
    (lambda: sequence_copy(4, "queue"), lambda w: w, lambda w, j: w[j:]),
    (lambda: sequence_copy(4, "deque"), lambda w: w, lambda w, j: w[j:]),
    (lambda: sequence_reversal(4, "deque"), lambda w: w[::-1], lambda w, j: w[:len(w) - j]),
    (lambda: bigram_flip(4), _flip, None),
])
def test_queue_and_deque_stores_trace_as_tuples(make, f, left):
    from pdanet.automata.store import StoreConfig

    m = make()
    w = tuple(f"s{i % 4}" for i in (0, 3, 1, 1, 2, 0, 3, 2))
    s = w + (BLANK,) * len(w)
    rows = m.trace(s)
    assert m.accepts(s) and m.initial().store == () and m.initial() == StoreConfig(m.start, ())
    assert tuple(r.config.emitted for r in rows[1:]) == (BLANK,) * len(w) + f(w)
    assert rows[-1].config.store == () and hash(rows[-1].config.store) == hash(())
    if left is None:
        return
    for i, row in enumerate(rows):
        want = w[:i] if i <= len(w) else left(w, i - len(w))
        c = row.config
        assert c.store == want and hash(c.store) == hash(want)
        assert c == StoreConfig(c.state, want, c.emitted) and hash(c) == hash(
            StoreConfig(c.state, want, c.emitted))


def test_queue_and_deque_stores_step_in_amortised_constant_work():
    from pdanet.automata.store import Deque

    n = 50_000                                      # 10^5 steps
    for m in (sequence_copy(4, "queue"), sequence_copy(4, "deque"), sequence_reversal(4, "deque")):
        w = [f"s{i % 4}" for i in range(n)]
        before = Deque.cells_moved
        config = m.initial()
        for t, sym in enumerate(w + [BLANK] * n):
            prev = config.store
            config = m.step(config, sym)
            if t < n:                               # each push adds one cell on the previous store
                assert config.store._top.pop() is prev.settled(m.reads[config.state])._top
        assert config.state is not None and config.store == ()
        # splits move about one cell per step on average (a tuple store would copy n²/2 cells)
        assert Deque.cells_moved - before <= 2 * (2 * n)


def test_deque_alternating_ends_moves_constant_cells_per_op():
    from pdanet.automata.store import Deque

    n = 20_000
    d = Deque()
    for i in range(n):
        d = d.push_top(i)
    before, ops = Deque.cells_moved, 0
    while d:                                        # pop the two ends in turn: splits by halves
        d = d.pop_bottom() if ops % 2 else d.pop_top()
        ops += 1
    assert ops == n and Deque.cells_moved - before <= 3 * n


def test_run_batch_memory_guard_names_the_store_field():
    from pdanet import limits
    from pdanet.errors import ResourceError

    m = sequence_copy(3, "queue")
    ids, lengths = m.encode([("s0",) * 400 + (BLANK,) * 400] * 8)
    with limits.raised(max_bytes=2**20), pytest.raises(ResourceError, match="'store' field"):
        m.run_batch(ids, lengths)


def test_cli_writes_queue_stores_as_lists():
    from pdanet.cli import _jsonable, format_config

    m = sequence_copy(2, "queue")
    config = m.run(("s0", "s1"))
    assert _jsonable(config)["store"] == ["s0", "s1"]
    assert "store=[s0 s1]" in format_config(m, config)
