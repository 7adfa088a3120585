"""Costs that must not grow with the input: O(1) machine steps (shared-tail stacks), verification of
one long string in O(1) per step, Dyck machines with a huge k, and size guards before compiling.
Counted quantities only (cells shared, array sizes, traced memory); timings are in benchmarks/."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pdanet as pn
from pdanet import limits
from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.lazy import BracketAlphabet, NextSet
from pdanet.automata.pda import PDAConfig, Stack
from pdanet.errors import ResourceError
from pdanet.verify import lockstep


def anbn() -> pn.DPDA:
    return pn.DPDA(states=[0, 1, 2], input_alphabet="ab", stack_alphabet="A",
                   transitions={(0, "a", BOTTOM): (0, ("A", BOTTOM)),
                                (0, "a", "A"): (0, ("A", "A")),
                                (0, "b", "A"): (1, ()), (1, "b", "A"): (1, ()),
                                (1, EPSILON, BOTTOM): (2, (BOTTOM,))},
                   start=0, accepting={2}, name="anbn")


# --- persistent stacks ----------------------------------------------------------------------------
@given(st.lists(st.sampled_from(["x", "y", 3, BOTTOM]), max_size=30))
def test_stack_is_a_value_equal_to_its_tuple(symbols):
    s = Stack(symbols)
    t = tuple(symbols)
    assert s == t and t == s and tuple(s) == t and list(s) == list(t) and len(s) == len(t)
    assert hash(s) == hash(t)
    assert s == Stack(t) and hash(s) == hash(Stack(t))
    if t:
        assert s[-1] == t[-1] == s.top and s[0] == t[0] and s.pop() == t[:-1]
        assert s != t[:-1] + ("z",)
    assert s.push("q") == t + ("q",) and s + ("q", "r") == t + ("q", "r")
    assert s[1:3] == t[1:3]


def test_configs_share_their_stack_cells_so_a_step_is_constant_work():
    m = anbn()
    n = 2000
    rows = m.trace("a" * n + "b" * n)
    for t in range(1, n + 1):             # each push adds one cell on top of the previous stack
        assert rows[t].config.stack.pop() is rows[t - 1].config.stack
    for t in range(n + 1, 2 * n):         # each pop returns a stack already built
        assert rows[t].config.stack is rows[t - 1].config.stack.pop()
    assert rows[-1].output and m.accepts("a" * n + "b" * n)
    assert not m.accepts("a" * n + "b" * (n - 1))


def test_configs_from_tuples_equal_configs_from_runs():
    m = anbn()
    c = m.run("aa")
    assert c == PDAConfig(0, (BOTTOM, "A", "A")) and hash(c) == hash(PDAConfig(0, (BOTTOM, "A", "A")))
    assert c.stack == (BOTTOM, "A", "A") and c.depth == 2 and c.top == "A"
    assert {c: 1}[PDAConfig(0, (BOTTOM, "A", "A"))] == 1
    assert m.run("ba").dead and m.run("ba").stack == ()


def test_a_long_run_keeps_memory_linear():
    m = anbn()
    n = 100_000
    tracemalloc.start()
    try:
        assert m.accepts("a" * n + "b" * n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * n                 # O(n) cells; copying tuples would hold O(n²) bytes


def test_window_simulation_matches_the_full_one():
    m = pn.tasks.get("marked_reversal")
    strings = ["01#10", "0110#0110", "1#0", "", "00#00"]
    ids, lengths = m.encode(strings)
    full = m.run_batch(ids, lengths)
    win = m.run_batch_window(ids, lengths, cells=3)
    for f in ("state", "depth", "top", "output"):
        assert (full[f] == win[f]).all()
    stack = full["stack"]
    D = stack.shape[2]
    for b in range(len(strings)):
        for t in range(ids.shape[1] + 1):
            d = full["depth"][b, t]
            want = [stack[b, t, d - i] if 0 <= d - i < D else -1 for i in range(3)]
            assert list(win["stack_top"][b, t]) == want


# --- verification of one long string --------------------------------------------------------------
def marked(n: int, seed: int = 0) -> list:
    w = list(np.random.default_rng(seed).choice(["0", "1"], n // 2))
    return w + ["#"] + w[::-1]


def windowed_and_full(m, net, strings):
    """`lockstep.compare_batch` on `strings` as it runs (top cells only on long strings) and with
    whole stacks forced."""
    ids, lengths = m.encode(strings)
    windowed = lockstep.compare_batch(m, net, ids, lengths)
    old = lockstep.WINDOW_MIN_STEPS
    lockstep.WINDOW_MIN_STEPS = 10**9
    try:
        full = lockstep.compare_batch(m, net, ids, lengths)
    finally:
        lockstep.WINDOW_MIN_STEPS = old
    return windowed, full


@pytest.mark.parametrize("method", ["grefenstette", "joulin_mikolov", "suzgun"])
def test_a_long_string_is_verified_with_top_cells_only(method, monkeypatch):
    m = pn.tasks.get("marked_reversal")
    net = pn.compile(m, target="stack_rnn", method=method)
    s = marked(6000)

    def whole_stacks(*args, **kwargs):    # (T+1) × depth cells: what must not be built
        raise AssertionError("whole stacks simulated")

    monkeypatch.setattr(type(m), "run_batch", whole_stacks)   # machines are frozen
    net.module.forward = whole_stacks
    report = pn.verify(m, net, strings=[s], max_length=None, samples=0, long_samples=0)
    assert report.ok and report.steps_checked == len(s) + 1
    assert "stack_top" in report.fields


def test_windowed_and_full_comparisons_agree():
    m = pn.tasks.get("marked_reversal")
    net = pn.compile(m, target="stack_rnn")
    strings = [marked(700, seed) for seed in range(3)] + [["0"] * 600 + ["1"] * 5]
    windowed, full = windowed_and_full(m, net, strings)
    assert windowed.failure is None and full.failure is None
    assert windowed.steps == full.steps and "stack_top" in windowed.fields


def test_a_wrong_network_fails_at_the_same_step_either_way():
    m = pn.tasks.get("marked_reversal")
    net = pn.compile(m, target="stack_rnn")
    # swap what two different pushes write: exact, saturated, and wrong deep in the stack
    vals = net.module.values
    with __import__("torch").no_grad():
        cols = vals.weight.clone()
        j, k = [i for i in range(cols.shape[1]) if cols[:, i].abs().sum() > 0][:2]
        vals.weight[:, j], vals.weight[:, k] = cols[:, k], cols[:, j]
    windowed, full = windowed_and_full(m, net, [marked(800, 3)])
    assert full.failure is not None and windowed.failure is not None
    assert windowed.failure[:2] == full.failure[:2]


def test_an_unsaturated_network_falls_back_to_whole_stacks():
    m = pn.tasks.get("marked_reversal")
    net = pn.compile(m, target="stack_rnn").with_scale(1)
    ids, _ = m.encode([marked(600)])
    assert net.module.forward_window(ids) is None
    assert lockstep._forward_window(m, net, ids) is None    # compare_batch compares whole stacks


# --- huge Dyck machines ---------------------------------------------------------------------------
def test_dyck_with_a_billion_bracket_types_steps_without_listing_them():
    m = pn.tasks.dyck(k=10**9, m=3)
    tracemalloc.start()
    try:
        rows = m.trace("(0 (999999999 )999999999 )0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    assert m.accepts("(0 (7 )7 )0") and not m.accepts(["(5", ")6"])
    out = rows[1].output
    assert isinstance(out, NextSet) and "(123456789" in out and ")0" in out and "$" not in out
    assert len(out) == 10**9 + 1 and str(rows[0].output) == "{(0 (1 … (999999999 $}"
    assert m.alphabet.index(")999999999") == 2 * 10**9 - 1 and m.alphabet.symbol(10**9) == ")0"
    for bad in ("(1000000000", "(01", "(-1", "(", "x", 3):
        assert bad not in m.alphabet
    with pytest.raises(pn.errors.InputError, match="not in the alphabet"):
        m.run("(0 (01")
    ids, lengths = m.encode(["(0 (9 )9 )0"])
    assert m.run_batch(ids, lengths, with_output=False)["depth"].tolist() == [[0, 1, 2, 1, 0]]


def test_huge_dyck_refuses_what_would_enumerate_its_alphabet():
    m = pn.tasks.dyck(k=10**9, m=3)
    ids, lengths = m.encode(["(0 )0"])
    with pytest.raises(ResourceError, match="with_output=False"):
        m.run_batch(ids, lengths)
    for target in ("lstm", "elman"):
        with pytest.raises(ResourceError, match="parameters.*smaller k"):
            pn.compile(m, target=target)
    with pytest.raises(ResourceError, match="live prefixes"):
        pn.verify(m, None, max_length=2)


def test_lazy_dyck_symbols_equal_the_explicit_ones():
    k = 2100
    m = pn.tasks.dyck(k=k, m=2)
    assert isinstance(m.alphabet, BracketAlphabet)
    explicit = Alphabet(tuple(f"({i}" for i in range(k)) + tuple(f"){i}" for i in range(k)))
    assert m.alphabet == explicit and explicit == m.alphabet and hash(m.alphabet) == hash(explicit)
    assert tuple(m.alphabet) == explicit.symbols
    out = m.output(m.run("(5"))
    want = frozenset(explicit.symbols[:k]) | {")5"}
    assert out == want and want == out and hash(out) == hash(want)
    ids, lengths = m.encode(["(5 (6 )6"])
    assert ids.tolist() == [[5, 6, k + 6]]
    trace = m.run_batch(ids, lengths)
    assert trace["output"][0, 1, k + 5] and not trace["output"][0, 1, k + 6]


# --- size guards before compiling -----------------------------------------------------------------
def test_a_stack_rnn_too_large_is_refused_before_building_it():
    machine = pn.tasks.get("bigram_flip", vocab_size=24)
    with limits.raised(max_bytes=10**6), \
            pytest.raises(ResourceError, match=r"hidden units.*parameters.*vocab"):
        pn.compile(machine, target="stack_rnn")
    with limits.raised(max_units=100), pytest.raises(ResourceError, match="hidden units"):
        pn.compile(machine, target="stack_rnn")


def test_dyck_k_beyond_machine_integers_is_an_input_error():
    with pytest.raises(pn.errors.InputError, match="k ≤ 2\\^60"):
        pn.tasks.dyck(k=10**19, m=3)
    assert pn.tasks.dyck(k=2**60, m=3).accepts("(0 )0")
