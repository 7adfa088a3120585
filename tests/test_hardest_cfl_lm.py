"""Greibach's hardest CFL (DuSell & Chiang's grammar, with ``$``) as a language model: the
real-time weighted PDA against the grammar's derivations (exact rationals, every string up to
length 10), the locally normalised PDA and the renormalised PCFG against p_G(w | |w|), weight
pushing on random machines, the compiled NS-RNN's cross-entropy against the true one, and the
experiment protocol."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.tasks.dusell2021 import (
    HARDEST_LENGTH_WEIGHT,
    hardest_cfl_grammar,
    hardest_cfl_lm,
    hardest_cfl_reference,
    hardest_cfl_weighted_pda,
)
from pdanet.automata.tasks.probability import (
    cross_entropy_lower_bound,
    inside,
    normalise_grammar,
    partition_function,
    push_weights,
    solve_monotone,
)
from pdanet.automata.tasks.sampling import grammar_sampler
from pdanet.automata.weighted import WeightedPDA
from pdanet.constructions.ns_lm import (
    compile_ns_lm,
    dusell_lm_machine,
    lm_rows,
    string_log_probs,
)
from pdanet.errors import AutomatonError, InputError
from pdanet.verify.distribution import verify_lm

# --- oracles -------------------------------------------------------------------------------------


def grammar_weights(g, n_max: int) -> dict:
    """{string: total weight of its derivations} (exact Fractions) for every string of length
    ≤ n_max, by expanding the rules over every split of every length (no same-length cycles)."""
    nts = set(g.nonterminals)
    rules = [(r.lhs, r.body, Fraction(w)) for r, w in zip(g.rules, g.rule_weights())]
    memo: dict = {}

    def minlen(body) -> int:
        return sum(g.min_yield[x] if x in nts else 1 for x in body)

    def lang(x, n) -> dict:
        if x not in nts:
            return {(x,): Fraction(1)} if n == 1 else {}
        if (x, n) not in memo:
            memo[x, n] = None
            out: dict = {}
            for lhs, body, w in rules:
                if lhs == x:
                    for s, v in seq(body, n).items():
                        out[s] = out.get(s, 0) + w * v
            memo[x, n] = out
        assert memo[x, n] is not None, "a same-length cycle"
        return memo[x, n]

    def seq(body, n) -> dict:
        if not body:
            return {(): Fraction(1)} if n == 0 else {}
        out: dict = {}
        for k in range(n - minlen(body[1:]) + 1):
            head = lang(body[0], k)
            if head:
                tail = seq(body[1:], n - k)
                for a, wa in head.items():
                    for b, wb in tail.items():
                        out[a + b] = out.get(a + b, 0) + wa * wb
        return out

    res: dict = {}
    for n in range(n_max + 1):
        res.update(lang(g.start, n))
    return res


def run_weights(m: WeightedPDA, n_max: int) -> dict:
    """{string: total weight of the accepting runs, times the stop probability 1 − row sum for
    a real machine} by enumerating every run (configurations with the whole stack) up to
    length n_max; runs that cannot accept within n_max steps are pruned."""
    exact = m.semiring.name == "rational"
    moves: dict = {}
    for (q, x, a, r, op, y), w in m.transitions.items():
        moves.setdefault((q, x), []).append((a, r, op, y, w))
    ret = {x: r for (q, x, a, r, op, y) in m.transitions if op == "pop"}
    tops = (BOTTOM,) + tuple(m.stack_alphabet.symbols)
    inf = math.inf
    dist = {(q, x): (0 if x is BOTTOM and q in m.accepting else inf)
            for q in m.states for x in tops}
    changed = True
    while changed:               # the fewest steps that pop the top cell (accept on ⊥)
        changed = False
        for (q, x, a, r, op, y) in m.transitions:
            d = (1 if op == "pop" else 1 + dist[r, y] if op == "replace"
                 else 1 + dist[r, y] + dist[ret[y], x] if y in ret else inf)
            if d < dist[q, x]:
                dist[q, x], changed = d, True

    def least(q, stack) -> float:
        return dist[q, stack[-1]] + sum(dist[ret[stack[i + 1]], stack[i]] if stack[i + 1] in ret
                                        else inf for i in range(len(stack) - 1))

    def stop(q) -> Fraction | float:
        if exact:
            return Fraction(1)
        return 1.0 - sum(v for (_, _, _, _, v) in moves.get((q, BOTTOM), ()))

    one = Fraction(1) if exact else 1.0
    frontier = {(m.start, (BOTTOM,), ()): one}
    out: dict = {}
    for step in range(n_max + 1):
        for (q, stack, s), w in frontier.items():
            if q in m.accepting and stack == (BOTTOM,):
                out[s] = out.get(s, 0) + w * stop(q)
        if step == n_max:
            break
        nxt: dict = {}
        for (q, stack, s), w in frontier.items():
            for a, r, op, y, v in moves.get((q, stack[-1]), ()):
                st_ = stack + (y,) if op == "push" else stack[:-1] if op == "pop" \
                    else stack[:-1] + (y,)
                if step + 1 + least(r, st_) > n_max:
                    continue
                key = (r, st_, s + (a,))
                nxt[key] = nxt.get(key, 0) + w * v
        frontier = nxt
    return out


# --- the real-time weighted PDA is the grammar ----------------------------------------------------

def test_weighted_pda_is_the_grammar_exactly_up_to_length_10():
    """Every string of length ≤ 10 (11,780 in the language): the PDA's weight is the grammar's
    weight times λ^|w|, as exact rationals; the support is the language of the definition."""
    g = hardest_cfl_grammar()
    lam = Fraction(1, 3)
    expect = grammar_weights(g, 10)
    got = run_weights(hardest_cfl_weighted_pda(lam), 10)
    assert len(expect) == 11_780 and set(got) == set(expect)
    assert all(got[s] == expect[s] * lam ** len(s) for s in expect)
    assert all(hardest_cfl_reference(s) for s in expect)
    assert (",", "$", "(", ")", ",", ";") in expect


@settings(max_examples=8, deadline=None)
@given(commas=st.sampled_from([Fraction(1, 2), Fraction(2), Fraction(1, 5)]),
       short=st.sampled_from([Fraction(1, 2), Fraction(3)]),
       long_=st.sampled_from([Fraction(2), Fraction(5, 4)]),
       semi=st.sampled_from([Fraction(1, 4), Fraction(2, 3)]),
       splits=st.sampled_from([Fraction(3, 2), Fraction(1, 4)]),
       depth=st.sampled_from([Fraction(3), Fraction(11, 10)]),
       lam=st.sampled_from([Fraction(1, 7), Fraction(1, 2), Fraction(2)]))
def test_weighted_pda_is_the_grammar_for_other_weights(commas, short, long_, semi, splits,
                                                       depth, lam):
    params = {"mean_num_commas": commas, "mean_short_filler_length": short,
              "mean_long_filler_length": long_, "semicolon_probability": semi,
              "mean_bracket_splits": splits, "mean_nesting_depth": depth}
    expect = grammar_weights(hardest_cfl_grammar(**params), 8)
    got = run_weights(hardest_cfl_weighted_pda(lam, **params), 8)
    assert set(got) == set(expect)
    assert all(got[s] == expect[s] * lam ** len(s) for s in expect)


# --- the language model: p(w | n) is the grammar's -----------------------------------------------

def _given_length(weights: dict) -> dict:
    totals: dict = {}
    for s, w in weights.items():
        totals[len(s)] = totals.get(len(s), 0) + w
    return {s: w / totals[len(s)] for s, w in weights.items()}


@pytest.mark.parametrize("lam", [Fraction(1, 5), HARDEST_LENGTH_WEIGHT])
def test_language_model_conditional_is_the_grammars(lam):
    """The normalised PDA (floats) against the exact grammar: p(w | n) to 1e-12 relative for
    every string of length ≤ 10, p(w) = weight_G(w)·λ^|w| / Z(λ) with Z from the grammar's own
    partition function, the renormalised PCFG's inside probability = the PDA's, and the rows
    sum to one (lm_rows accepts the machine)."""
    g = hardest_cfl_grammar()
    m, pcfg = hardest_cfl_lm(lam)
    lm_rows(m)
    exact = grammar_weights(g, 10)
    got = run_weights(m, 10)
    assert set(got) == set(exact)
    cond_exact, cond_got = _given_length(exact), _given_length(got)
    assert max(abs(cond_got[s] / float(cond_exact[s]) - 1) for s in exact) < 1e-12
    z = partition_function(g, lam)[0]["S'"]
    for s in list(exact)[::97]:
        p = float(exact[s]) * float(lam) ** len(s) / z
        assert got[s] == pytest.approx(p, rel=1e-12)
        assert inside(pcfg, s) == pytest.approx(p, rel=1e-12)
    assert dusell_lm_machine("hardest_cfl", length_weight=lam)[0] == m


def test_completion_weights_residual_and_divergence():
    _, residual = push_weights(hardest_cfl_weighted_pda())
    assert residual < 1e-14
    assert partition_function(hardest_cfl_grammar(), HARDEST_LENGTH_WEIGHT)[1] < 1e-14
    for bad in (Fraction(2, 5), 1):
        with pytest.raises(InputError, match="length weight"):
            hardest_cfl_lm(bad)
        with pytest.raises(InputError, match="length weight"):
            partition_function(hardest_cfl_grammar(), bad)
    for bad in (0, -1, "1/3", True, None):
        with pytest.raises(InputError, match="length_weight"):
            hardest_cfl_weighted_pda(bad)
    with pytest.raises(InputError, match="length_weight"):
        partition_function(hardest_cfl_grammar(), 0)
    with pytest.raises(InputError, match="mean_num_commas"):
        hardest_cfl_lm(mean_num_commas=-1)


def test_solve_monotone_finds_the_least_solution():
    """x = 1/4 + x²/... : x = a + b x² has least root (1 − sqrt(1 − 4ab)) / (2b)."""
    for a, b in ((0.25, 0.5), (0.1, 2.0), (0.25, 1.0)):
        x, residual = solve_monotone([(0, a, ()), (0, b, (0, 0))], 1, "test")
        assert x[0] == pytest.approx((1 - math.sqrt(1 - 4 * a * b)) / (2 * b), rel=1e-7)
        assert residual < 1e-9
    with pytest.raises(InputError, match="diverges|converge"):
        solve_monotone([(0, 0.5, ()), (0, 1.0, (0, 0))], 1, "test")


# --- weight pushing on random machines ----------------------------------------------------------

@st.composite
def returning_pda(draw):
    """A real-time weighted PDA (rational weights ≤ 1/8, ≤ 6 moves per (state, top): the
    completion weights are finite) in which each stack symbol is popped into one state."""
    states = tuple(range(draw(st.integers(1, 3))))
    gamma = ("A", "B")[:draw(st.integers(1, 2))]
    ret = {y: draw(st.sampled_from(states)) for y in gamma}
    accepting = draw(st.sets(st.sampled_from(states), min_size=1))
    t: dict = {}
    for q in states:
        for x in (BOTTOM,) + gamma:
            cands = [(a, r, "push", y) for a in "ab" for r in states for y in gamma]
            cands += [(a, r, "replace", x if x is BOTTOM else y) for a in "ab" for r in states
                      for y in ((BOTTOM,) if x is BOTTOM else gamma) if x is BOTTOM or ret[y] ==
                      ret[x]]
            cands += [] if x is BOTTOM else [(a, ret[x], "pop", None) for a in "ab"]
            for a, r, op, y in draw(st.lists(st.sampled_from(cands), max_size=6, unique=True)):
                t[(q, x, a, r, op, y)] = Fraction(draw(st.sampled_from([1, 2])), 16)
    return WeightedPDA(states, "ab", gamma, t, 0, "rational", accepting=accepting,
                       empty_stack=True)


@settings(max_examples=30, deadline=None)
@given(returning_pda())
def test_push_weights_normalises_and_keeps_the_distribution(m):
    """Rows of the pushed machine sum to one outside acceptance, and p(w) / weight(w) is the
    same constant (1/β(start, ⊥)) for every string of length ≤ 5."""
    pushed, residual = push_weights(m)
    assert residual < 1e-9
    for (q, x) in {(k[0], k[1]) for k in pushed.transitions}:
        total = sum(w for k, w in pushed.transitions.items() if k[:2] == (q, x))
        if x is BOTTOM and q in m.accepting:
            assert total < 1 + 1e-12
        else:
            assert total == pytest.approx(1.0, abs=1e-12)
    weights = run_weights(m, 5)
    probs = run_weights(pushed, 5)
    live = {s: w for s, w in weights.items() if w > 0}
    assert set(probs) <= set(weights)
    ratios = [probs[s] / float(w) for s, w in live.items()]
    if ratios:
        assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)
        assert sum(probs.values()) <= 1 + 1e-9


def test_push_weights_errors():
    t = {(0, BOTTOM, "a", 0, "push", "A"): 0.5, (0, "A", "a", 0, "pop", None): 0.25,
         (0, "A", "b", 1, "pop", None): 0.25}
    with pytest.raises(AutomatonError, match="popped into states"):
        push_weights(WeightedPDA((0, 1), "ab", "A", t, 0, accepting=(0,), empty_stack=True))
    ok = {(0, BOTTOM, "a", 0, "push", "A"): 0.5, (0, "A", "a", 0, "pop", None): 0.25}
    with pytest.raises(AutomatonError, match="empty stack"):
        push_weights(WeightedPDA((0,), "ab", "A", ok, 0, accepting=(0,)))
    with pytest.raises(AutomatonError, match="semiring"):
        push_weights(WeightedPDA((0,), "ab", "A", {k: math.log(w) for k, w in ok.items()}, 0,
                                 "log", accepting=(0,), empty_stack=True))
    with pytest.raises(InputError, match="WeightedPDA"):
        push_weights(hardest_cfl_grammar())
    loop = {(0, BOTTOM, "a", 0, "replace", BOTTOM): 1.0}
    with pytest.raises(InputError, match="diverges|converge"):
        push_weights(WeightedPDA((0,), "ab", "A", loop, 0, accepting=(0,), empty_stack=True))
    with pytest.raises(InputError, match="grammar"):
        normalise_grammar("S -> a")


# --- the compiled network --------------------------------------------------------------------------

def test_exact_head_cross_entropy_is_the_bound():
    """40 strings drawn as the paper does (length uniform over 6–12, then p_G given the
    length): the exact head's cross-entropy given the length equals the true distribution's
    (DuSell & Chiang's lower bound) — measured |Δ| ~ 1e-15 in float64; the issue asks 1e-3."""
    m, g = dusell_lm_machine("hardest_cfl")
    lengths = list(range(6, 13))
    strings = grammar_sampler(g, 40, lengths, np.random.default_rng(3))
    net = compile_ns_lm(m, dtype=torch.float64, bottom="extended")
    lp = string_log_probs(net, strings)
    symbols = sum(len(s) + 1 for s in strings)
    table = g.length_table(12, weighted=True)
    log_len = np.array([float(table.total(len(s))) for s in strings])
    given_len = (-(lp - log_len).sum() + len(strings) * math.log(len(lengths))) / symbols
    bound = cross_entropy_lower_bound(hardest_cfl_grammar(), strings, len(lengths))
    assert abs(given_len - bound) < 1e-9
    assert np.allclose(lp, [math.log(inside(g, s)) for s in strings], rtol=0, atol=1e-9)


def test_pn_compile_and_verify_by_distribution():
    import pdanet as pn

    m, _ = dusell_lm_machine("hardest_cfl")
    net = pn.compile(m, target="ns_lm")
    # batches of 32: the chart of a batch is B·(Q·G)²·(T+1)² floats (Q·G = 108 here)
    report = verify_lm(m, net, max_length=4, samples=3, sample_lengths=(8, 10), batch_size=32)
    assert report.ok, report.counterexample
    assert report.phase("exhaustive").strings > 0
    soft = pn.compile(m, target="ns_lm", method="softmax")
    assert soft.info["head"] == "softmax"


def test_protocol_runs_on_tiny_data():
    from dataclasses import replace

    from pdanet.experiments import protocol
    from pdanet.experiments.lm import build_lm, ce_difference, lm_datasets, model_nll

    p = protocol("dusell2021", "hardest_cfl_lm")
    sz = replace(p.size("small"), train_lengths=(6, 7, 8), test_lengths=(9,), n_train=6,
                 n_valid=4, n_test_per_length=2, epochs=0, batch_size=4)
    sets, machine, _ = lm_datasets(p, sz, seed=0)
    assert all(hardest_cfl_reference(s) for s in sets["train"].strings)
    model, _ = build_lm(machine, "ns_lm_exact", "compiled")
    z = model_nll(model, sets["test"])
    assert ce_difference(z, sets["test"], pcfg=True) == pytest.approx(0.0, abs=1e-5)
