"""Suzgun et al. (2019) next-symbol sets (Table 1) as a compiled readout of the Stack-RNN /
Stack-LSTM (`compile_suzgun_stack_rnn(..., readout="next_set")`), checked against oracles
written from the paper's definition: the task's Table 1 sets for Dyck-k, and for random real-time
DPDAs a brute-force search over bounded-height configurations of the transition table."""

from __future__ import annotations

import copy
import dataclasses
import itertools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.pda import DPDA
from pdanet.automata.tasks.suzgun2019 import dyck_machine, dyck_next_sets
from pdanet.automata.tasks.task import END
from pdanet.errors import CompileError, InputError
from pdanet.experiments.protocols import protocol
from pdanet.models.suzgun import NextSetMachine
from pdanet.verify.strings import live_prefixes, random_live_strings

MODELS = ("suzgun_stack_rnn", "suzgun_stack_lstm")


def _compile(m, model="suzgun_stack_rnn"):
    return pn.compile(m, target="stack_rnn", model=model, readout="next_set")


def _net_sets(net, ids: np.ndarray) -> np.ndarray:
    _, logits = net.forward(torch.as_tensor(ids))
    return net.readout(logits)


def _prefix_batch(machine, max_length: int) -> tuple[np.ndarray, np.ndarray]:
    levels = live_prefixes(machine, max_length)
    ids = np.full((sum(len(x) for x in levels), max(max_length, 1)), -1, dtype=np.int64)
    lengths = np.concatenate([np.full(len(x), n) for n, x in enumerate(levels)])
    row = 0
    for n, x in enumerate(levels):
        ids[row:row + len(x), :n] = x
        row += len(x)
    return ids, lengths


# --- Dyck-k against Table 1 ----------------------------------------------------------------------

def _dyck_table1(k: int, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(N, T+1, 2k + 1) Table 1 sets of Dyck-k prefixes (ids: opens 0 … k−1, closes k … 2k−1),
    by a stack of bracket types: every open, the close of the innermost open bracket, the end
    marker on an empty stack."""
    N, T = ids.shape
    stack = np.zeros((N, T + 1), dtype=np.int64)
    h = np.zeros(N, dtype=np.int64)
    rows = np.arange(N)
    out = np.zeros((N, T + 1, 2 * k + 1), dtype=bool)
    for t in range(T + 1):
        out[:, t, :k] = True
        out[rows, t, k + stack[rows, np.maximum(h - 1, 0)]] = h > 0
        out[:, t, 2 * k] = h == 0
        if t == T:
            break
        x = ids[:, t]
        opens = (x >= 0) & (x < k)
        stack[rows[opens], h[opens]] = x[opens]
        h = h + opens - ((x >= k) & (t < lengths))
    return out


def _check_dyck(k: int, ids: np.ndarray, lengths: np.ndarray, model: str) -> int:
    m = dyck_machine(k)
    net = _compile(m, model)
    got = _net_sets(net, ids)
    cols = tuple(m.alphabet) + (END,)
    assert tuple(net.machine.output_alphabet) == cols
    want = _dyck_table1(k, ids, lengths)
    mask = np.arange(ids.shape[1] + 1)[None, :] <= lengths[:, None]
    assert (got == want)[mask].all()
    for b in np.random.default_rng(0).choice(len(lengths), min(200, len(lengths)), False):
        string = m.alphabet.decode(ids[b, :lengths[b]].tolist())     # the task's own sets
        for t, allowed in enumerate(dyck_next_sets(string, k)):
            assert (want[b, t] == np.array([x in allowed for x in cols])).all()
    return int(mask.sum())


@pytest.mark.parametrize("k,max_length", [(2, 10), (3, 7)])
def test_dyck_next_sets_equal_table1_on_every_prefix(k, max_length):
    m = NextSetMachine(dyck_machine(k))
    ids, lengths = _prefix_batch(m, max_length)
    # every prefix of a Dyck-k word up to max_length (the others have no set): paths of
    # heights ≥ 0, k labels per up-step
    count = {0: 1}
    total = 1
    for _ in range(max_length):
        nxt: dict = {}
        for h, c in count.items():
            nxt[h + 1] = nxt.get(h + 1, 0) + k * c
            if h:
                nxt[h - 1] = nxt.get(h - 1, 0) + c
        count = nxt
        total += sum(count.values())
    assert len(lengths) == total
    # every prefix extends to one of length max_length (an open bracket may always follow), so
    # the positions of the longest strings are every prefix
    last = lengths == max_length
    assert _check_dyck(k, ids[last], lengths[last], "suzgun_stack_rnn") > total


def test_dyck_lstm_and_dyck6():
    m3 = NextSetMachine(dyck_machine(3))
    ids, lengths = _prefix_batch(m3, 6)
    _check_dyck(3, ids, lengths, "suzgun_stack_lstm")
    m6 = NextSetMachine(dyck_machine(6))
    ids, lengths = _prefix_batch(m6, 5)                 # every prefix up to 5 …
    _check_dyck(6, ids, lengths, "suzgun_stack_rnn")
    ids, lengths = random_live_strings(m6, 150, (6, 10), np.random.default_rng(1))
    _check_dyck(6, ids, lengths, "suzgun_stack_rnn")   # … and random ones up to 10


@pytest.mark.parametrize("model", MODELS)
def test_dyck2_verifies_and_the_readout_is_exact(model):
    m = dyck_machine(2)
    net = _compile(m, model)
    assert net.compiled_from is m and isinstance(net.machine, NextSetMachine)
    assert net.hidden_units <= net.bound_value and net.info["readout"] == "next_set"
    report = pn.verify(m, net, max_length=8, samples=200, long_samples=2, long_length=300)
    assert report.ok, report.counterexample
    assert "output" in report.fields and "stack" in report.fields
    _, logits = net.forward(torch.as_tensor(m.encode(["(([]", "()"])[0]))
    assert (logits.abs() >= 32).all()                    # ±β·HEAD/2: σ exactly 0/1


def test_a_mutated_readout_fails_verification():
    m = dyck_machine(2)
    net = _compile(m)
    module = copy.deepcopy(net.module)
    with torch.no_grad():
        module.W_y.bias[-1] += 4000.0                    # END in every set
    bad = dataclasses.replace(net, module=module)
    report = pn.verify(m, bad, max_length=4, samples=0, long_samples=0)
    assert not report.ok and report.counterexample.field == "output"
    module = copy.deepcopy(net.module)
    with torch.no_grad():                                # a unit's pushed code corrupted
        module.W_n.bias.add_(2000.0)
    report = pn.verify(m, dataclasses.replace(net, module=module), max_length=4, samples=0,
                       long_samples=0)
    assert not report.ok


# --- random real-time DPDAs against a brute-force oracle -----------------------------------------

STATES, INPUTS, STACK = ("p", "q", "r"), ("a", "b"), ("A", "B")
HEIGHT = 12          # the oracle searches configurations of stack height ≤ HEIGHT


@st.composite
def dpdas(draw):
    n = draw(st.integers(2, 3))
    states = STATES[:n]
    moves = {}
    for q, a, X in itertools.product(states, INPUTS, STACK + (BOTTOM,)):
        kind = draw(st.sampled_from(["none", "noop", "push", "pop", "replace"]))
        q2 = draw(st.sampled_from(states))
        Y = draw(st.sampled_from(STACK))
        if kind == "none" or (X is BOTTOM and kind in ("pop", "replace")):
            continue
        moves[(q, a, X)] = (q2, {"noop": (X,), "push": (Y, X), "pop": (),
                                 "replace": (Y,)}[kind])
    accepting = draw(st.sets(st.sampled_from(states), min_size=1))
    return DPDA(states, INPUTS, STACK, moves, "p", accepting=tuple(sorted(accepting))), moves


class Oracle:
    """Next-symbol sets from the transition table alone: a configuration is co-reachable when an
    accepting state is reachable from it through configurations of height ≤ HEIGHT."""

    def __init__(self, machine: DPDA, moves: dict):
        self.moves, self.accepting = moves, set(machine.accepting)
        self.states = tuple(machine.states)
        configs = [(q, s) for q in self.states for h in range(HEIGHT + 1)
                   for s in itertools.product(STACK, repeat=h)]
        back: dict = {c: [] for c in configs}
        for c in configs:
            for a in INPUTS:
                d = self.step(c, a)
                if d is not None and d in back:
                    back[d].append(c)
        live = {c for c in configs if c[0] in self.accepting}
        todo = list(live)
        while todo:
            for c in back[todo.pop()]:
                if c not in live:
                    live.add(c)
                    todo.append(c)
        self.live = live

    def step(self, config, a):
        q, stack = config
        top = stack[-1] if stack else BOTTOM
        mv = self.moves.get((q, a, top))
        if mv is None:
            return None
        q2, gamma = mv
        rest = stack[:-1] if stack else ()
        pushed = tuple(x for x in reversed(gamma) if x is not BOTTOM)
        return q2, rest + pushed

    def run(self, string):
        c = (self.states[0], ())
        out = [c]
        for a in string:
            c = None if c is None else self.step(c, a)
            out.append(c)
        return out

    def next_set(self, c) -> tuple[bool, ...]:
        return tuple(self.step(c, a) in self.live for a in INPUTS) + (c[0] in self.accepting,)


def _strings(max_length: int):
    for n in range(max_length + 1):
        yield from itertools.product(INPUTS, repeat=n)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dpdas())
def test_random_dpda_next_sets_against_brute_force(drawn):
    machine, moves = drawn
    oracle = Oracle(machine, moves)
    try:
        net = _compile(machine)
    except CompileError as exc:            # the sets depend on more than (state, top)
        u, v = exc.prefixes
        cu, cv = oracle.run(u)[-1], oracle.run(v)[-1]
        assert cu in oracle.live and cv in oracle.live
        assert cu[0] == cv[0] and cu[1][-1:] == cv[1][-1:]
        assert oracle.next_set(cu) != oracle.next_set(cv)
        return
    strings = list(_strings(6))
    ids, _ = machine.encode(strings)
    got = _net_sets(net, np.asarray(ids).reshape(len(strings), -1))
    for b, s in enumerate(strings):
        for t, c in enumerate(oracle.run(s)):
            if c is None or c not in oracle.live:
                break                      # dead: outside the language's prefixes
            assert tuple(got[b, t].tolist()) == oracle.next_set(c), (s[:t], c)
    assert pn.verify(machine, net, max_length=6, samples=30, long_samples=0).ok


def test_a_set_that_depends_on_the_stack_below_is_refused():
    """c a^n (b | x)^n e ∪ d a^n (b | x)^n e where the last pop must be b over C and x over D: in
    state q with the marked A' on top, b may follow only when C lies below."""
    B = BOTTOM
    moves = {("s", "c", B): ("m", ("C", B)), ("s", "d", B): ("m", ("D", B)),
             ("m", "a", "C"): ("q", ("A'", "C")), ("m", "a", "D"): ("q", ("A'", "D")),
             ("q", "a", "A'"): ("q", ("A", "A'")), ("q", "a", "A"): ("q", ("A", "A")),
             ("q", "b", "A"): ("q", ()), ("q", "x", "A"): ("q", ()),
             ("q", "b", "A'"): ("rb", ()), ("q", "x", "A'"): ("rx", ()),
             ("rb", "e", "C"): ("f", ("C",)), ("rx", "e", "D"): ("f", ("D",))}
    m = DPDA(("s", "m", "q", "rb", "rx", "f"), "cdabxe", ("C", "D", "A", "A'"), moves, "s",
             accepting=("f",))
    with pytest.raises(CompileError, match="function of \\(state, top of stack\\)") as info:
        _compile(m)
    u, v = info.value.prefixes
    assert {u[0], v[0]} == {"c", "d"} and u[1:] == v[1:]
    # the exact sets of the machine itself still hold (NextSetMachine needs no such condition)
    ns = NextSetMachine(m)
    assert ns.output(ns.run("ca")) == frozenset({"a", "b"})
    assert ns.output(ns.run("da")) == frozenset({"a", "x"})
    assert ns.is_dead(ns.run("dab")) and not ns.is_dead(ns.run("cab"))
    assert ns.output(ns.run("cabe")) == frozenset({END})


def test_empty_stack_acceptance_needs_no_marked_bottom():
    """A DPDA accepting by empty stack: the end marker is allowed exactly on an empty stack."""
    B = BOTTOM
    moves = {("p", "(", B): ("p", ("X", B)), ("p", "(", "X"): ("p", ("X", "X")),
             ("p", ")", "X"): ("p", ())}
    m = DPDA(("p",), "()", ("X",), moves, "p", acceptance="empty_stack")
    net = _compile(m, "suzgun_stack_lstm")
    assert pn.verify(m, net, max_length=8, samples=50, long_samples=1, long_length=200).ok
    ids, _ = m.encode(["(()", "()"])
    got = _net_sets(net, np.asarray(ids))
    assert got[0, 3].tolist() == [True, True, False] and got[1, 2].tolist() == [True, False, True]


# --- typed errors --------------------------------------------------------------------------------

def test_bad_readouts_and_machines():
    m = dyck_machine(2)
    with pytest.raises(InputError, match="readout must be one of"):
        pn.compile(m, target="stack_rnn", model="suzgun_stack_rnn", readout="sets")
    rev = pn.tasks.get("reversal")                       # a transducer: no next-symbol sets
    with pytest.raises(CompileError, match="readout 'next_set'"):
        _compile(rev)
    with pytest.raises(CompileError, match="readout 'next_set'"):
        _compile(pn.tasks.get("parity"))                 # a DFA (no stack)
    for other in (rev, pn.tasks.get("parity"), "()"):
        with pytest.raises(InputError, match="real-time DPDA"):
            NextSetMachine(other)


def test_the_suzgun_protocol_trains_on_next_sets():
    p = protocol("suzgun2019", "dyck2")
    assert p.target == "next_set" and p.metric == "sequence_accuracy"
    from pdanet.experiments.models import compile_model

    net = compile_model(NextSetMachine(dyck_machine(2)), p.model)
    assert net.info["readout"] == "next_set"
    with pytest.raises(InputError, match="next-symbol set targets"):
        compile_model(NextSetMachine(dyck_machine(2)), "grefenstette_lstm")
