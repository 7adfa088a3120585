"""Probabilistic machines: PFSA, ProbabilisticDPDA and its depth-bounded PFSA, checked against
brute-force sums over all strings, exact arithmetic, and typed errors for bad input."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata import io
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.probabilistic import (
    FLOAT_TOLERANCE,
    PFSA,
    ProbabilisticDPDA,
    marked_reversal,
)
from pdanet.errors import (
    AutomatonError,
    DeterminismError,
    FrozenMachineError,
    InputError,
    SpecError,
)

SMALL = settings(max_examples=30, deadline=None)


def strings_upto(alphabet, n):
    for k in range(n + 1):
        yield from itertools.product(alphabet.symbols, repeat=k)


def brute_prob(m, string, eos=True):
    """Product of the exact rows along the configurations (independent of `prob`)."""
    c = m.initial()
    total = Fraction(1)
    k = len(m.alphabet)
    for a in string:
        row = m.exact_row(c)
        total *= row[m.alphabet.index(a)]
        if total == 0:
            return Fraction(0)
        c = m.step(c, a)
    return total * (m.exact_row(c)[k] if eos else 1)


# --- PFSA ---------------------------------------------------------------------------------------

@SMALL
@given(seed=st.integers(0, 10**6), n=st.integers(1, 6), k=st.integers(1, 3))
def test_random_pfsa_is_a_distribution(seed, n, k):
    m = PFSA.random(n, k, seed, exact=True)
    assert m.is_exact
    for q in range(n):
        assert sum(m.exact_row(pn.automata.probabilistic.PFSAConfig(q)), Fraction(0)) == 1
    # prefix probabilities: p(w) = Σ_a p(w a) + p(w EOS) for every short w (exactly)
    for w in strings_upto(m.alphabet, 4):
        pre = m.prob(w, eos=False)
        assert pre == brute_prob(m, w, eos=False)
        ext = sum((m.prob(w + (a,), eos=False) for a in m.alphabet.symbols), Fraction(0))
        assert pre == ext + m.prob(w)
        lp = m.logprob(w)
        p = m.prob(w)
        assert (lp == -math.inf) if p == 0 else math.isclose(lp, math.log(p), rel_tol=1e-12,
                                                             abs_tol=1e-12)


@SMALL
@given(seed=st.integers(0, 10**6), n=st.integers(1, 6), k=st.integers(1, 3))
def test_run_batch_matches_step_output(seed, n, k):
    m = PFSA.random(n, k, seed)
    strings = list(strings_upto(m.alphabet, 4))
    ids, lengths = m.encode(strings)
    trace = m.run_batch(ids, lengths)
    for b, s in enumerate(strings):
        for t, row in enumerate(m.trace(s)):
            assert np.array_equal(trace["output"][b, t], row.output)
            q = -1 if row.config.state is None else m.state_index(row.config.state)
            assert trace["state"][b, t] == q


def test_sampling_matches_probabilities():
    m = PFSA.random(3, 2, 7, exact=True)
    samples = m.sample(20_000, 1)
    counts = {}
    for s in samples:
        counts[s] = counts.get(s, 0) + 1
    for s in strings_upto(m.alphabet, 2):
        p = float(m.prob(s))
        assert abs(counts.get(s, 0) / len(samples) - p) < 5 * math.sqrt(p * (1 - p) / 20_000) + 1e-3
    assert all(m.prob(s) > 0 for s in counts)  # never a string of probability 0


@pytest.mark.parametrize("machine", [PFSA.random(6, 3, 4), marked_reversal().bounded(3, "renormalise")],
                         ids=["pfsa", "bounded-pdpda"])
def test_live_walks(machine):
    ids, lengths = machine.sample(40, 12, np.random.default_rng(0))  # the verifier's protocol
    assert ids.shape == (40, 12)
    for row, n in zip(ids, lengths):
        s = machine.alphabet.decode(row[:n])
        assert (row[n:] == -1).all() and machine.prob(s, eos=False) > 0
        if n < 12:  # stopped: only EOS is possible
            assert machine.output(machine.run(s))[:-1].sum() == 0


def test_next_distribution_and_dead_prefix():
    m = PFSA(["x", "y"], "ab", {("x", "a"): ("y", Fraction(1, 2)), ("y", "b"): ("x", 1)}, "x",
             {"x": Fraction(1, 2)})
    assert m.next_distribution("") == {"a": Fraction(1, 2), "b": 0, m.eos: Fraction(1, 2)}
    assert m.next_distribution("a") == {"a": 0, "b": 1, m.eos: 0}
    assert m.prob("ab") == Fraction(1, 4) and m.logprob("b") == -math.inf
    with pytest.raises(InputError, match="probability 0"):
        m.next_distribution("b")
    assert m.output(m.run("b")).tolist() == [0, 0, 0]
    assert m.to_dfa().accepting == frozenset({"x"})
    with pytest.raises(FrozenMachineError):
        m.start = "y"


def test_bad_pfsa_input():
    with pytest.raises(AutomatonError, match=r"state 'x'.*sum to 3/4"):
        PFSA(["x"], "a", {("x", "a"): ("x", Fraction(1, 2))}, "x", {"x": Fraction(1, 4)})
    with pytest.raises(AutomatonError, match=r"state 'x'.*sum to 0\.9"):
        PFSA(["x"], "a", {("x", "a"): ("x", 0.5)}, "x", {"x": 0.4})
    PFSA(["x"], "a", {("x", "a"): ("x", 0.5)}, "x", {"x": 0.5 + FLOAT_TOLERANCE / 2})
    with pytest.raises(AutomatonError, match="negative"):
        PFSA(["x"], "a", {("x", "a"): ("x", -0.5)}, "x", {"x": 1.5})
    with pytest.raises(AutomatonError, match="boolean"):
        PFSA(["x"], "a", {("x", "a"): ("x", True)}, "x")
    with pytest.raises(AutomatonError, match="not finite"):
        PFSA(["x"], "a", {("x", "a"): ("x", math.nan)}, "x")
    with pytest.raises(DeterminismError, match="deterministic"):
        PFSA(["x", "y"], "a", {("x", "a"): {"x": 0.5, "y": 0.5}}, "x")
    with pytest.raises(AutomatonError, match="undeclared"):
        PFSA(["x"], "a", {("x", "a"): ("z", 1)}, "x")
    with pytest.raises(AutomatonError, match="ε-moves"):
        PFSA(["x"], "a", {("x", EPSILON): ("x", 1)}, "x")
    with pytest.raises(InputError):
        PFSA.random(2, 2, 0).sample(-1)


# --- probabilistic DPDA ---------------------------------------------------------------------------

def test_marked_reversal_distribution():
    m = marked_reversal(Fraction(1, 3))
    total = Fraction(0)
    for w in strings_upto(pn.automata.alphabet.Alphabet("ab"), 4):
        s = w + ("#",) + tuple(reversed(w))
        p = m.prob(s)
        assert p == (Fraction(1, 3) ** len(w)) * Fraction(1, 3) == brute_prob(m, s)
        total += p
    assert total == 1 - Fraction(2, 3) ** 5  # P(|w| ≤ 4)
    assert m.prob("ab#ab") == 0 and m.logprob("ab#ab") == -math.inf


@pytest.mark.parametrize("machine", [marked_reversal(), marked_reversal(0.4, "abc"),
                                     marked_reversal().bounded(2, "renormalise")],
                         ids=["exact", "float", "bounded"])
def test_pdpda_run_batch_matches_step_output(machine):
    strings = list(strings_upto(machine.alphabet, 5))
    ids, lengths = machine.encode(strings)
    trace = machine.run_batch(ids, lengths)
    for b, s in enumerate(strings):
        for t, row in enumerate(machine.trace(s)):
            assert np.array_equal(trace["output"][b, t], row.output)
            assert (trace["state"][b, t] < 0) == (row.config.state is None)


@SMALL
@given(m_depth=st.integers(1, 4), p=st.sampled_from([Fraction(1, 4), Fraction(1, 2), 0.3]))
def test_bounded_pfsa_matches_bounded_machine(m_depth, p):
    b = marked_reversal(p).bounded(m_depth, overflow="renormalise")
    f = b.to_pfsa()
    # every state is a configuration of depth ≤ m; strings agree with the bounded machine
    assert all(c.depth <= m_depth for c in f.states)
    assert f.num_states == 2 ** (m_depth + 2) - 2  # stacks of depth ≤ m, in push and in pop
    for s in strings_upto(b.alphabet, 6):
        assert f.prob(s) == b.prob(s) == brute_prob(b, s)
    ids, lengths = b.encode(list(strings_upto(b.alphabet, 5)))
    assert np.allclose(b.run_batch(ids, lengths)["output"], f.run_batch(ids, lengths)["output"])
    # renormalised: the total probability of all strings of length ≤ 2m+1 is 1
    total = sum(f.prob(s) for s in strings_upto(b.alphabet, 2 * m_depth + 1))
    assert math.isclose(float(total), 1.0, rel_tol=1e-12)


def test_overflow_refused_or_renormalised():
    m = marked_reversal()
    with pytest.raises(AutomatonError, match="past depth 3"):
        m.bounded(3).to_pfsa()
    r = m.bounded(3, overflow="renormalise")
    assert r.next_distribution("aaa") == {"a": 0, "b": 0, "#": 1, m.eos: 0}
    with pytest.raises(InputError, match="overflow"):
        m.bounded(3, overflow="truncate")
    with pytest.raises(InputError):
        m.bounded(0)
    # all the mass of (0, A) overflows at depth 1: nothing is left to renormalise
    up = ProbabilisticDPDA([0], "a", "A", {(0, "a", BOTTOM): (0, ("A", BOTTOM), Fraction(1, 2)),
                                           (0, "a", "A"): (0, ("A", "A"), 1)},
                           0, {(0, BOTTOM): Fraction(1, 2)}, name="up")
    with pytest.raises(AutomatonError, match="no next-symbol distribution"):
        up.bounded(1, overflow="renormalise").to_pfsa()
    with pytest.raises(AutomatonError, match="past depth 1"):
        up.bounded(1).to_pfsa()
    assert up.bounded(1, overflow="renormalise").prob("a", eos=False) == Fraction(1, 2)


def test_bad_pdpda_input():
    with pytest.raises(AutomatonError, match="ε-move"):
        ProbabilisticDPDA([0], "a", "A", {(0, EPSILON, BOTTOM): (0, (BOTTOM,), 1)}, 0)
    with pytest.raises(DeterminismError, match="deterministic"):
        ProbabilisticDPDA([0], "a", "A", {(0, "a", BOTTOM): [(0, (BOTTOM,), 1), (0, ("A", BOTTOM),
                                                                               1)]}, 0)
    with pytest.raises(AutomatonError, match=r"state 0, top ⊥\).*sum to 3/2"):
        ProbabilisticDPDA([0], "a", "A", {(0, "a", BOTTOM): (0, (BOTTOM,), 1)}, 0,
                          {(0, BOTTOM): Fraction(1, 2)})
    with pytest.raises(AutomatonError, match="negative"):
        ProbabilisticDPDA([0], "a", "A", {(0, "a", BOTTOM): (0, (BOTTOM,), -1)}, 0)
    with pytest.raises(AutomatonError, match="BOTTOM"):  # the DPDA's own validation
        ProbabilisticDPDA([0], "a", "A", {(0, "a", BOTTOM): (0, ("A",), 1)}, 0)


# --- files and drawings --------------------------------------------------------------------------

@pytest.mark.parametrize("machine", [PFSA.random(5, 3, 1, exact=True), PFSA.random(5, 2, 2),
                                     marked_reversal(), marked_reversal(0.2)],
                         ids=["pfsa-exact", "pfsa-float", "pdpda-exact", "pdpda-float"])
def test_save_load_round_trip(machine, tmp_path):
    path = tmp_path / "m.json"
    machine.save(path)
    back = pn.load(path)
    assert back == machine and type(back) is type(machine)
    assert io.loads(io.dumps(machine)) == machine
    for s in list(strings_upto(machine.alphabet, 3))[:30]:
        assert back.prob(s) == machine.prob(s)


def test_bad_files():
    text = io.dumps(PFSA(["x"], "a", {("x", "a"): ("x", Fraction(1, 2))}, "x",
                         {"x": Fraction(1, 2)}))
    with pytest.raises(SpecError, match=r"\$: AutomatonError: state 'x'"):
        io.loads(text.replace('"probability": "1/2"}\n  ]\n}', '"probability": "1/4"}\n  ]\n}'))
    with pytest.raises(SpecError, match=r"probability"):
        io.loads(text.replace('"1/2"', '"half"', 1))
    mr = io.dumps(marked_reversal())
    with pytest.raises(SpecError, match="ε-move"):
        io.loads(mr.replace('"symbol": "#", "pop": "a"', '"symbol": "ε", "pop": "a"'))


def test_draw_shows_probabilities():
    m = PFSA(["x", "y"], "ab", {("x", "a"): ("y", Fraction(1, 3)), ("y", "b"): ("x", 1)}, "x",
             {"x": Fraction(2, 3)})
    src = pn.draw(m).source
    assert "a / 1/3" in src and "b / 1" in src and "EOS 2/3" in src
    src = pn.draw(marked_reversal()).source
    assert "# / 1/4, ⊥ → ⊥" in src and "EOS ⊥: 1" in src
    g = pn.to_networkx(m)
    assert {d["probability"] for _, _, d in g.edges(data=True)} == {Fraction(1, 3), 1}
