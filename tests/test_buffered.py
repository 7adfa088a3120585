"""DPDTs with ε-moves compiled into the buffered stack RNN of Hao et al. (2018) §2.3: configurations
at input boundaries (pn.verify) and whole output sequences (verify_transduction) agree."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pdt import DPDT
from pdanet.constructions.abstraction import BufferedController
from pdanet.constructions.buffered import output_sequences
from pdanet.constructions.stacks import NeuralStack
from pdanet.errors import CompileError
from pdanet.verify.transduction import verify_transduction


def _reversal_eps():
    return pn.tasks.get("reversal", epsilon=True)


def test_reversal_eps_outputs_and_stacks_agree():
    m = _reversal_eps()
    assert not m.is_realtime and m.output_kind == "string"
    net = pn.compile(m, target="buffered_stack_rnn")
    assert net.steps_per_symbol == 0 and "boundaries" in net.info["step"]
    rep = pn.verify(m, net, max_length=8, samples=100, sample_lengths=(0, 100), long_samples=0)
    assert rep.ok, rep.counterexample
    assert {"state", "stack", "depth", "top", "output"} <= set(rep.fields)
    seq = verify_transduction(m, net, max_length=8, samples=100, sample_lengths=(0, 100))
    assert seq.ok, seq.counterexample
    assert seq.strings_checked > 100


def test_abstraction_names_input_epsilon_and_idle_units():
    net = pn.compile(_reversal_eps(), target="buffered_stack_rnn")
    ab = net.abstraction
    assert isinstance(ab, BufferedController) and ab.start == 0 and not ab.linear
    assert isinstance(net.module.store, NeuralStack) and ab.memory == net.module.store.name
    assert len(ab.labels) == net.hidden_units == len(ab.units) + 1
    kinds = {u.a for u in ab.units}
    assert -1 in kinds and -2 in kinds and any(a >= 0 for a in kinds)   # ε, ⊣ and input units
    assert all(lab.split("·")[1] == {-1: "ε", -2: "⊣"}.get(u.a, str(u.a))
               for lab, u in zip(ab.labels[1:], ab.units))


def test_output_sequence_equals_transduce_and_reference():
    m = _reversal_eps()
    net = pn.compile(m, target="buffered_stack_rnn")
    ref = pn.tasks.reference("reversal", epsilon=True)
    strings = pn.tasks.sample("reversal", 30, range(1, 40), np.random.default_rng(3), epsilon=True)
    got = output_sequences(net, strings)
    for s, g in zip(strings, got):
        assert g == m.transduce(s) == tuple(y for out in ref(s) for y in out)


def test_multi_symbol_outputs_and_multi_push_use_helper_steps():
    """One input move emitting three symbols and pushing two: helper ε-steps and normal form."""
    t = {("p", "a", BOTTOM): ("p", ("x", "y", "x"), ("A", "A", BOTTOM)),
         ("p", "a", "A"): ("p", "y", ("A", "A")),
         ("p", "b", "A"): ("p", (), ()),
         ("p", EPSILON, "B"): ("p", "x", ())}
    t[("p", "c", "A")] = ("p", EPSILON, ("B", "A"))
    m = DPDT(["p"], "abc", "xy", "AB", t, "p")
    net = pn.compile(m, target="buffered_stack_rnn")
    assert net.info["helper_states"] == 2
    rep = pn.verify(m, net, max_length=7, samples=50, sample_lengths=(0, 40), long_samples=0)
    assert rep.ok, rep.counterexample
    assert verify_transduction(m, net, max_length=6, samples=30).ok


def test_a_broken_network_is_caught():
    m = _reversal_eps()
    net = pn.compile(m, target="buffered_stack_rnn")
    with torch.no_grad():
        out = net.module.output                     # swap the codes of the two output symbols
        out.weight.copy_(out.weight.flip(0))
        out.bias.copy_(out.bias.flip(0))
    seq = verify_transduction(m, net, max_length=4, samples=0)
    assert not seq.ok and seq.counterexample.field == "output_sequence"


def test_padding_and_blocking():
    m = _reversal_eps()
    net = pn.compile(m, target="buffered_stack_rnn")
    out = net.run("ab#a")                          # blocks after the marker
    assert out["state"][-1] == -1 and out["state"][-2] == m.state_index("done")
    ids, _ = m.encode(["abba#", "b#"])
    states, _ = net.forward(ids)
    fields = net.decode(states)
    assert (fields["state"][1, 2:] == fields["state"][1, 2]).all()   # held after the end


def test_only_deterministic_pushdown_machines():
    with pytest.raises(CompileError):
        pn.compile(pn.tasks.get("unmarked_reversal"), target="buffered_stack_rnn")
    with pytest.raises(CompileError):
        pn.compile(pn.tasks.get("parity"), target="buffered_stack_rnn")


def test_a_dpda_compiles_to_the_buffered_target_and_verifies():
    m = pn.tasks.get("dyck2")
    net = pn.compile(m, target="buffered_stack_rnn")
    report = pn.verify(m, net, max_length=6, samples=100, long_length=40, long_samples=4)
    assert report.ok and "output" in report.fields


@st.composite
def random_eps_dpdt(draw):
    """Random DPDTs with ε-moves that only pop (so no ε-loop is possible)."""
    nq, ng = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    Q, G, K, Out = list(range(nq)), [f"X{i}" for i in range(ng)], "ab", "xy"
    t = {}
    for q in Q:
        for x in G + [BOTTOM]:
            if x is not BOTTOM and draw(st.booleans()):
                t[(q, EPSILON, x)] = (draw(st.sampled_from(Q)), draw(st.sampled_from(
                    [EPSILON, "x", ("x", "y")])), ())
                continue
            for a in K:
                kind = draw(st.sampled_from(["none", "noop", "push", "pop"]))
                if kind == "none" or (x is BOTTOM and kind == "pop"):
                    continue
                y = draw(st.sampled_from(G))
                gamma = {"noop": (x,), "push": (y, x), "pop": ()}[kind]
                t[(q, a, x)] = (draw(st.sampled_from(Q)), draw(st.sampled_from([EPSILON, "y"])),
                                gamma)
    return DPDT(Q, K, Out, G, t, 0)


@given(m=random_eps_dpdt())
@settings(max_examples=10, deadline=None)
def test_random_eps_dpdts(m):
    net = pn.compile(m, target="buffered_stack_rnn")
    rep = pn.verify(m, net, max_length=5, samples=20, sample_lengths=(0, 30), long_samples=0)
    assert rep.ok, rep.counterexample
    assert verify_transduction(m, net, max_length=5, samples=20, sample_lengths=(0, 30)).ok
