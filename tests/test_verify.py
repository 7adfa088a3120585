"""Tests of the lockstep verifier and of live-prefix enumeration.

The networks here are hand-made `CompiledNetwork`s whose module is an exact lookup: the hidden
state is the one-hot vector of the machine's configuration and every symbol multiplies it by a
0/1 transition matrix. Corrupting one weight gives a wrong network whose first failure is
computed independently, by simulating the corrupted matrices string by string in plain numpy.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import realtime_dpda
from torch import nn

import pdanet as pn
from pdanet.automata import DFA, DyckKM, dyck
from pdanet.constructions.base import CompiledNetwork, ExactWeight
from pdanet.errors import InputError, VerificationError
from pdanet.verify import live_prefixes, long_strings, random_live_strings, verify
from pdanet.verify.strings import random_walks

# --- a lookup network for any machine with finitely many configurations ---------------------------

def reachable_configs(machine):
    """All configurations reachable from the initial one (dead ones included), each with the
    first string (in shortlex order) that reaches it."""
    init = machine.initial()
    configs, reps, index = [init], [()], {init: 0}
    frontier = [0]
    while frontier:
        nxt = []
        for i in frontier:
            for a in machine.alphabet.symbols:
                c = machine.step(configs[i], a)
                if c not in index:
                    index[c] = len(configs)
                    configs.append(c)
                    reps.append(reps[i] + (a,))
                    nxt.append(index[c])
        frontier = nxt
    return configs, reps, index


class Lookup(nn.Module):
    """h_0 = one-hot(initial); h_t = h_{t-1} · trans[a_t]; logits = h · out."""

    def __init__(self, trans: np.ndarray, out: np.ndarray, init: int):
        super().__init__()
        self.trans = nn.Parameter(torch.as_tensor(trans, dtype=torch.float32))
        self.out = nn.Parameter(torch.as_tensor(out, dtype=torch.float32))
        h0 = torch.zeros(trans.shape[1])
        h0[init] = 1
        self.register_buffer("h0", h0)

    def forward(self, ids):
        ids = torch.as_tensor(ids).clamp(min=0)
        B, T = ids.shape
        h = self.h0.to(self.trans.dtype).expand(B, -1)
        hs = [h]
        mats = self.trans[ids]  # (B, T, n, n)
        for t in range(T):
            h = torch.bmm(h.unsqueeze(1), mats[:, t]).squeeze(1)
            hs.append(h)
        states = torch.stack(hs, dim=1)
        return states, states @ self.out


def output_matrix(machine, configs) -> np.ndarray:
    """±1 readout: positive exactly for the allowed outputs (or for acceptance)."""
    if machine.output_kind == "next_set":
        syms = machine.output_alphabet.symbols
        return np.array([[1 if s in machine.output(c) else -1 for s in syms] for c in configs])
    return np.array([[1 if machine.output(c) else -1] for c in configs])


def lookup_net(machine, fields=None) -> CompiledNetwork:
    configs, reps, index = reachable_configs(machine)
    n, k = len(configs), len(machine.alphabet)
    trans = np.zeros((k, n, n), dtype=np.int64)
    for i, c in enumerate(configs):
        for a, sym in enumerate(machine.alphabet.symbols):
            trans[a, i, index[machine.step(c, sym)]] = 1
    out = output_matrix(machine, configs)
    module = Lookup(trans, out, 0)
    # each configuration's fields, read from the machine's simulator on its representative string
    ids, lengths = machine.encode(list(reps)) if n > 1 else (np.zeros((1, 0), np.int64), [0])
    tr = machine.run_batch(ids, lengths)
    rows = np.arange(n)
    table = {name: arr[rows, np.asarray(lengths)] for name, arr in tr.fields.items()
             if name != "output" and (fields is None or name in fields)}

    def decoder(states):
        idx = states.argmax(axis=-1)
        return {name: tab[idx] for name, tab in table.items()}

    if machine.output_kind == "next_set":
        reader = lambda logits: logits > 0
    else:
        reader = lambda logits: logits[..., 0] > 0
    weights = {"trans": ExactWeight.of(trans, scaled=False), "out": ExactWeight.of(out, scaled=False),
               "h0": ExactWeight.of(module.h0.numpy().astype(np.int64), scaled=False)}
    return CompiledNetwork(machine=machine, module=module, target="lookup", method="onehot",
                           hidden_units=n, bound=sp.Integer(n), params={}, weights=weights,
                           scale=sp.Integer(1), decoder=decoder, reader=reader)


def corrupted(net: CompiledNetwork, name: str, index: tuple, value: float) -> CompiledNetwork:
    module = Lookup(net.module.trans.detach().numpy(), net.module.out.detach().numpy(),
                    int(net.module.h0.argmax()))
    with torch.no_grad():
        getattr(module, name)[index] = value
    return dataclasses.replace(net, module=module)


# --- the independent oracle: plain numpy, one string at a time ------------------------------------

def config_fields(machine, c) -> dict:
    """The standard fields of one configuration, read off the configuration object."""
    if isinstance(machine, DyckKM):
        return {"stack": tuple(machine.opens[i] for i in c.stack), "depth": len(c.stack),
                "state": "dead" if c.dead else 0,
                "top": machine.opens[c.stack[-1]] if c.stack else None}
    return {"state": "dead" if c.state is None else c.state}


def first_failure(machine, net, strings, names):
    """(string, t, field, expected, got) of the first disagreement, or None."""
    configs, _, _ = reachable_configs(machine)
    trans = net.module.trans.detach().numpy().astype(np.float64)
    out = net.module.out.detach().numpy().astype(np.float64)
    out_syms = machine.output_alphabet.symbols if machine.output_kind == "next_set" else None
    for s in strings:
        h = net.module.h0.numpy().astype(np.float64)
        for t, row in enumerate(machine.trace(s)):
            if t:
                h = h @ trans[machine.alphabet.index(s[t - 1])]
            decoded = configs[int(h.argmax())]
            want, have = config_fields(machine, row.config), config_fields(machine, decoded)
            for name in names:
                if want[name] != have[name]:
                    return s, t, name, want[name], have[name]
            logits = h @ out
            got = (frozenset(o for o, z in zip(out_syms, logits) if z > 0) if out_syms
                   else bool(logits[0] > 0))
            if got != row.output:
                return s, t, "output", row.output, got
    return None


def brute_live(machine, max_length):
    """Every live string of length ≤ max_length in shortlex order, by `Machine.run` each."""
    return [s for n in range(max_length + 1)
            for s in itertools.product(machine.alphabet.symbols, repeat=n)
            if not machine.is_dead(machine.run(s))]


def small_dfa():
    # (ab)* with a trap: 'aa' leads to state 2, which is not co-reachable (dead by is_dead)
    return DFA(states=range(3), alphabet="ab",
               transitions={(0, "a"): 1, (1, "b"): 0, (1, "a"): 2, (2, "a"): 2, (2, "b"): 2},
               start=0, accepting={0}, name="abstar")


def random_dfa(seed: int, n: int, k: int, output_kind: str = "accept"):
    rng = np.random.default_rng(seed)
    table = rng.integers(-1, n, size=(n, k))
    accepting = [q for q in range(n) if rng.random() < 0.4]
    return DFA.from_table(table, "abc"[:k], 0, accepting, output_kind=output_kind)


# --- enumeration ----------------------------------------------------------------------------------

@pytest.mark.parametrize("k,m,L", [(1, 3, 7), (2, 2, 6), (3, 2, 5), (2, 3, 6)])
def test_live_prefixes_dyck_match_brute_force(k, m, L):
    machine = dyck(k, m)
    levels = live_prefixes(machine, L)
    got = [machine.alphabet.decode(row) for lvl in levels for row in lvl]
    assert got == brute_live(machine, L)
    assert [lvl.shape[1] for lvl in levels] == list(range(L + 1))


@settings(max_examples=40)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 5), k=st.integers(1, 3),
       L=st.integers(0, 5), kind=st.sampled_from(["accept", "next_set"]))
def test_live_prefixes_dfa_match_brute_force(seed, n, k, L, kind):
    machine = random_dfa(seed, n, k, kind)
    got = [machine.alphabet.decode(row) for lvl in live_prefixes(machine, L) for row in lvl]
    assert got == brute_live(machine, L)


class PlainDyck(DyckKM):
    """Dyck-(k, m) without a sampler and without a batched 'state' field (generic code paths)."""

    sample = None

    def run_batch(self, ids, lengths=None, with_output=True):
        tr = super().run_batch(ids, lengths, with_output)
        fields = {k: v for k, v in tr.fields.items() if k != "state"}
        return dataclasses.replace(tr, fields=fields)


def test_live_prefixes_generic_stepper_matches_brute_force():
    machine = PlainDyck(2, 2)
    got = [machine.alphabet.decode(row) for lvl in live_prefixes(machine, 5) for row in lvl]
    assert got == brute_live(machine, 5)


def test_live_prefixes_cap_is_a_clear_error():
    with pytest.raises(VerificationError, match="lower max_length"):
        live_prefixes(dyck(4, 5), 8, max_strings=1000)


@pytest.mark.parametrize("machine", [dyck(2, 3), small_dfa(), PlainDyck(2, 2), random_dfa(3, 4, 3)],
                         ids=["dyck-sampler", "dfa-table", "generic", "random-dfa"])
def test_random_live_strings_are_live_and_in_range(machine):
    ids, lengths = random_live_strings(machine, 60, (2, 9), rng=1)
    assert ids.shape[0] == 60 and lengths.max() <= 9
    for row, n in zip(ids, lengths):
        s = machine.alphabet.decode(row[:n])
        assert (row[n:] == -1).all()
        assert not machine.is_dead(machine.run(s))
    if isinstance(machine, DyckKM) or machine.name == "abstar":  # never stuck: lengths as drawn
        assert lengths.min() >= 2


def test_random_walks_are_uniform_over_live_extensions():
    machine = dyck(2, 2)  # at depth 1 after '(': allowed '(', '[', ')' — each ~1/3
    ids, _ = random_walks(machine, 3000, 2, np.random.default_rng(0))
    second = ids[ids[:, 0] == 0, 1]
    freq = np.bincount(second, minlength=4) / len(second)
    assert freq[3] == 0 and np.allclose(freq[:3], 1 / 3, atol=0.05)


def test_long_strings_are_busy_and_live():
    machine = dyck(2, 4)
    ids, lengths = long_strings(machine, 8, 300, rng=0, busy=0.7)
    assert (lengths == 300).all()
    depth = machine.run_batch(ids, lengths)["depth"]
    assert depth.mean() > 2  # busy walks stay near the top of the stack
    assert (machine.run_batch(ids, lengths)["state"] == 0).all()


# --- verification ---------------------------------------------------------------------------------

@pytest.mark.parametrize("machine", [dyck(2, 2), dyck(3, 2), small_dfa(), random_dfa(7, 5, 3),
                                     random_dfa(8, 4, 2, "next_set"), PlainDyck(2, 2)],
                         ids=["dyck22", "dyck32", "dfa", "rdfa", "rdfa-next", "generic"])
def test_verify_passes_on_a_correct_network(machine):
    net = lookup_net(machine)
    report = verify(machine, net, max_length=6, samples=50, long_length=40, long_samples=4,
                    batch_size=64)
    assert report.ok, str(report)
    assert report.counterexample is None
    n_live = len(brute_live(machine, 6))
    ex = report.phase("exhaustive")
    assert ex.strings == n_live
    assert ex.steps == sum(len(s) + 1 for s in brute_live(machine, 6))
    assert report.strings_checked == sum(p.strings for p in report.phases)
    assert "output" in report.fields


def test_verify_compares_every_decoded_field():
    machine = dyck(2, 2)
    report = verify(machine, lookup_net(machine), max_length=3, samples=0, long_samples=0)
    assert report.fields == ("stack", "depth", "state", "top", "output")
    report = verify(machine, lookup_net(machine, fields={"depth"}), max_length=3, samples=0,
                    long_samples=0)
    assert report.fields == ("depth", "output")


DYCK_NAMES = ("stack", "depth", "state", "top")


@settings(max_examples=60)
@given(data=st.data())
def test_first_counterexample_matches_brute_force(data):
    machine = data.draw(st.sampled_from([dyck(2, 2), small_dfa(), dyck(1, 3)]))
    net = lookup_net(machine)
    which = data.draw(st.sampled_from(["trans", "out"]))
    w = getattr(net.module, which)
    index = tuple(data.draw(st.integers(0, s - 1)) for s in w.shape)
    value = data.draw(st.sampled_from([0.0, 1.0, -1.0, 2.0]))
    bad = corrupted(net, which, index, value)
    L = 5
    names = DYCK_NAMES if isinstance(machine, DyckKM) else ("state",)
    want = first_failure(machine, bad, brute_live(machine, L), names)
    report = verify(machine, bad, max_length=L, samples=0, long_samples=0, batch_size=7)
    if want is None:
        assert report.ok, str(report)
        return
    assert not report.ok
    cex = report.counterexample
    assert (cex.string, cex.step, cex.field) == want[:3]
    assert cex.expected == want[3] and cex.got == want[4]
    assert cex.phase == "exhaustive"
    assert cex.config == machine.trace(cex.string)[cex.step].config


def test_counterexample_for_a_known_corruption():
    machine = dyck(2, 2)
    net = lookup_net(machine)
    _configs, _, index = reachable_configs(machine)
    # reading ']' at depth 2 with top '[' should pop to ('(',); send it to ('[',) instead
    src, wrong = index[machine.run("([")], index[machine.run("[")]
    right = index[machine.run("(")]
    bad = corrupted(corrupted(net, "trans", (3, src, right), 0.0), "trans", (3, src, wrong), 1.0)
    report = verify(machine, bad, max_length=6, samples=0, long_samples=0)
    cex = report.counterexample
    assert not report.ok
    assert cex.formatted == "([]" and cex.step == 3 and cex.field == "stack"
    assert cex.expected == ("(",) and cex.got == ("[",)
    text = str(report)
    assert "FAILED" in text and "([]" in text
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["counterexample"]["step"] == 3
    assert data["counterexample"]["string"] == ["(", "[", "]"]


def test_long_phase_finds_errors_beyond_the_exhaustive_length():
    machine = dyck(2, 4)
    net = lookup_net(machine)
    _configs, _, index = reachable_configs(machine)
    src = index[machine.run("(((")]
    dst = index[machine.run("((((")]
    bad = corrupted(net, "trans", (0, src, dst), 0.0)  # pushing a 4th '(' loses the state
    report = verify(machine, bad, max_length=2, samples=0, long_length=200, long_samples=16)
    assert not report.ok and report.counterexample.phase == "long"
    assert report.phase("exhaustive").complete and not report.phase("long").complete
    cex = report.counterexample
    want = first_failure(machine, bad, [cex.string], DYCK_NAMES)
    assert want is not None and want[1] == cex.step and want[2] == cex.field
    assert machine.run(cex.prefix).stack == (0, 0, 0, 0) and cex.prefix[-1] == "("


def test_dead_strings_are_not_compared():
    machine = small_dfa()
    net = lookup_net(machine)
    _, _, index = reachable_configs(machine)
    trap = index[machine.run("aa")]
    # on the trap state (not co-reachable) the network goes wrong: unspecified, so not a failure
    bad = corrupted(net, "trans", (1, trap, trap), 0.0)
    report = verify(machine, bad, strings=["aab", "abab", "aabab"], max_length=5, samples=20,
                    long_samples=2, long_length=30)
    assert report.ok, str(report)
    assert report.phase("given").steps == 2 + 5 + 2  # live prefixes only: t ≤ 1 for "aa…"
    bad = corrupted(net, "out", (index[machine.run("a")], 0), 1.0)  # 'a' wrongly accepted
    report = verify(machine, bad, strings=["b", "aab", "abab"], max_length=None, samples=0,
                    long_samples=0)
    cex = report.counterexample
    assert (cex.phase, cex.formatted, cex.step, cex.field) == ("given", "aab", 1, "output")
    assert cex.expected is False and cex.got is True


def test_explicit_strings_with_unknown_symbol():
    machine = dyck(2, 2)
    with pytest.raises(InputError, match="'x'"):
        verify(machine, lookup_net(machine), strings=["()", "(x)"])


def test_verify_rejects_a_network_for_another_machine():
    with pytest.raises(VerificationError, match="compiled for"):
        verify(dyck(2, 3), lookup_net(dyck(2, 2)), max_length=2)


def test_verify_rejects_decoder_shape_mismatch():
    machine = dyck(2, 2)
    net = lookup_net(machine)
    wrong = dataclasses.replace(net, decoder=lambda s: {"depth": net.decoder(s)["depth"][:, :1]})
    with pytest.raises(VerificationError, match="'depth'"):
        verify(machine, wrong, max_length=2, samples=0, long_samples=0)


def test_a_stack_of_another_width_is_a_counterexample():
    """Stack widths are each side's own (−1 past the end): a decoder that keeps one cell
    disagrees where the machine holds two, and says so as a counterexample."""
    machine = dyck(2, 2)
    net = lookup_net(machine)
    wrong = dataclasses.replace(net, decoder=lambda s: {"stack": net.decoder(s)["stack"][..., :1]})
    report = verify(machine, wrong, max_length=2, samples=0, long_samples=0)
    assert not report.ok and report.counterexample.field == "stack"


def test_verify_in_another_dtype_and_with_progress(capsys):
    machine = dyck(2, 2)
    report = verify(machine, lookup_net(machine), max_length=4, samples=10, long_length=30,
                    long_samples=2, dtype="float64", progress=True)
    assert report.ok and report.dtype == "float64"
    assert report.throughput > 0 and report.steps == report.steps_checked


def test_batching_does_not_change_the_counterexample():
    machine = dyck(2, 2)
    net = lookup_net(machine)
    _configs, _, index = reachable_configs(machine)
    bad = corrupted(net, "out", (index[machine.run("[(")], 4), 1.0)  # '$' wrongly allowed
    first = None
    for bs in (1, 3, 50, 4096):
        cex = verify(machine, bad, max_length=6, samples=0, long_samples=0,
                     batch_size=bs).counterexample
        assert cex is not None
        first = first or cex
        assert (cex.string, cex.step, cex.field) == (first.string, first.step, first.field)
    assert first.formatted == "[(" and first.field == "output"


def test_notes_for_redundant_samples_and_stuck_walks():
    machine = DFA(states=range(2), alphabet="ab", transitions={(0, "a"): 1}, start=0,
                  accepting={1}, name="just-a")  # after 'a' nothing can follow
    report = verify(machine, lookup_net(machine), max_length=3, samples=10, long_length=5,
                    long_samples=3, sample_lengths=(0, 3))
    assert report.ok
    assert any("already covered" in n for n in report.notes)
    assert any("3 of the long strings stop before length 5" in n for n in report.notes)
    assert report.phase("long").steps == 3 * 2  # ε and 'a'
    report = verify(machine, lookup_net(machine), max_length=3, samples=10,
                    sample_lengths=(0, 9), long_samples=0)
    assert report.notes == ()


def test_readable_stack_keeps_a_wrong_cell_below_the_top():
    from pdanet.verify.report import readable

    machine = dyck(2, 3)
    assert readable(machine, "stack", np.array([0, 1, -1])) == ("(", "[")
    assert readable(machine, "stack", np.array([-1, 1, -1])) == (-1, "[")
    assert readable(machine, "stack", np.array([7, -1, -1])) == (7,)
    assert readable(machine, "output", np.array([1, 0, 0, 1, 1], dtype=bool)) == frozenset("(]$")
    assert readable(small_dfa(), "state", -1) == "dead"


def compiled_or_skip(machine, target):
    from pdanet.constructions import compile as compile_net
    from pdanet.errors import CompileError

    try:
        return compile_net(machine, target)
    except CompileError as exc:
        pytest.skip(f"no {target} construction for {machine!r} yet: {exc}")


def single_string_first_failure(machine, net, strings):
    """The first disagreement, running the network on one string at a time."""
    for s in strings:
        ids = np.full((1, max(1, len(s))), -1, dtype=np.int64)  # a torch RNN needs T ≥ 1
        ids[0, : len(s)] = machine.alphabet.encode(s)
        states, logits = net.forward(ids)
        got = {**net.decode(states), "output": net.readout(logits)}
        got = {name: v[0] for name, v in got.items()}
        names = [n for n in ("state", "stack", "depth", "top") if n in got]
        trace = machine.run_batch(ids, np.array([len(s)])).fields
        for t in range(len(s) + 1):
            for name in names + ["output"]:
                if not np.array_equal(np.asarray(got[name][t]), trace[name][0, t]):
                    return s, t, name
    return None


@pytest.mark.parametrize("target", ["lstm", "elman"])
def test_real_dyck_construction_and_a_corrupted_copy(target):
    machine = dyck(2, 2)
    net = compiled_or_skip(machine, target)
    assert verify(machine, net, max_length=6, samples=100, long_length=200).ok
    assert verify(machine, net, max_length=2, samples=0, long_samples=0, batch_size=1).ok
    module = net.module
    weight = module.rnn.weight_hh_l0
    found = 0
    for i, j in weight.detach().nonzero().tolist()[:12]:
        bad_module = copy.deepcopy(module)
        with torch.no_grad():
            bad_module.rnn.weight_hh_l0[i, j] *= -1
        bad = dataclasses.replace(net, module=bad_module)
        report = verify(machine, bad, max_length=5, samples=0, long_samples=0)
        want = single_string_first_failure(machine, bad, brute_live(machine, 5))
        if want is None:
            assert report.ok
            continue
        found += 1
        cex = report.counterexample
        assert (cex.string, cex.step, cex.field) == want
    assert found > 0


def test_encoded_strings_give_the_same_report_as_symbols():
    machine = dyck(2, 3)
    net = lookup_net(machine)
    _configs, _, index = reachable_configs(machine)
    bad = corrupted(net, "out", (index[machine.run("[(")], 4), 1.0)  # '$' wrongly allowed
    strings = ["()", "([", "[([", "[(", ""]
    ids, _ = machine.encode(strings)
    for n in (net, bad):
        by_symbols = verify(machine, n, strings=strings, max_length=None, samples=0,
                            long_samples=0)
        by_ids = verify(machine, n, strings=ids, max_length=None, samples=0, long_samples=0)
        assert (by_ids.ok, by_ids.strings_checked, by_ids.steps_checked) == (
            by_symbols.ok, by_symbols.strings_checked, by_symbols.steps_checked)
        assert by_ids.counterexample == by_symbols.counterexample
    assert not verify(machine, bad, strings=ids, max_length=None, samples=0,
                      long_samples=0).ok


@pytest.mark.parametrize("ids, match", [
    (np.array([[0, -1, 1]]), "padding"),
    (np.array([[0, 4]]), "outside the alphabet"),
    (np.array([0, 1]), "2-D"),
])
def test_encoded_strings_are_checked(ids, match):
    machine = dyck(2, 2)
    with pytest.raises(InputError, match=match):
        verify(machine, lookup_net(machine), strings=ids, max_length=None, samples=0,
               long_samples=0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.integers(1, 9),
       layouts=st.tuples(st.sampled_from("CF"), st.sampled_from("CF")))
def test_position_differences_do_not_depend_on_memory_layout(seed, width, layouts):
    """`_positions_differ` (plane-wise OR for field-major arrays, a count otherwise) marks
    exactly the positions with some differing entry, whatever the two arrays' layouts."""
    from pdanet.verify.lockstep import _positions_differ

    rng = np.random.default_rng(seed)
    expected = rng.integers(-1, 3, size=(4, 6, width))
    got = np.where(rng.random(expected.shape) < 0.05, expected + 1, expected)
    want = (expected != got).any(axis=-1)
    e = np.asfortranarray(expected) if layouts[0] == "F" else expected
    g = np.asfortranarray(got) if layouts[1] == "F" else got
    assert np.array_equal(_positions_differ(e, g), want)
    assert np.array_equal(_positions_differ(e[..., :1].reshape(4, 6), g[..., :1].reshape(4, 6)),
                          want if width == 1 else (expected[..., 0] != got[..., 0]))


def test_one_thread_and_overlapped_runs_agree():
    machine = dyck(2, 3)
    net = lookup_net(machine)
    _configs, _, index = reachable_configs(machine)
    bad = corrupted(net, "out", (index[machine.run("[(")], 4), 1.0)  # '$' wrongly allowed
    for n in (net, bad):
        a = verify(machine, n, max_length=5, samples=50, long_length=40, long_samples=4)
        b = verify(machine, n, max_length=5, samples=50, long_length=40, long_samples=4,
                   overlap=False)
        assert (a.ok, a.strings_checked, a.steps_checked, a.counterexample) == (
            b.ok, b.strings_checked, b.steps_checked, b.counterexample)
    assert not b.ok


@pytest.mark.parametrize("where", [None, 3, 200])
def test_pipelined_halves_give_the_same_outcome(where):
    """With an executor a batch of ≥ PIPELINE_ROWS rows runs as two halves (the first compared
    while the network runs the second): same outcome as one pass, wherever the first failure
    lies (none, first half, second half)."""
    from concurrent.futures import ThreadPoolExecutor

    from pdanet.verify.lockstep import PIPELINE_ROWS, compare_batch

    machine = dyck(2, 3)
    net = lookup_net(machine)
    _configs, _, index = reachable_configs(machine)
    bad = corrupted(net, "out", (index[machine.run("[(")], 4), 1.0)  # '$' wrongly allowed
    good = ["()", "(())", "[]()", "([])", "(("]
    strings = [good[i % len(good)] for i in range(PIPELINE_ROWS + 40)]
    if where is not None:
        strings[where] = "[(("[:2]                                     # reaches the bad state
    ids, lengths = machine.encode(strings)
    one = compare_batch(machine, bad, ids, lengths)
    with ThreadPoolExecutor(max_workers=1) as pool:
        two = compare_batch(machine, bad, ids, lengths, executor=pool)
    assert (one.strings, one.steps, one.fields, one.failure) == (
        two.strings, two.steps, two.fields, two.failure)
    assert np.array_equal(one.expected, two.expected) and np.array_equal(one.got, two.got)
    assert (one.failure is None) == (where is None)
    if where is not None:
        assert one.failure[0] == where and one.strings == where + 1


def test_a_batch_whose_halves_decode_to_different_widths_is_compared_whole():
    """A stack network's decoded stack is as wide as the deepest stack of its batch, so a large
    batch of a machine without fixed-width fields is not split (it would not line up)."""
    from pdanet.verify.lockstep import PIPELINE_ROWS

    machine = pn.tasks.get("dyck2")
    assert not machine.fixed_width_fields
    net = pn.compile(machine, target="stack_rnn")
    strings = ["()"] * (PIPELINE_ROWS // 2) + ["(((([[]]))))"] * (PIPELINE_ROWS // 2 + 10)
    report = verify(machine, net, strings=strings, max_length=None, samples=0, long_samples=0)
    assert report.ok and report.strings_checked == len(strings)


def test_default_samples_go_beyond_the_exhaustive_phase():
    machine = DFA(states=range(2), alphabet="ab", transitions={(0, "a"): 1, (0, "b"): 0,
                  (1, "a"): 1, (1, "b"): 0}, start=0, accepting={1}, name="ends-in-a")
    report = verify(machine, lookup_net(machine), max_length=3, samples=20, long_samples=0)
    assert report.ok
    assert "lengths 4–16" in report.phase("random").description
    assert not any("already covered" in n for n in report.notes)


def test_verify_accepts_the_machine_an_ns_rnn_was_compiled_from():
    m = pn.tasks.get("marked_reversal")
    net = pn.compile(m, target="ns_rnn")
    assert net.machine != m and net.compiled_from is m
    report = verify(m, net, max_length=4, samples=10, long_samples=0)
    assert report.ok and "reading" in report.fields
    with pytest.raises(VerificationError, match="compiled for .*converted from"):
        verify(pn.tasks.get("dyck1"), net, max_length=2)


@pytest.mark.parametrize("target,method", [("lstm", "hewitt"), ("lstm", "compact"),
                                           ("elman", "hewitt"), ("elman", "compact")])
def test_verify_reports_nan_weights_as_a_disagreement(target, method):
    """A NaN anywhere in a compiled Dyck network is a counterexample, never a crash."""
    m = pn.tasks.dyck(k=2, m=2)
    for name, _ in pn.compile(m, target=target, method=method).module.named_parameters():
        net = pn.compile(m, target=target, method=method)
        with torch.no_grad():
            dict(net.module.named_parameters())[name].view(-1)[0] = float("nan")
        report = pn.verify(m, net, max_length=4, samples=0, long_samples=0)
        assert not report.ok, name


# --- options as one value ---------------------------------------------------------------------------

def test_options_value_and_keyword_overrides():
    from pdanet.verify import VerifyOptions

    machine = dyck(2, 2)
    net = lookup_net(machine)
    opts = VerifyOptions(max_length=4, samples=10, long_length=30, long_samples=2, seed=3)
    by_value = verify(machine, net, opts)
    by_keywords = verify(machine, net, max_length=4, samples=10, long_length=30, long_samples=2,
                         seed=3)
    assert by_value.ok and by_value.strings_checked == by_keywords.strings_checked
    assert by_value.steps_checked == by_keywords.steps_checked
    shorter = verify(machine, net, opts, long_samples=0)        # an override replaces one field
    assert [p.name for p in shorter.phases] == ["exhaustive", "random"]
    assert opts.long_samples == 2
    assert VerifyOptions.of(opts, long_samples=0) == dataclasses.replace(opts, long_samples=0)
    assert VerifyOptions(sample_lengths=5).sample_lengths == (5, 5)
    assert VerifyOptions(dtype="float64").dtype == torch.float64
    ids = np.zeros((2, 3), dtype=np.int64)
    assert VerifyOptions(strings=ids) == VerifyOptions(strings=ids.copy())
    assert hash(VerifyOptions(strings=["()", "[]"])) == hash(VerifyOptions(strings=("()", "[]")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.samples = 0


@pytest.mark.parametrize("field, value", [
    ("max_length", -1), ("max_length", 2.5), ("samples", -1), ("samples", True),
    ("long_length", -5), ("long_samples", "4"), ("batch_size", 0), ("max_strings", 0),
    ("max_batch_steps", 0), ("busy", 1.5), ("busy", float("nan")), ("rtol", -1e-3),
    ("atol", float("nan")), ("seed", -1), ("seed", "x"), ("progress", "yes"), ("overlap", 1),
    ("sample_lengths", (5, 2)), ("sample_lengths", "ab"), ("dtype", "int64"), ("strings", "ab"),
])
def test_options_name_the_bad_field(field, value):
    from pdanet.verify import VerifyOptions

    with pytest.raises(InputError, match=field):
        VerifyOptions(**{field: value})
    with pytest.raises(InputError, match=field):       # an override is validated the same way
        verify(dyck(2, 2), lookup_net(dyck(2, 2)), **{field: value})


def test_options_refuse_unknown_names_and_positional_settings():
    machine = dyck(2, 2)
    with pytest.raises(InputError, match="no option.*max_len.*it takes: max_length"):
        verify(machine, lookup_net(machine), max_len=3)
    with pytest.raises(InputError, match="VerifyOptions"):
        verify(machine, lookup_net(machine), 3)


@settings(max_examples=40, deadline=None)
@given(realtime_dpda(), st.integers(0, 2**16), st.integers(1, 30))
def test_batched_pushdown_walks_equal_stepped_walks(m, seed, length):
    """A real-time DPDA's own batched walk draws the same strings as stepping configurations."""
    from pdanet.verify.strings import _stepped_walks

    fast = random_walks(m, 7, length, np.random.default_rng(seed))
    slow = _stepped_walks(m, 7, length, np.random.default_rng(seed))
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])


def test_long_strings_of_a_finite_state_task_run_to_full_length():
    """cycle_navigation ends at its query symbol: uniform walks stop after a few symbols, long
    strings keep to states with live strings of every length until the last step."""
    from pdanet.verify.strings import unbounded_states

    m = pn.tasks.get("cycle_navigation")
    _, short = random_walks(m, 50, 300, np.random.default_rng(0))
    ids, lengths = long_strings(m, 50, 300, rng=0)
    assert short.mean() < 50 and (lengths == 300).all()
    far = unbounded_states(m)
    assert far.any() and not far[~m.live_mask].any()
    for row in ids[:5]:  # every prefix before the last symbol is in an unbounded state
        q = m.state_index(m.start)
        for a in row[:-1]:
            q = m.table[q, a]
            assert far[q]


@pytest.mark.parametrize("task", ["marked_reversal", "cycle_navigation"])
def test_task_long_strings_are_long_and_live(task):
    """Marked reversal's random walks die after a few symbols (the marker comes early): the
    task's sampler gives strings of the largest length ≤ 301 its language has."""
    m = pn.tasks.get(task)
    ids, lengths = pn.tasks.long_strings(task, 12, 301, rng=3)
    assert (lengths >= 293).all() and ids.shape[0] == 12
    for row, n in zip(ids, lengths):
        assert not m.is_dead(m.run(m.alphabet.decode(row[:n])))
