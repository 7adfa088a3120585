"""PDA acceptance-mode conversions and PDA → CFG, against brute-force enumeration of languages."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.conversions import (
    Fresh,
    Triple,
    accepts_empty,
    pda_to_cfg,
    to_empty_stack,
    to_final_state,
)
from pdanet.automata.grammar import CFG, GrammarError
from pdanet.automata.pda import DPDA, PDA
from pdanet.errors import AutomatonError, InputError, SearchBoundError

SIGMA = ("a", "b")
N = 6
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def strings(n: int = N):
    for k in range(n + 1):
        yield from itertools.product(SIGMA, repeat=k)


def pda_language(pda: PDA, n: int = N) -> frozenset:
    """Every accepted string of length ≤ n, by stepping the configuration sets along a trie."""
    out = set()
    frontier = [((), pda.initial())]
    while frontier:
        w, c = frontier.pop()
        if pda.output(c):
            out.add(w)
        if len(w) < n and c:
            frontier.extend((w + (a,), pda.step(c, a)) for a in SIGMA)
    return frozenset(out)


def cfg_language(g: CFG, n: int = N) -> frozenset:
    """Every generated string of length ≤ n, by a least fixpoint over sets of yields (bottom up,
    independent of `CFG.generates`)."""
    yields: dict = {a: set() for a in g.nonterminals}
    changed = True
    while changed:
        changed = False
        for r in g.rules:
            parts = {()}
            for x in r.body:
                options = yields[x] if g.is_nonterminal(x) else {(x,)}
                parts = {u + v for u in parts for v in options if len(u) + len(v) <= n}
                if not parts:
                    break
            if not parts <= yields[r.lhs]:
                yields[r.lhs] |= parts
                changed = True
    return frozenset(yields[g.start])


# --- random machines ------------------------------------------------------------------------------
@st.composite
def random_pda(draw, acceptance: str | None = None) -> PDA:
    """Up to 3 states over {a, b} with stack symbols A, B: each (state, input or ε, top) has
    moves with some probability (ε-moves less often), each pushing at most 2 symbols."""
    nq = draw(st.integers(1, 3))
    states = [f"q{i}" for i in range(nq)]
    rng = random.Random(draw(st.integers(0, 2**32)))
    trans: dict = {}
    for q, a, x in itertools.product(states, SIGMA + (EPSILON,), ("A", "B", BOTTOM)):
        if rng.random() < (0.15 if a is EPSILON else 0.7):
            for _ in range(rng.choice((1, 1, 2))):
                g = tuple(rng.choice("AB") for _ in range(rng.choice((0, 1, 1, 2))))
                trans.setdefault((q, a, x), set()).add(
                    (rng.choice(states), g + (BOTTOM,) if x is BOTTOM else g))
    mode = acceptance or draw(st.sampled_from(("final_state", "empty_stack")))
    accepting = [q for q in states if rng.random() < 0.5] if mode == "final_state" else ()
    return PDA(states, SIGMA, "AB", trans, "q0", accepting=accepting, acceptance=mode,
               max_configs=300)


@st.composite
def random_cfg(draw) -> CFG:
    """One to three nonterminals with one to three rules each (bodies of at most 3 symbols)."""
    nts = ["S", "T", "U"][:draw(st.integers(1, 3))]
    rng = random.Random(draw(st.integers(0, 2**32)))
    rules = {}
    for a in nts:
        bodies = {tuple(rng.choice(nts + list(SIGMA) * 2) for _ in range(rng.choice((0, 1, 2, 3))))
                  for _ in range(rng.choice((1, 2, 3)))}
        rules[a] = sorted(bodies)
    return CFG(nts, SIGMA, rules, "S")


def language_or_skip(pda: PDA) -> frozenset:
    try:
        return pda_language(pda)
    except SearchBoundError:        # an ε-cycle that pushes: simulation cannot decide
        assume(False)
        raise


# --- acceptance modes -----------------------------------------------------------------------------
@SETTINGS
@given(random_pda())
def test_mode_conversions_preserve_the_language(pda):
    lang = language_or_skip(pda)
    assert accepts_empty(pda) == (() in lang)
    f = to_final_state(pda)
    # the converted machines' ε-closures are larger (a drain state, a new bottom): the simulation
    # may hit its configuration cap where the original's did not, and then cannot decide
    assert f.acceptance == "final_state" and language_or_skip(f) == lang
    if () in lang:
        e = to_empty_stack(pda)
        assert e.acceptance == "empty_stack" and language_or_skip(e) == lang
        assert language_or_skip(to_final_state(to_empty_stack(f))) == lang
    else:
        with pytest.raises(AutomatonError, match="does not accept the empty string"):
            to_empty_stack(pda)


@SETTINGS
@given(random_pda())
def test_pda_to_cfg_generates_the_language(pda):
    lang = language_or_skip(pda)
    g = pda_to_cfg(pda)
    assert g.terminals.symbols == SIGMA
    assert cfg_language(g) == lang


@SETTINGS
@given(random_cfg())
def test_round_trip_cfg_pda_mode_conversion_cfg(g):
    lang = cfg_language(g, 8)
    assert {w for w in lang if len(w) <= 6} == {w for w in strings(6) if g.generates(w)}
    final = g.to_pda()
    assert cfg_language(pda_to_cfg(final), 8) == lang
    if () in lang:
        empty = g.to_pda(mode="empty_stack")
        assert cfg_language(pda_to_cfg(empty), 8) == lang
        assert cfg_language(pda_to_cfg(to_empty_stack(final)), 8) == lang
        assert cfg_language(pda_to_cfg(to_final_state(empty)), 8) == lang
    else:
        with pytest.raises(AutomatonError):
            to_empty_stack(final)


def test_anbn_round_trip_and_fresh_names():
    g = CFG.parse("S -> a S b | ε", name="anbn")
    e = to_empty_stack(g.to_pda())
    assert {x for x in e.states if isinstance(x, Fresh)} == {Fresh("start"), Fresh("drain")}
    ee = to_empty_stack(to_final_state(e))             # fresh names avoid the earlier ones
    assert Fresh("start", 1) in ee.states and Fresh("bottom", 1) in ee.stack_alphabet
    back = pda_to_cfg(ee, name="again")
    assert back.name == "again" and all(isinstance(t, Triple) for t in back.nonterminals[1:])
    for w in strings(8):
        k = len(w) // 2
        assert back.generates(w) == (w == ("a",) * k + ("b",) * k and len(w) % 2 == 0)
    assert to_final_state(g.to_pda()) is not None and to_empty_stack(e) is e


def test_empty_language_and_epsilon_cycles():
    # no accepting state: the empty language, as a grammar that derives nothing
    dead = PDA(["q"], "ab", "A", {("q", "a", BOTTOM): ("q", ("A", BOTTOM))}, "q")
    g = pda_to_cfg(dead)
    assert not any(g.generates(w) for w in strings())
    # an ε-cycle that pushes forever: simulation gives up, the exact decision does not
    loop = PDA(["q", "f"], "a", "A", {("q", EPSILON, BOTTOM): {("q", ("A", BOTTOM))},
                                      ("q", EPSILON, "A"): {("q", ("A", "A")), ("f", ("A",))}},
               "q", accepting=["f"], max_configs=50)
    with pytest.raises(SearchBoundError):
        loop.accepts("")
    assert accepts_empty(loop)
    assert pda_to_cfg(loop).generates("") and not pda_to_cfg(loop).generates("a")


def test_bad_inputs_are_typed_errors():
    dpda = DPDA(["q"], "a", "A", {("q", "a", BOTTOM): ("q", (BOTTOM,))}, "q", accepting=["q"])
    for f in (to_empty_stack, to_final_state, pda_to_cfg, accepts_empty):
        with pytest.raises(InputError, match="nondeterministic `PDA`"):
            f(dpda)
    pda = CFG.parse("S -> a S a S a S a | ε").to_pda()
    with pytest.raises(InputError, match="max_rules"):
        pda_to_cfg(pda, max_rules=0)
    with pytest.raises(GrammarError, match="max_rules=10"):
        pda_to_cfg(pda, max_rules=10)
