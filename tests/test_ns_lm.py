"""The RNS-RNN language model of a probabilistic real-time PDA (`pdanet.constructions.ns_lm`):
string probabilities against run enumeration (random machines) and the PCFGs' inside
probabilities (DuSell & Chiang's tasks), cross-entropies against the true ones, errors."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata import BOTTOM, EPSILON
from pdanet.automata.tasks.probability import cross_entropy_lower_bound, inside
from pdanet.automata.tasks.sampling import grammar_sampler
from pdanet.automata.weighted import WeightedPDA
from pdanet.constructions.ns import compile_weighted
from pdanet.constructions.ns_lm import (
    LM_TASKS,
    compile_ns_lm,
    cross_entropy,
    dusell_lm_machine,
    lm_rows,
    reachable_heads,
    string_log_probs,
)
from pdanet.errors import AutomatonError, CompileError, InputError

SIGMA = "ab"


# --- random probabilistic PDAs and a run-enumeration oracle -------------------------------------

@st.composite
def probabilistic_pda(draw):
    """(machine, exact transitions {key: Fraction}, exact stop {(q, x): Fraction}): ≤ 2 states,
    ≤ 2 stack symbols, Σ = {a, b}; each (state, top) row a few random moves (push, replace,
    pop) and, where the configuration is final, a random stop weight, normalised to sum 1; the
    machine's weights are the probabilities (real semiring) or their logs (log semiring)."""
    states = tuple(range(draw(st.integers(1, 2))))
    gamma = ("A", "B")[:draw(st.integers(1, 2))]
    mode = draw(st.sampled_from(["all", "states", "empty"]))
    accepting = None if mode == "all" else draw(st.sets(st.sampled_from(states), min_size=1))
    empty = mode == "empty"
    trans, stop = {}, {}
    for q in states:
        for x in (BOTTOM,) + gamma:
            final = (accepting is None or q in accepting) and (x is BOTTOM or not empty)
            cands = [(a, r, "push", y) for a in SIGMA for r in states for y in gamma]
            cands += [(a, r, "replace", x if x is BOTTOM else y) for a in SIGMA for r in states
                      for y in ((BOTTOM,) if x is BOTTOM else gamma)]
            cands += [] if x is BOTTOM else [(a, r, "pop", None) for a in SIGMA for r in states]
            picks = draw(st.lists(st.sampled_from(range(len(cands))), max_size=4, unique=True))
            ws = [draw(st.integers(1, 5)) for _ in picks]
            s = draw(st.integers(0, 3)) if final else 0
            if not picks and s == 0:
                picks, ws = [0], [1]
            total = sum(ws) + s
            for i, w in zip(picks, ws):
                a, r, op, y = cands[i]
                trans[(q, x, a, r, op, y)] = Fraction(w, total)
            stop[(q, x)] = Fraction(s, total)
    if draw(st.booleans()):                              # the same machine in the log semiring
        logs = {k: math.log(p) for k, p in trans.items()}
        m = WeightedPDA(states, SIGMA, gamma, logs, 0, "log", accepting=accepting,
                        empty_stack=empty)
    else:
        m = WeightedPDA(states, SIGMA, gamma, trans, 0, accepting=accepting, empty_stack=empty)
    return m, trans, stop


def run_probabilities(trans, stop, start, max_len):
    """{string: p(w)} for every string of length ≤ max_len, by enumerating runs on full
    configurations (state, stack tuple, top last) with Fractions, and {prefix: Σ run weights}."""
    configs = {(): {(start, ()): Fraction(1)}}
    probs, prefix_mass = {}, {}
    for n in range(max_len + 1):
        nxt = {}
        for w, cf in configs.items():
            prefix_mass[w] = sum(cf.values(), Fraction(0))
            probs[w] = sum((v * stop[(q, st_[-1] if st_ else BOTTOM)]
                            for (q, st_), v in cf.items()), Fraction(0))
            if n == max_len:
                continue
            for a in SIGMA:
                out: dict = {}
                for (q, st_), v in cf.items():
                    x = st_[-1] if st_ else BOTTOM
                    for (q0, x0, a0, r, op, y), p in trans.items():
                        if (q0, x0, a0) != (q, x, a):
                            continue
                        new = st_ + (y,) if op == "push" else st_[:-1] if op == "pop" else \
                            (st_[:-1] + (y,) if st_ else st_)
                        out[(r, new)] = out.get((r, new), Fraction(0)) + v * p
                nxt[w + (a,)] = out
        configs = nxt
    return probs, prefix_mass


def all_strings(alphabet, max_len):
    return [s for n in range(max_len + 1) for s in itertools.product(tuple(alphabet), repeat=n)]


def assert_log_probs(got, expected, some_positive=True):
    exp = np.array([math.log(p) if p > 0 else -math.inf for p in expected])
    fin = np.isfinite(exp)
    assert np.array_equal(fin, np.isfinite(got)), "network and oracle disagree on p(w) = 0"
    assert fin.any() or not some_positive
    np.testing.assert_allclose(got[fin], exp[fin], rtol=0, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(probabilistic_pda(), st.sampled_from(["paper", "extended"]))
def test_random_pda_string_probabilities(made, bottom):
    m, trans, stop = made
    net = compile_ns_lm(m, dtype=torch.float64, bottom=bottom)
    strings = all_strings(SIGMA, 6)
    probs, prefix_mass = run_probabilities(trans, stop, 0, 6)
    # (a machine may never stop: then every p(w) is 0)
    assert_log_probs(string_log_probs(net, strings), [probs[s] for s in strings], False)
    # every live prefix gets a distribution over Σ ∪ {EOS}; mass conservation up to length 5
    ids, _ = net.encode(strings)
    states, logp = net.forward(ids)
    live = states.sum(-1) > 0
    sums = logp.exp().sum(-1)
    np.testing.assert_allclose(sums[live].numpy(), 1.0, rtol=0, atol=1e-12)
    short = [s for s in strings if len(s) <= 5]
    total = sum(probs[s] for s in short) + sum(prefix_mass[s] for s in strings if len(s) == 6)
    assert total == 1


@settings(max_examples=30, deadline=None)
@given(probabilistic_pda())
def test_reachable_heads_contain_every_reached_configuration(made):
    m, trans, _ = made
    reach = reachable_heads(m)
    configs = {(0, ())}
    seen = set()
    for _ in range(7):
        new = set()
        for q, st_ in configs:
            x = st_[-1] if st_ else BOTTOM
            seen.add((q, m.stack_index(x)))
            for (q0, x0, _a, r, op, y), p in trans.items():
                if (q0, x0) == (q, x) and p > 0:
                    new.add((r, st_ + (y,) if op == "push" else st_[:-1] if op == "pop"
                             else (st_[:-1] + (y,) if st_ else st_)))
        configs = new
    for q, x in seen:
        assert reach[q, x], (q, x)


def test_unreachable_rows_need_not_be_normalised():
    # (1, A) is never reached (nothing pushes A in state 1): its row may be anything ≤ 1
    t = {(0, BOTTOM, "a", 0, "push", "A"): Fraction(1, 2),
         (0, "A", "a", 0, "pop", None): Fraction(1, 2), (0, "A", "b", 1, "replace", "B"): 0.5,
         (1, "B", "b", 0, "pop", None): 1.0, (1, "A", "a", 1, "pop", None): 0.25}
    m = WeightedPDA((0, 1), "ab", "AB", t, 0, accepting={0}, empty_stack=True)
    reach = reachable_heads(m)
    assert reach[0, 0] and reach[0, 1] and reach[1, 2] and not reach[1, 1] and not reach[1, 0]
    emit, stop = lm_rows(m)
    assert stop[0, 0] == Fraction(1, 2) and stop[1, 1] == 0 and stop[1, 2] == 0
    assert list(emit[0, 1]) == [Fraction(1, 2), Fraction(1, 2)] and list(emit[1, 2]) == [0, 1]
    net = compile_ns_lm(m, dtype=torch.float64)
    # a a b b is not a run (b on A goes to state 1 with B); a b b: push A, A→B, pop: 1/2·1/2·1·1/2
    lp = string_log_probs(net, ["", "ab", "abb", "aa"])
    np.testing.assert_allclose(lp[[0, 2, 3]], np.log([1 / 2, 1 / 8, 1 / 8]), atol=1e-12)
    assert lp[1] == -math.inf


# --- DuSell & Chiang's tasks ------------------------------------------------------------------

ORACLE_LEN = {"marked_reversal": 5, "unmarked_reversal": 6, "padded_reversal": 6, "dyck": 4}


@pytest.mark.parametrize("task", LM_TASKS)
def test_task_machine_is_the_pcfg(task):
    m, g = dusell_lm_machine(task)
    net = compile_ns_lm(m, dtype=torch.float64)
    strings = all_strings(m.alphabet, ORACLE_LEN[task])
    assert_log_probs(string_log_probs(net, strings), [inside(g, s) for s in strings])


@pytest.mark.parametrize("task", LM_TASKS)
def test_task_cross_entropy_matches_the_true_distribution(task):
    """float32 network on 20 strings sampled as the paper does (length uniform over the valid
    lengths of a range, then the PCFG given the length)."""
    m, g = dusell_lm_machine(task)
    table = g.length_table(24, weighted=True)
    lengths = [n for n in range(12, 25) if math.isfinite(float(table.total(n)))]
    strings = grammar_sampler(g, 20, lengths, np.random.default_rng(1))
    net = compile_ns_lm(m, dtype=torch.float32)
    lp = string_log_probs(net, strings)
    symbols = sum(len(s) + 1 for s in strings)
    ce = -lp.sum() / symbols
    true = -sum(math.log(inside(g, s)) for s in strings) / symbols
    assert abs(ce - true) < 1e-5                     # the issue asks 1e-3; float32 gives ~1e-7
    assert abs(cross_entropy(net, strings) - ce) < 1e-12
    # the paper's lower bound (length uniform over `lengths`): the network given the length
    log_len = np.array([float(table.total(len(s))) for s in strings])
    given_len = (-(lp - log_len).sum() + len(strings) * math.log(len(lengths))) / symbols
    assert abs(given_len - cross_entropy_lower_bound(g, strings, len(lengths))) < 1e-5


def test_softmax_head_exact_on_deterministic_tasks_and_not_on_guessing_ones():
    rng = np.random.default_rng(2)
    for task, deterministic in (("marked_reversal", True), ("dyck", True),
                                ("unmarked_reversal", False)):
        m, g = dusell_lm_machine(task)
        table = g.length_table(20, weighted=True)
        lengths = [n for n in range(10, 21) if math.isfinite(float(table.total(n)))]
        strings = grammar_sampler(g, 10, lengths, rng)
        exact = string_log_probs(compile_ns_lm(m, dtype=torch.float64), strings)
        soft_net = compile_ns_lm(m, dtype=torch.float64, head="softmax")
        soft = string_log_probs(soft_net, strings)
        _, logp = soft_net.forward(soft_net.encode(strings)[0])
        np.testing.assert_allclose(logp.exp().sum(-1).numpy(), 1.0, atol=1e-12)
        gap = np.abs(soft - exact).max()
        # deterministic: one-hot readings, off by the floor's mass only; guessing: a mixture
        assert gap < 1e-6 if deterministic else gap > 1e-2, (task, gap)


def test_network_reading_is_the_stack_reading():
    m, _ = dusell_lm_machine("unmarked_reversal")
    net = compile_ns_lm(m, dtype=torch.float64)
    base = compile_weighted(m, dtype=torch.float64)
    ids, lengths = net.encode(["0110", "01", "0"])
    states = net.forward(ids)[0]
    np.testing.assert_array_equal(states.numpy(), base.forward(ids)[0].numpy())
    lang = m.run_batch(ids.numpy(), lengths)["reading"]               # Lang's algorithm
    np.testing.assert_allclose(net.decode(states)["reading"], lang, rtol=0, atol=1e-12)
    assert net.construction == "ns_lm/exact" and net.run("0110")["reading"].shape == (5, 2, 3)
    dist = net.run("01")["output"]
    np.testing.assert_allclose(dist.sum(-1), 1.0, atol=1e-12)


# --- errors -----------------------------------------------------------------------------------

def _machine(t, **kw):
    return WeightedPDA((0, 1), "ab", "A", t, 0, **kw)


def test_rows_above_one_are_refused():
    t = {(0, BOTTOM, "a", 0, "push", "A"): 0.75, (0, BOTTOM, "b", 0, "replace", BOTTOM): 0.5}
    with pytest.raises(AutomatonError, match="sum to 1.25 > 1"):
        compile_ns_lm(_machine(t))


def test_stop_mass_outside_acceptance_is_refused():
    t = {(0, BOTTOM, "a", 0, "push", "A"): 0.5, (0, "A", "b", 0, "pop", None): 0.5}
    with pytest.raises(AutomatonError, match="does not accept"):
        compile_ns_lm(_machine(t, accepting={0}, empty_stack=True))
    with pytest.raises(AutomatonError, match="does not accept"):
        compile_ns_lm(_machine(t, accepting={1}))


def test_epsilon_arcs_and_other_machines_are_refused():
    t = {(0, BOTTOM, EPSILON, 1, "replace", BOTTOM): 0.5, (0, BOTTOM, "a", 0, "push", "A"): 0.5}
    with pytest.raises(AutomatonError, match="ε-arc"):
        compile_ns_lm(_machine(t))
    with pytest.raises(CompileError, match="WeightedPDA"):
        compile_ns_lm("not a machine")
    trop = WeightedPDA((0,), "a", "A", {(0, BOTTOM, "a", 0, "push", "A"): 0.0}, 0,
                       semiring="tropical")
    with pytest.raises(AutomatonError, match="tropical"):
        compile_ns_lm(trop)


def test_bad_options_are_refused():
    m, _ = dusell_lm_machine("marked_reversal")
    with pytest.raises(CompileError, match="window"):
        compile_ns_lm(m, window=4)
    with pytest.raises(CompileError, match="head"):
        compile_ns_lm(m, head="sigmoid")
    with pytest.raises(CompileError, match="bottom"):
        compile_ns_lm(m, bottom="reachable")
    for floor in (0, 3, 2.5, True):
        with pytest.raises(CompileError, match="floor"):
            compile_ns_lm(m, head="softmax", floor=floor)
    with pytest.raises(InputError, match="tolerance"):
        compile_ns_lm(m, tolerance=0.5)
    with pytest.raises(InputError, match="hardest CFL"):
        dusell_lm_machine("hardest_cfl")
    with pytest.raises(InputError, match="unknown task"):
        dusell_lm_machine("copy")
    with pytest.raises(InputError, match="ns_lm"):
        string_log_probs(compile_weighted(m), ["0#0"])
    with pytest.raises(InputError, match="no strings"):
        cross_entropy(compile_ns_lm(m), [])
