"""`agreement_predictor` (Hao et al. 2018 §4.5: the auxiliaries that may follow each prefix)
against the chart-parser oracle over the paper's grammar, and its compiled network."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.tasks.hao2018 import (
    AGREEMENT_SETS,
    AGREEMENT_WORDS,
    agreement_next_auxiliaries,
    agreement_predictor,
    agreement_predictor_reference,
    agreement_reference,
    agreement_sampler,
)
from pdanet.errors import CompileError, InputError

SET_OF = {"{}": frozenset(), "{has}": frozenset({"has"}), "{have}": frozenset({"have"}),
          "{has,have}": frozenset({"has", "have"})}


@functools.lru_cache(maxsize=1)
def machine():
    return agreement_predictor()


def outputs(string):
    """Per-word outputs of the machine, None where it blocks."""
    m = machine()
    c = m.initial()
    out = []
    for w in string:
        c = m.step(c, w)
        if c.state is None:
            return None
        out.append(m.output(c))
    return out


@functools.lru_cache(maxsize=1)
def prefixes_up_to_8():
    """Every prefix of a sentence of ≤ 8 words (from the oracle), and every one-word extension
    of a prefix of ≤ 7 words that is a prefix of no sentence."""
    live, dead, front = [], [], [()]
    for _ in range(8):
        nxt = []
        for p in front:
            for w in AGREEMENT_WORDS:
                q = p + (w,)
                (nxt if agreement_next_auxiliaries(q) is not None else dead).append(q)
        live += nxt
        front = nxt
    return live, dead


#: sentence lengths of the grammar from 9 to 21 (none has 10 words)
LONG = (9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21)


def witness(m: int, n: int, queries: int) -> tuple:
    """``the lobster (in the lobsters in the lobster)^m`` (a frame of 2m + 1 runs), an object
    relative whose subject has 2n + 1 runs, then ``(that have slept that has slept)^queries
    that``."""
    x = "the lobster" + " in the lobsters in the lobster" * m
    y = " that the lobster" + " in the lobsters in the lobster" * n + " has devoured"
    return tuple((x + y + " that have slept that has slept" * queries + " that").split())


def test_every_prefix_up_to_8_words_matches_the_oracle():
    live, dead = prefixes_up_to_8()
    assert len(live) == 187
    both = []
    for p in live:
        out = outputs(p)
        assert out is not None, p
        assert SET_OF[out[-1]] == agreement_next_auxiliaries(p), p
        if out[-1] == "{has,have}":
            both.append(" ".join(p))
    for q in dead:
        assert outputs(q) is None, q
    # the grammar is not unambiguous: a relative clause after a PP can attach to either noun
    assert both == ["the lobster in the lobsters that", "the lobsters in the lobster that",
                    "the lobster that has devoured the lobsters that",
                    "the lobsters that have devoured the lobster that"]


def test_accepts_exactly_the_sentences_up_to_8_words():
    live, _ = prefixes_up_to_8()
    m = machine()
    sentences = [p for p in live if agreement_reference(p)]
    assert len(sentences) > 10
    for p in live:
        assert m.accepts(p) == agreement_reference(p), p


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.sampled_from(LONG), cut=st.floats(0, 1))
def test_random_long_prefixes_match_the_oracle(seed, length, cut):
    (s,) = agreement_sampler(1, [length], np.random.default_rng(seed))
    t = max(1, round(cut * len(s)))
    out = outputs(s)
    assert out is not None and machine().accepts(s)
    assert SET_OF[out[t - 1]] == agreement_next_auxiliaries(s[:t])
    assert machine().transduce(s)[-1] == "{}"


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.sampled_from((6, 8, 9, 11, 12)))
def test_reference_is_the_oracle_at_every_prefix(seed, length):
    (s,) = agreement_sampler(1, [length], np.random.default_rng(seed))
    assert machine().transduce(s) == agreement_predictor_reference(s)


@pytest.mark.parametrize("m, n, queries, expected", [
    (0, 0, 0, {"has"}), (1, 0, 0, {"has", "have"}), (0, 1, 0, {"has"}), (1, 1, 1, {"has"}),
    (2, 0, 1, {"has", "have"}), (2, 1, 2, {"has"})])
def test_witness_of_the_real_time_bound(m, n, queries, expected):
    """The family of the docstring's argument: the last set depends on m, read after the inner
    frame has been closed (the oracle agrees)."""
    s = witness(m, n, queries)
    assert agreement_next_auxiliaries(s) == frozenset(expected)
    assert SET_OF[outputs(s)[-1]] == frozenset(expected)


def test_machine_is_not_real_time_and_hao_controllers_refuse_it():
    m = machine()
    assert not m.is_realtime and m.output_kind == "symbol"
    assert tuple(m.output_alphabet) == AGREEMENT_SETS
    with pytest.raises(CompileError, match="ε-transitions"):
        pn.compile(m, target="stack_rnn", model="hao_lstm")
    with pytest.raises(CompileError, match="ε-transitions"):
        pn.compile(m, target="buffered_stack_rnn", model="hao_buffered")


def test_buffered_stack_rnn_verifies_exhaustively_and_on_long_strings():
    m = machine()
    net = pn.compile(m, target="buffered_stack_rnn")
    rep = pn.verify(m, net, max_length=8, samples=20, long_samples=0, overlap=False)
    assert rep.ok, rep
    long = agreement_sampler(12, list(range(30, 50)), np.random.default_rng(3))
    deep = [witness(3, 12, 3), witness(8, 2, 8)]  # object relatives closing 25 and 5 runs
    rep = pn.verify(m, net, max_length=None, samples=0, long_samples=0, strings=long + deep,
                    overlap=False)
    assert rep.ok, rep
    assert max(len(s) for s in long + deep) >= 49


def test_bad_input_is_a_typed_error():
    with pytest.raises(InputError, match="not a word"):
        agreement_next_auxiliaries(("the", "cat"))
    with pytest.raises(InputError, match="blocks"):
        machine().transduce(("the", "lobster", "have"))
    with pytest.raises(InputError, match="not accepting"):
        machine().transduce(("the", "lobster", "that"))
    assert agreement_predictor_reference(("the", "lobster", "have")) is None
    assert agreement_next_auxiliaries(("lobster",)) is None
