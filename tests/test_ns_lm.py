"""The RNS-RNN language model of a probabilistic real-time PDA (`pdanet.constructions.ns_lm`):
string probabilities against run enumeration (random machines) and the PCFGs' inside
probabilities (DuSell & Chiang's tasks), cross-entropies against the true ones, errors."""

import copy
import dataclasses
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
    NSLMChart,
    PDALanguageModel,
    compile_ns_lm,
    cross_entropy,
    dusell_lm_machine,
    example_lm_machine,
    lm_rows,
    reachable_heads,
    string_log_probs,
)
from pdanet.errors import AutomatonError, CompileError, InputError, VerificationError
from pdanet.verify.distribution import LMReport, verify_lm

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
#: the tasks with a PCFG; the hardest CFL (18 states, shortest string of length 6) has its own
#: tests in tests/test_hardest_cfl_lm.py
PCFG_TASKS = tuple(t for t in LM_TASKS if t != "hardest_cfl")


@pytest.mark.parametrize("task", PCFG_TASKS)
def test_task_machine_is_the_pcfg(task):
    m, g = dusell_lm_machine(task)
    net = compile_ns_lm(m, dtype=torch.float64)
    strings = all_strings(m.alphabet, ORACLE_LEN[task])
    assert_log_probs(string_log_probs(net, strings), [inside(g, s) for s in strings])


@pytest.mark.parametrize("task", PCFG_TASKS)
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
    with pytest.raises(InputError, match="length_weight"):
        dusell_lm_machine("hardest_cfl", length_weight=0)
    with pytest.raises(InputError, match="unknown task"):
        dusell_lm_machine("copy")
    with pytest.raises(InputError, match="ns_lm"):
        string_log_probs(compile_weighted(m), ["0#0"])
    with pytest.raises(InputError, match="no strings"):
        cross_entropy(compile_ns_lm(m), [])


# --- the machine as a language model, and verify_lm on ns_lm networks ---------------------------

def _prod(values):
    out = Fraction(1)
    for v in values:
        out *= v
    return out


@settings(max_examples=25, deadline=None)
@given(probabilistic_pda())
def test_language_model_is_the_run_enumeration(made):
    """`PDALanguageModel`: p(w) and the prefix mass against run enumeration (to float rounding
    of the weights); the next-symbol rows are exact Fractions whose product telescopes to p(w)
    exactly; the float64 rows, log prefix probabilities and the dead test agree."""
    m, trans, stop = made
    lm = PDALanguageModel(m)
    probs, prefix_mass = run_probabilities(trans, stop, 0, 4)
    strings = all_strings(SIGMA, 4)
    ids, lengths = lm.encode(strings)
    tr = lm.run_batch(ids, lengths)
    k = len(SIGMA)
    for i, w in enumerate(strings):
        p, mass = lm.prob(w), lm.prob(w, eos=False)
        assert math.isclose(float(p), float(probs[w]), rel_tol=1e-9, abs_tol=1e-15)
        assert math.isclose(float(mass), float(prefix_mass[w]), rel_tol=1e-9, abs_tol=1e-15)
        assert lm.is_dead(lm.run(w)) == (prefix_mass[w] == 0)
        lp = tr["log_prefix"][i, len(w)]
        assert (lp == -math.inf) if mass == 0 else math.isclose(lp, math.log(mass), rel_tol=1e-9, abs_tol=1e-12)
        if mass == 0:
            assert not tr["output"][i, len(w)].any()
            continue
        if lm.is_exact:
            rows = [lm.exact_row(lm.run(w[:t])) for t in range(len(w) + 1)]
            factors = [rows[t][SIGMA.index(a)] for t, a in enumerate(w)] + [rows[-1][k]]
            assert _prod(factors) == p and _prod(factors[:-1]) == mass
            assert all(isinstance(v, Fraction) for v in rows[-1])
        row = np.array([float(v) for v in lm.exact_row(lm.run(w))])
        np.testing.assert_allclose(tr["output"][i, len(w)], row, rtol=0, atol=1e-12)
        np.testing.assert_allclose(lm.output(lm.run(w)), row, rtol=0, atol=1e-12)
        assert abs(row.sum() - 1) < 1e-8
        assert math.isclose(lm.logprob(w), math.log(p), rel_tol=1e-9, abs_tol=1e-12) if p > 0 else \
            lm.logprob(w) == -math.inf


@settings(max_examples=20, deadline=None)
@given(probabilistic_pda(), st.sampled_from(["paper", "extended"]))
def test_exact_head_verifies_on_random_pdas(made, bottom):
    """float64 to 1e-10 nats and float32 to 1e-4 nats at every position of every live string
    up to length 5 and of random live prefixes up to length 8."""
    m = made[0]
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        net = compile_ns_lm(m, dtype=dtype, bottom=bottom)
        report = verify_lm(m, net, max_length=5, samples=6, sample_lengths=(6, 8))
        assert report.ok, report.counterexample
        assert report.tolerance == tol and report.max_logprob_error <= tol
        assert report.strings_checked > 0 and report.positions_checked > 0


@pytest.mark.parametrize("task", PCFG_TASKS)
def test_exact_head_verifies_on_the_tasks(task):
    m, _ = dusell_lm_machine(task)
    for dtype in (torch.float64, torch.float32):
        net = compile_ns_lm(m, dtype=dtype)
        report = verify_lm(m, net, max_length=5, samples=6, sample_lengths=(8, 14),
                           long_samples=1, long_length=20)
        assert report.ok, (task, dtype, report.counterexample)
        assert report.phase("exhaustive").strings > 0 and report.phase("long").strings == 1


def test_softmax_head_fails_on_unmarked_reversal_with_a_counterexample():
    m, _ = dusell_lm_machine("unmarked_reversal")
    net = compile_ns_lm(m, dtype=torch.float32, head="softmax")   # floor mass 2e-9 < 1e-4
    report = verify_lm(m, net, max_length=4, samples=0)
    assert not report.ok and isinstance(report, LMReport)
    cex = report.counterexample
    assert cex.phase == "exhaustive" and 0 <= cex.position <= len(cex.string)
    assert cex.symbol in m.alphabet.symbols + (PDALanguageModel(m).eos,)
    assert cex.error > 1e-2 and "position" in str(cex)
    # the counterexample's expected value is the machine's exact distribution there
    lm = PDALanguageModel(m)
    row = lm.exact_row(lm.run(cex.string[:cex.position]))
    assert math.isclose(cex.expected, math.log(row[lm.output_alphabet.index(cex.symbol)]),
                        rel_tol=1e-12)
    # the reading is a mixture there (the machine guesses the middle); the exact head is right
    reading = lm.run_batch(*lm.encode([cex.string[:cex.position]]))["reading"][0, -1]
    assert (reading > 0).sum() > 1
    assert verify_lm(m, compile_ns_lm(m, dtype=torch.float32), max_length=4, samples=0).ok


def _corrupted(net, name, change):
    module = copy.deepcopy(net.module)
    with torch.no_grad():
        change(module.state_dict()[name])
    return dataclasses.replace(net, module=module)


def test_corrupted_weights_fail():
    m = example_lm_machine()
    net = compile_ns_lm(m, dtype=torch.float64)
    assert verify_lm(m, net, max_length=5, samples=0).ok
    zero = m.alphabet.index("0")
    head = _corrupted(net, "head.weight", lambda w: w[zero].mul_(1.01))
    report = verify_lm(m, head, max_length=5, samples=0)
    assert not report.ok and report.counterexample.position == 0
    one = m.alphabet.index("1")                      # reading 1 acts as reading 0
    emb = _corrupted(net, "ns.embedding.weight", lambda w: w[one].copy_(w[zero]))
    report = verify_lm(m, emb, max_length=5, samples=0)
    assert not report.ok and report.counterexample.position > 0


def test_verify_lm_takes_the_adapter_and_refuses_other_machines():
    m = example_lm_machine()
    net = compile_ns_lm(m)
    assert isinstance(net.abstraction, NSLMChart) and net.abstraction.head == "exact"
    assert verify_lm(PDALanguageModel(m), net, max_length=3, samples=2).ok
    other, _ = dusell_lm_machine("marked_reversal")
    with pytest.raises(VerificationError, match="compiled for"):
        verify_lm(other, net, max_length=3)
    with pytest.raises(VerificationError, match="compiled for"):
        verify_lm(PDALanguageModel(other), net, max_length=3)


@pytest.mark.parametrize("task", ["marked_reversal", "unmarked_reversal"])
def test_sampling_follows_the_distribution(task):
    """Runs of the generative model: string frequencies of 4000 draws (fixed seed) within four
    standard errors of p(w) for every string of probability ≥ 1%."""
    m, _ = dusell_lm_machine(task, p_end=Fraction(1, 3))
    lm = PDALanguageModel(m)
    draws = lm.sample(4000, 3)
    counts: dict = {}
    for w in draws:
        counts[w] = counts.get(w, 0) + 1
    def probs(strings):                              # p(w) = p(prefix) · p(EOS | w), batched
        ids, lengths = lm.encode(strings)
        tr = lm.run_batch(ids, lengths)
        rows = np.arange(len(strings))
        return np.exp(tr["log_prefix"][rows, lengths]) * tr["output"][rows, lengths, -1]

    strings = all_strings(m.alphabet, 6)
    checked = 0
    for w, p in zip(strings, probs(strings)):
        if p >= 0.01:
            assert abs(counts.get(w, 0) / 4000 - p) < 4 * math.sqrt(p * (1 - p) / 4000), (w, p)
            checked += 1
    assert checked >= 3 and (probs(list(counts)) > 0).all()


def test_sampling_draws_strings_of_positive_probability():
    lm = PDALanguageModel(example_lm_machine())
    for w in lm.sample(20, 0):
        assert lm.prob(w) > 0 and w.count("#") == 1
    with pytest.raises(InputError, match="max_length"):
        PDALanguageModel(dusell_lm_machine("marked_reversal")[0]).sample(5, 0, max_length=2)
    ids, lengths = lm.live_walks(10, 7, 1)
    for row, n in zip(ids, lengths):
        w = tuple(lm.alphabet.symbols[i] for i in row[:n])
        assert n <= 7 and lm.prob(w, eos=False) > 0
        if n < 7:                                   # stopped where only EOS may follow
            assert lm.output(lm.run(w))[:-1].sum() == 0 and w.count("#") == 1


def test_language_model_errors():
    m = example_lm_machine()
    lm = PDALanguageModel(m)
    with pytest.raises(InputError, match="probability 0"):
        lm.next_distribution("0#1")
    with pytest.raises(InputError, match="save the machine"):
        lm.to_dict()
    with pytest.raises(CompileError, match="WeightedPDA"):
        PDALanguageModel("not a machine")
    t = {(0, BOTTOM, "a", 0, "push", "A"): 0.75, (0, BOTTOM, "b", 0, "replace", BOTTOM): 0.5}
    with pytest.raises(AutomatonError, match="> 1"):
        PDALanguageModel(_machine(t))
    with pytest.raises(InputError):
        lm.step(lm.initial(), "x")
    assert lm == PDALanguageModel(m) and hash(lm) == hash(PDALanguageModel(m))


@pytest.mark.parametrize("method", ["exact", "softmax"])
def test_pn_verify_sends_ns_lm_to_verify_lm(method):
    import pdanet as pn

    m = example_lm_machine()
    net = pn.compile(m, target="ns_lm", method=method)
    report = pn.verify(m, net, max_length=5, samples=8, sample_lengths=(6, 12), long_samples=1,
                       long_length=24)
    assert isinstance(report, LMReport) and report.ok, report
