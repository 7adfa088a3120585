"""Random walks of a depth-bounded DPDA/DPDT drawn inside the batched simulation
(`BoundedPDA.random_walks`) against the generic walk over configuration objects
(`pdanet.verify.strings._stepped_walks`), and the bounded machine's batch fields against its
step-by-step simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pda import DPDA, BoundedPDA
from pdanet.automata.pdt import DPDT
from pdanet.errors import InputError
from pdanet.verify import strings as S

Z = BOTTOM


@st.composite
def realtime_machine(draw) -> DPDA | DPDT:
    """A random real-time DPDA (either acceptance mode) or DPDT (one symbol a step, or 0–2):
    ≤ 3 states, ≤ 2 stack symbols, ≤ 3 input symbols; each (state, symbol, top) missing or
    pushing up to 3 symbols (γ of length 0–3, so one move may deepen the stack by 2), ⊥ never
    popped."""
    nq, ng, nk = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    Q, G, K = list(range(nq)), [f"X{i}" for i in range(ng)], "abc"[:nk]
    transducer = draw(st.booleans())
    strings = transducer and draw(st.booleans())      # steps emitting 0–2 symbols
    t = {}
    for q in Q:
        for a in K:
            for x in G + [Z]:
                if draw(st.integers(0, 4)) == 0:
                    continue
                gamma = tuple(draw(st.lists(st.sampled_from(G), max_size=3)))
                if x is Z:
                    gamma = gamma[:2] + (Z,)
                q2 = draw(st.sampled_from(Q))
                out = draw(st.sampled_from(["x", "y", "", "xy"] if strings else ["x", "y"]))
                t[(q, a, x)] = (q2, tuple(out), gamma) if transducer else (q2, gamma)
    if transducer:
        return DPDT(Q, K, "xy", G, t, 0, accepting=draw(st.sets(st.sampled_from(Q))))
    if draw(st.booleans()):
        return DPDA(Q, K, G, t, 0, acceptance="empty_stack")
    return DPDA(Q, K, G, t, 0, accepting=draw(st.sets(st.sampled_from(Q))))


@settings(max_examples=40, deadline=None)
@given(realtime_machine(), st.integers(1, 4), st.integers(0, 10), st.integers(0, 2**32 - 1))
def test_batched_walk_equals_stepped_walk(machine, m, length, seed):
    b = machine.bounded(m)
    fast = b.random_walks(12, length, np.random.default_rng(seed))
    assert fast is not None
    slow = S._stepped_walks(b, 12, length, np.random.default_rng(seed))
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    # strings.random_walks and long_strings take the batched walk
    via = S.random_walks(b, 12, length, np.random.default_rng(seed))
    np.testing.assert_array_equal(via[0], fast[0])
    ids, lengths = fast
    syms = b.alphabet.symbols
    for row, n in zip(ids, lengths):
        assert (row[n:] == -1).all() and (row[:n] >= 0).all()
        w = [syms[i] for i in row[:n]]
        configs = [s.config for s in b.trace(w)]
        assert all(not b.is_dead(c) and c.depth <= m for c in configs)   # live all the way
        if n < length:  # stopped early: no live extension
            assert all(b.is_dead(b.step(configs[-1], a)) for a in syms)


@settings(max_examples=25, deadline=None)
@given(realtime_machine(), st.integers(1, 4))
def test_batch_fields_equal_stepped_simulation(machine, m):
    b = machine.bounded(m)
    n_max = 6 if len(b.alphabet) <= 2 else 5
    strings = [w for n in range(n_max + 1) for w in itertools.product(b.alphabet.symbols,
                                                                      repeat=n)]
    ids, lengths = b.encode(strings)
    tr = b.run_batch(ids, lengths)
    assert tr["stack"].shape[2] == m + 1 and tr["stack"].dtype == np.int16
    live = S.live_mask(b, ids, lengths, dict(tr.fields))
    for i, w in enumerate(strings):
        for t, s in enumerate(b.trace(w)):
            c = s.config
            dead = c.state is None
            assert live[i, t] == (not dead)
            assert tr["state"][i, t] == (-1 if dead else machine.state_index(c.state))
            assert tr["depth"][i, t] == (-1 if dead else c.depth)
            codes = [] if dead else [machine.stack_code(x) for x in c.stack]
            assert list(tr["stack"][i, t, :len(codes)]) == codes
            assert (tr["stack"][i, t, len(codes):] == -1).all()
            assert tr["top"][i, t] == (codes[-1] if codes else -1)
            out = tr["output"][i, t]
            if isinstance(machine, DPDA):
                assert bool(out) == (not dead and b.output(c))
            else:
                emitted = [] if dead or t == 0 else [machine.output_alphabet.index(y)
                                                     for y in c.emitted]
                got = np.atleast_1d(out)
                if machine.output_kind == "symbol":
                    got = got[:1]
                assert list(got[:len(emitted)]) == emitted and (got[len(emitted):] == -1).all()
    # the same fields as the underlying machine's run cut at the bound, in one group of rows or
    # in groups of one row
    whole = b._cut(dict(machine.run_batch(ids, lengths).fields), None)
    for got in (tr.fields, b._run_grouped(ids, lengths, chunk_bytes=1)):  # rows one by one
        assert list(got) == list(whole)
        for name in whole:
            assert got[name].dtype == whole[name].dtype
            np.testing.assert_array_equal(got[name], whole[name])


def test_long_walks_respect_the_bound_and_match_stepped():
    """Marked reversal over 4 symbols at m = 5: walks of 300 symbols stay within the bound."""
    syms = "abcd"
    t = {}
    for x in list(syms.upper()) + [Z]:
        for a in syms:
            t[("push", a, x)] = ("push", (a.upper(), x))
        t[("push", "#", x)] = ("pop", (x,))
    for a in syms:
        t[("pop", a, a.upper())] = ("pop", ())
    d = DPDA(["push", "pop"], syms + "#", syms.upper(), t, "push", acceptance="empty_stack")
    b = d.bounded(5)
    fast = S.long_strings(b, 30, 300, 7)
    slow = S._stepped_walks(b, 30, 300, np.random.default_rng(7), extendable=True)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    assert fast[1].max() <= 11                       # ≤ 5 pushes, #, ≤ 5 pops
    depth = d.run_batch(*fast)["depth"]
    assert depth.max() == 5


def test_machine_with_epsilon_moves_uses_the_stepped_walk():
    d = DPDA(["p", "q"], "ab", "A", {
        ("p", "a", Z): ("p", ("A", Z)), ("p", "a", "A"): ("p", ("A", "A")),
        ("p", "b", "A"): ("q", ()), ("q", "b", "A"): ("q", ()),
        ("q", EPSILON, Z): ("p", (Z,)),
    }, "p")
    b = d.bounded(2)
    assert b.random_walks(5, 6, np.random.default_rng(0)) is None
    ids, lengths = S.random_walks(b, 20, 6, np.random.default_rng(0))
    live = S.live_mask(b, ids, lengths)
    assert live[np.arange(6 + 1)[None, :] <= lengths[:, None]].all()


@pytest.mark.parametrize("n, length", [(-1, 3), (2, -1), (2.5, 3), (True, 3), (2, "3")])
def test_bad_counts_are_input_errors(n, length):
    b = BoundedPDA(DPDA(["p"], "a", "A", {("p", "a", Z): ("p", ("A", Z))}, "p"), 2)
    with pytest.raises(InputError, match="random_walks needs an integer"):
        b.random_walks(n, length, np.random.default_rng(0))
