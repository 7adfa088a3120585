"""The register factoring of the Grefenstette models (`pdanet.models.grefenstette`): each move's
next register, pushed and emitted datum is described as "the register", "the input symbol",
"the symbol read" or a constant, chosen alike across inputs and readings (so a teacher-forced
input that equals the symbol read does not split the input classes), and never a description
that is wrong for some member of a tag (brute-force checks against the machine)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.store import BOTTOM, StoreTransducer
from pdanet.automata.tasks import grefenstette2015 as G
from pdanet.experiments import evaluation
from pdanet.experiments.data import datasets, machine_of
from pdanet.experiments.models import build, compile_model
from pdanet.experiments.protocols import protocol, with_size
from pdanet.models.grefenstette import estimate, factor

SOS, SEP, EOS = "<s>", "|||", "</s>"


# --- protocol bigram flipping: the controller does not grow with the vocabulary -------------
def _flip_units(store: str, V: int) -> int:
    """Hidden units of protocol bigram flipping (`G.protocol_machine`): a start unit, the
    control units (queue 8, deque 9: the tags × 3 input classes × reading tests) and one
    gated copy of ⌈log2 V⌉ datum bits per (control unit, copied source) (queue 8, deque 10)."""
    control, gated = {"queue": (8, 8), "deque": (9, 10)}[store]
    return 1 + control + gated * math.ceil(math.log2(V))


@pytest.mark.parametrize("store", ["queue", "deque"])
@pytest.mark.parametrize("V", [8, 32])
def test_protocol_bigram_flip_unit_count(store, V):
    m = G.protocol_machine("bigram_flip", V, store)
    f = factor(m)
    assert f.factoring == "registers" and len(f.reps) == 3   # <s>, |||, every vocabulary symbol
    size = estimate(m)
    assert size["hidden_units"] == _flip_units(store, V)
    assert size["control_units"] == {"queue": 8, "deque": 9}[store]
    if V == 8:
        net = pn.compile(m, target="stack_rnn", model="grefenstette_lstm")
        assert net.hidden_units == _flip_units(store, V) <= 256    # the paper's LSTM: 256


def _flip(w: tuple) -> tuple:
    return tuple(x for i in range(0, len(w), 2) for x in (w[i + 1], w[i]))


@pytest.mark.parametrize("store", ["queue", "deque"])
def test_protocol_bigram_flip_verifies_at_vocab_8(store):
    """Every string up to length 6 (in and out of the domain), sampled and long strings, and
    the paper's joint inputs emit the flipped target."""
    m = G.protocol_machine("bigram_flip", 8, store)
    net = pn.compile(m, target="stack_rnn", model="grefenstette_lstm")
    rep = pn.verify(m, net, max_length=6, samples=60, sample_lengths=(7, 40), long_samples=3,
                    long_length=300, overlap=False)
    assert rep.ok, rep
    V = G.vocabulary(8)
    for n in (0, 2, 4, 10):
        w = tuple(V[(3 * i + n) % 8] for i in range(n))
        joint, target = G.protocol_form("bigram_flip", w, 8)
        assert target[len(w) + 1:] == _flip(w) + (EOS,)
        got = m.transduce(joint)
        assert tuple(x for x in got if x is not None) == _flip(w) + (EOS,)


# --- random register machines: the chosen descriptions are exact -----------------------------
SYMS = ("a", "b", "c")
KINDS = ("reg", "in", "rd", "c")


@st.composite
def register_machines(draw):
    """A queue or stack transducer whose states ("h", x) hold a symbol; at each (input,
    reading) the next held symbol, the pushed symbol and the output are each the held symbol,
    the input, the symbol read or a constant, chosen at random per move (the same for every
    held x, so the states factor into one tag and a register). Inputs that equal the symbol
    read make "in" and "rd" both valid there. Named "columns" where the kinds depend on the
    reading only."""
    store = draw(st.sampled_from(["queue", "stack"]))
    V = SYMS[:draw(st.integers(2, 3))]
    const = draw(st.sampled_from(V))
    columns = draw(st.booleans())      # the move's kinds depend on the reading only

    def value(kind: str, x, y, X):
        return {"reg": x, "in": y, "rd": X, "c": const}[kind]

    t: dict = {("s", SOS, BOTTOM): (("h", V[0]), None, "noop")}
    by_column: dict = {}
    for y in V:
        for X in V + (BOTTOM,):
            if not columns or X not in by_column:
                kinds = [k for k in KINDS if k != "rd" or X is not BOTTOM]
                by_column[X] = (*(draw(st.sampled_from(kinds)) for _ in range(3)),
                                draw(st.sampled_from(["push", "pop", "noop"] if X is not BOTTOM
                                                     else ["push", "noop"])),
                                draw(st.booleans()))
            kn, kp, ko, op, emit = by_column[X]
            for x in V:
                t[(("h", x), y, X)] = (("h", value(kn, x, y, X)),
                                       value(ko, x, y, X) if emit else None,
                                       ("push", value(kp, x, y, X)) if op == "push" else op)
    for x in V:
        for X in V + (BOTTOM,):
            t[(("h", x), SEP, X)] = ("done", x if X is BOTTOM else X, "noop")
    states = ("s", "done") + tuple(("h", x) for x in V)
    return StoreTransducer(store, states, (SOS, SEP) + V, V, V, t, "s",
                           name="columns" if columns else "registers")


@settings(max_examples=30, deadline=None)
@given(register_machines())
def test_random_register_machines_compile_exactly(m):
    net = pn.compile(m, target="stack_rnn", model="grefenstette_lstm")
    rep = pn.verify(m, net, max_length=5, samples=20, sample_lengths=(6, 20), long_samples=0,
                    overlap=False)
    assert rep.ok, rep
    f = factor(m)
    if m.name == "columns" and f.factoring == "registers":
        # every symbol's move is alike in each column: one class (with <s> and |||: 3), though
        # where the input equals the symbol read more descriptions are valid
        assert len(f.reps) <= 3


# --- the delayed form keeps its sizes -------------------------------------------------------
@pytest.mark.parametrize("V,units", [(8, 24), (32, 36)])
def test_delayed_bigram_flip_sizes_unchanged(V, units):
    """The Mealy bigram flip (`pn.tasks.get("bigram_flip")`, states holding the pending symbol)
    keeps `benchmarks/bench_model_sizes.py`'s sizes."""
    assert estimate(pn.tasks.get("bigram_flip", vocab_size=V))["hidden_units"] == units


# --- the experiment protocol ----------------------------------------------------------------
def test_bigram_flip_protocol_compiled_init_is_exact():
    """`protocol("grefenstette2015", "bigram_flip")`: even sources only (joint lengths 2|w| + 2
    with |w| even) and the compiled network scores coarse = fine = 1 before training."""
    p = protocol("grefenstette2015", "bigram_flip")
    sz = with_size(p, "small", n_train=12, n_valid=6, n_test_per_length=3, epochs=1,
                   train_lengths=(6, 10), test_lengths=(14, 18)).size("small")
    m = machine_of(p, sz)
    data = datasets(p, sz, 0, m)
    module = build(compile_model(m, p.model), p.model, "compiled")
    for part in data.values():
        for s in part.strings():
            k = s.index(SEP)
            assert (k - 1) % 2 == 0 and s[k + 1:] == _flip(s[1:k])
        z = evaluation.logits_of(module, part)
        assert evaluation.metric_value(p, part, z) == 1.0
        assert evaluation.metric_value(p, part, z, name="fine") == 1.0
