"""The protocol form of Grefenstette et al. (2015) §4 (``<s> source ||| target </s>``): the
real-time transducers of sequence copying, reversal and bigram flipping (§4.1) and of the two ITG
tasks (§4.2) against oracles written from the paper's text, their compiled Grefenstette networks,
and the experiment protocol built on them."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.tasks import grefenstette2015 as G
from pdanet.automata.tasks.task import apply
from pdanet.errors import AutomatonError, InputError
from pdanet.experiments import evaluation
from pdanet.experiments.data import PAIR_PROTOCOL, datasets, machine_of
from pdanet.experiments.models import build, compile_model
from pdanet.experiments.protocols import protocol, with_size
from pdanet.experiments.run import run_experiment
from pdanet.learning import data as learning_data

TASKS = ("sequence_copy", "sequence_reversal", "bigram_flip")   # §4.1
MACHINES = [(t, s) for t in TASKS for s in G.PROTOCOL_STORES[t][1]]
SOS, SEP, EOS = "<s>", "|||", "</s>"


# --- the oracle, from §4.1's text -------------------------------------------------------------
def _transform(task: str, w: tuple) -> tuple | None:
    """§4.1: copying repeats the source, reversal reverses it, bigram flipping (even lengths
    only) swaps the i-th and (i+1)-th symbols for every odd i."""
    if task == "sequence_copy":
        return w
    if task == "sequence_reversal":
        return w[::-1]
    if len(w) % 2:
        return None
    out = []
    for i in range(0, len(w), 2):          # 0-based i: the paper's odd index i + 1
        out += [w[i + 1], w[i]]
    return tuple(out)


def _oracle(task: str, string: tuple, vocab: tuple):
    """The per-step outputs on a joint input ``<s> w ||| y`` (None where a step emits nothing:
    ``<s>`` and the source), or None for an input that is not a complete joint input. After
    ``|||`` and after each target symbol the output is the next symbol of the joint sequence
    ``<s> w ||| f(w) </s>`` (§4: the target side, then EOS); the fed target symbols y are the
    teacher-forced ones, whose identity the transducer does not check (|y| = |f(w)| only)."""
    if not string or string[0] != SOS or string.count(SEP) != 1 or string.count(SOS) != 1:
        return None
    k = string.index(SEP)
    w, y = string[1:k], string[k + 1:]
    if any(x not in vocab for x in w + y):
        return None
    target = _transform(task, w)
    if target is None or len(y) != len(target):
        return None
    joint = (SOS, *w, SEP, *target, EOS)
    return tuple(None if i < k else joint[i + 1] for i in range(len(string)))


def _prefix_ok(task: str, string: tuple, vocab: tuple) -> bool:
    """Whether some complete joint input starts with `string`."""
    if not string:
        return True
    if string[0] != SOS or SOS in string[1:] or string.count(SEP) > 1:
        return False
    rest = string[1:]
    if any(x not in vocab for x in rest if x != SEP):
        return False
    if SEP not in rest:
        return True
    k = rest.index(SEP)
    n = k if task != "bigram_flip" or k % 2 == 0 else None
    return n is not None and len(rest) - k - 1 <= n


def _walk(machine, alphabet, max_len):
    """Every string up to `max_len` with the machine's configuration after it (None: blocked),
    each prefix stepped once."""
    out = []

    def go(config, prefix, outs):
        out.append((prefix, config, outs))
        if len(prefix) == max_len:
            return
        for a in alphabet:
            if config is None or config.state is None:
                go(None, prefix + (a,), None)
            else:
                c = machine.step(config, a)
                go(c, prefix + (a,), None if c.state is None else outs + (c.emitted,))

    go(machine.initial(), (), ())
    return out


# --- the transducers against the oracle --------------------------------------------------------
@pytest.mark.parametrize("task,store", MACHINES)
def test_every_source_up_to_6_gives_the_oracles_outputs(task, store):
    """All sources of length ≤ 6 over 3 symbols, fed as teacher-forced joint inputs."""
    m = G.protocol_machine(task, 3, store)
    vocab = G.vocabulary(3)
    for n in range(7):
        for w in itertools.product(vocab, repeat=n):
            t = _transform(task, w)
            if t is None:
                continue
            x = (SOS, *w, SEP, *t)
            want = _oracle(task, x, vocab)
            assert apply(m, x) == want, (w, apply(m, x), want)
            assert m.transduce(x) == tuple(y for y in want if y is not None)
            assert G.protocol_form(task, w, 3) == (x, want)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MACHINES), st.integers(1, 3))
def test_domain_and_outputs_on_every_string_up_to_7(machine_key, vocab_size):
    """Every string of length ≤ 7 (6 for 3 symbols) over <s>, ||| and the vocabulary: it blocks
    exactly off the prefixes of complete joint inputs, accepts exactly the complete ones, and
    there emits the oracle's outputs, whatever target symbols are fed."""
    task, store = machine_key
    m = G.protocol_machine(task, vocab_size, store)
    vocab = G.vocabulary(vocab_size)
    assert tuple(m.alphabet) == (SOS, SEP) + vocab and tuple(m.output_alphabet) == vocab + (EOS,)
    alphabet = (SOS, SEP) + vocab
    for s, config, outs in _walk(m, alphabet, 7 if vocab_size < 3 else 6):
        live = config is not None and config.state is not None
        assert live == _prefix_ok(task, s, vocab), s
        want = _oracle(task, s, vocab)
        assert (live and m.is_accepting(config)) == (want is not None), s
        if want is not None:
            assert outs == want, (s, outs, want)
    with pytest.raises(InputError):
        m.step(m.initial(), EOS)              # </s> is predicted, never read


def test_protocol_alphabets_are_the_pair_datasets():
    """The machine's inputs and outputs are `pair_dataset`'s joint inputs and target classes, in
    order, and the protocol symbols are pdanet.learning.data's."""
    assert (G.SOS, G.SEPARATOR, G.EOS) == (learning_data.SOS, learning_data.SEPARATOR,
                                          learning_data.EOS)
    for task, store in MACHINES:
        m = G.protocol_machine(task, 4, store)
        pairs = [(w, _transform(task, w)) for w in (("s0", "s3"), ("s1", "s2", "s2", "s0"))]
        d = learning_data.pair_dataset(m, pairs, *G.pair_alphabets(4))
        assert tuple(d.alphabet) == tuple(m.alphabet)
        assert tuple(d.output_alphabet) == tuple(m.output_alphabet)
        # the machine labels the target side exactly as the pairs do
        out = m.run_batch(d.ids.numpy(), d.lengths.numpy())["output"]
        tgt = d.targets.numpy()
        side, inside = tgt >= 0, d.mask().numpy()
        assert (out[side] == tgt[side]).all() and (out[inside & ~side] == -1).all()
        assert side.sum() == sum(len(t) + 1 for _, t in pairs)


def test_bad_input_is_a_typed_error():
    with pytest.raises(InputError, match="no protocol-form transducer"):
        G.protocol_machine("dyck2")
    with pytest.raises(InputError, match="store"):
        G.protocol_machine("svo_sov", store="stack")
    with pytest.raises(InputError, match="vocab_size"):
        G.protocol_machine("gender_conjugation", -1)
    with pytest.raises(InputError, match="store"):
        G.protocol_machine("sequence_reversal", 4, "queue")
    with pytest.raises(InputError, match="store"):
        G.protocol_machine("sequence_copy", 4, "stack")
    with pytest.raises(InputError, match="vocab_size"):
        G.protocol_machine("sequence_copy", 0)
    with pytest.raises(InputError, match="even"):
        G.protocol_form("bigram_flip", ("s0", "s1", "s0"), 2)
    with pytest.raises(InputError):
        G.protocol_form("sequence_copy", ("s5",), 2)
    with pytest.raises(InputError):
        G.protocol_form("gender_conjugation", ("the",))
    m = G.protocol_machine("sequence_copy", 2)
    with pytest.raises(InputError, match="domain"):
        m.transduce((SOS, "s0", SEP))         # the target side is cut short


# --- compiled networks -------------------------------------------------------------------------
@pytest.mark.parametrize("task,store", MACHINES)
@pytest.mark.parametrize("model", ["grefenstette_lstm", "grefenstette_rnn"])
def test_compiles_and_verifies_at_vocab_8(task, store, model):
    m = G.protocol_machine(task, 8, store)
    net = pn.compile(m, target="stack_rnn", model=model)
    rep = pn.verify(m, net, max_length=4, samples=40, sample_lengths=(5, 30), long_samples=2,
                    long_length=120, overlap=False)
    assert rep.ok, rep


@pytest.mark.parametrize("task", ["sequence_copy", "sequence_reversal"])
def test_compiles_at_vocab_128(task):
    """The paper's vocabulary: the data path keeps the network small (21 hidden units)."""
    m = G.protocol_machine(task, 128)
    t0 = time.perf_counter()
    net = pn.compile(m, target="stack_rnn", model="grefenstette_lstm")
    seconds = time.perf_counter() - t0
    assert net.info["factoring"] == "data_path" and net.hidden_units <= 32
    assert seconds < 20                  # 1–2 s on one core (measured); generous for shared CPUs
    # the paper's own strings: sources of the training and test lengths (§4.1, §4.3)
    pairs = G.sequence_copy_pairs(24, list(range(8, 129, 5)), np.random.default_rng(0))
    strings = [G.protocol_form(task, w)[0] for w, _ in pairs]
    rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0,
                    overlap=False)
    assert rep.ok, rep


# --- the experiment protocol -------------------------------------------------------------------
TINY = {"n_train": 12, "n_valid": 6, "n_test_per_length": 3, "epochs": 1,
        "train_lengths": (4, 6, 8), "test_lengths": (10, 12)}


@pytest.mark.parametrize("task", ["sequence_reversal", "sequence_copy"])
def test_protocol_data_and_compiled_init_exact(task):
    """The protocol's data is the pair form (targets only on the target side, sources of length
    (L − 2) / 2) and the compiled network scores coarse = fine = 1 before training."""
    p = protocol("grefenstette2015", task)
    assert p.target == PAIR_PROTOCOL and p.metric == "coarse" and p.mask is None
    sz = with_size(p, "small", **TINY).size("small")
    m = machine_of(p, sz)
    data = datasets(p, sz, 0, m)
    for name, part in data.items():
        strings = part.strings()
        for s, row in zip(strings, part.targets.numpy()):
            k = s.index(SEP)
            w = s[1:k]
            assert s == (SOS, *w, SEP, *_transform(task, w))
            assert len(s) in (sz.train_lengths if name != "test" else sz.test_lengths)
            want = _oracle(task, s, G.vocabulary(8))
            got = [None if c < 0 else tuple(part.output_alphabet)[c] for c in row[1:len(s) + 1]]
            assert got == list(want) and (row[:k + 1] == -1).all()
    net = compile_model(m, p.model)
    module = build(net, p.model, "compiled")
    for part in data.values():
        z = evaluation.logits_of(module, part)
        assert evaluation.metric_value(p, part, z) == 1.0
        assert evaluation.metric_value(p, part, z, name="fine") == 1.0


@pytest.mark.parametrize("task", ["svo_sov", "gender_conjugation"])
def test_itg_tasks_run_the_same_protocol_exactly(task):
    p = replace(protocol("grefenstette2015", "sequence_reversal"), task=task)
    sz = with_size(p, "small", **{**TINY, "train_lengths": (8, 10, 12),
                                  "test_lengths": (14, 18)}).size("small")
    m = machine_of(p, sz)
    data = datasets(p, sz, 0, m)
    module = build(compile_model(m, p.model), p.model, "compiled")
    for part in data.values():
        assert set(part.lengths.tolist()) <= set(sz.train_lengths + sz.test_lengths)
        assert evaluation.metric_value(p, part, evaluation.logits_of(module, part)) == 1.0


def test_protocol_data_bad_input_is_typed():
    p = protocol("grefenstette2015", "sequence_reversal")
    sz = with_size(p, "small", **TINY).size("small")
    with pytest.raises(AutomatonError, match="joint inputs"):
        datasets(p, sz, 0, G.protocol_machine("sequence_reversal", 4))     # the data has 8
    with pytest.raises(InputError, match="even lengths"):
        datasets(p, replace(sz, train_lengths=(5,)), 0)
    with pytest.raises(InputError, match="no protocol-form"):
        machine_of(replace(p, task="parity"), sz)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_coarse_and_fine_are_section_4_3s(B, seed):
    """Random logits on pair data: coarse = share of sequences whose target side (with </s>) is
    all right; fine = mean share right before the first error (§4.3), by brute force."""
    rng = np.random.default_rng(seed)
    p = protocol("grefenstette2015", "sequence_reversal")
    sz = with_size(p, "small", n_train=B, n_valid=1, n_test_per_length=1,
                   train_lengths=(2, 4, 6, 8), test_lengths=(4,)).size("small")
    part = datasets(p, sz, seed, machine_of(p, sz))["train"]
    tgt = part.targets.numpy()
    logits = torch.as_tensor(rng.normal(size=tgt.shape + (part.num_outputs + 1,)))
    for b, t in zip(*np.nonzero((rng.random(tgt.shape) < 0.8) & (tgt >= 0))):
        logits[b, t, int(tgt[b, t])] = 10.0
    pred = logits.numpy().argmax(-1)
    coarse, fine = [], []
    for b in range(len(tgt)):
        side = [pred[b, t] == tgt[b, t] for t in range(tgt.shape[1]) if tgt[b, t] >= 0]
        coarse.append(all(side))
        first = side.index(False) if False in side else len(side)
        fine.append(first / len(side))
    assert evaluation.metric_value(p, part, logits) == pytest.approx(np.mean(coarse))
    assert evaluation.metric_value(p, part, logits, name="fine") == pytest.approx(np.mean(fine))


def test_tiny_run_compiled_is_exact_before_training_random_runs():
    rec = run_experiment("grefenstette2015", "sequence_reversal", init="compiled", seed=0,
                         overrides=TINY)
    assert rec["final"]["test_before"] == rec["final"]["valid_before"] == 1.0
    assert rec["config"]["target"] == "symbol"
    rnd = run_experiment("grefenstette2015", "sequence_reversal", init="random", seed=0,
                         overrides=TINY)
    assert [row["epoch"] for row in rnd["curve"]] == [0, 1]
    assert np.isfinite(rnd["curve"][1]["loss"]) and rnd["final"]["test_before"] < 1.0


# --- the §4.2 ITG tasks --------------------------------------------------------------------------
# the grammars as §4.2's prose describes them (word classes; see svo_sov_grammar / gender_grammar)
_ITG = {
    "svo_sov": {"A": [("s", "v", "O")], "O": [("o", "O"), ("o",), ("s", "rp", "s", "v", "O")]},
    "gender_conjugation": {"A": [("NP", "V", "NP"), ("NP", "V")],
                           "NP": [("D", "N"), ("D", "N", "and", "NP")]},
}


def _language(task: str, max_len: int) -> set:
    """Every class string of the grammar up to `max_len` (leftmost expansion, no ε-rules)."""
    rules, out, todo = _ITG[task], set(), [("A",)]
    while todo:
        form = todo.pop()
        i = next((k for k, x in enumerate(form) if x in rules), None)
        if i is None:
            out.add(form)
            continue
        for body in rules[form[i]]:
            new = form[:i] + body + form[i + 1:]
            if len(new) <= max_len:
                todo.append(new)
    return out


def _word_class(task: str, word: str) -> str:
    if task == "svo_sov":
        return "rp" if word == "rpi" else word[0]
    return {"the": "D", "a": "D", "and": "and"}.get(word, "V" if word.startswith("we") else "N")


def _itg_target(task: str, w: tuple) -> tuple:
    """§4.2: SVO → SOV moves the main verb (the second word) behind the rest, each word's i → o;
    genderless → gendered translates word for word, the article by its noun's gender (the →
    der / die / das, a → ein / eine / ein), and → und, we{j} → wg{j}, e{g}{j} → g{g}{j}."""
    if task == "svo_sov":
        tr = ["rpo" if x == "rpi" else x[0] + "o" + x[2:] for x in w]
        return (tr[0], *tr[2:], tr[1])
    out = []
    for i, x in enumerate(w):
        if x in ("the", "a"):
            g = w[i + 1][1]
            out.append({"the": {"m": "der", "f": "die", "n": "das"},
                        "a": {"m": "ein", "f": "eine", "n": "ein"}}[x][g])
        else:
            out.append("und" if x == "and" else ("wg" + x[2:] if x.startswith("we")
                                                 else "g" + x[1:]))
    return tuple(out)


@pytest.mark.parametrize("task,vocab_size,max_len", [("svo_sov", 6, 7),
                                                     ("gender_conjugation", 8, 7)])
def test_itg_protocol_machines_match_the_grammar_and_section_4_2(task, vocab_size, max_len):
    """Every source up to `max_len` words (2 words per class): |||-after-the-source is defined
    exactly for the grammar's sentences, and on ``<s> w ||| t`` the machine emits t ``</s>``, t
    the §4.2 translation."""
    m = G.protocol_machine(task, vocab_size)
    src, tgt = (G.svo_sov_alphabets if task == "svo_sov" else G.gender_alphabets)(vocab_size)
    assert tuple(m.alphabet) == (SOS, SEP) + src + tgt
    assert tuple(m.output_alphabet) == tgt + (EOS,)
    language = _language(task, max_len)
    sentences = 0
    start = m.step(m.initial(), SOS)

    def go(config, w):
        nonlocal sentences
        after = m.step(config, SEP)
        in_language = tuple(_word_class(task, x) for x in w) in language
        assert (after.state is not None) == in_language, w
        if in_language:
            sentences += 1
            x, want = G.protocol_form(task, w, vocab_size)
            assert x == (SOS, *w, SEP, *_itg_target(task, w))
            assert apply(m, x) == want == (None,) * (len(w) + 1) + x[len(w) + 2:] + (EOS,)
        if len(w) < max_len:
            for a in src:
                c = m.step(config, a)
                if c.state is not None:
                    go(c, w + (a,))

    go(start, ())
    n_words = {"svo_sov": {"s": 2, "v": 2, "o": 2, "rp": 1},
               "gender_conjugation": {"D": 2, "N": 6, "V": 2, "and": 1}}[task]
    assert sentences == sum(int(np.prod([n_words[c] for c in cls])) for cls in language)


@pytest.mark.parametrize("task", ["svo_sov", "gender_conjugation"])
def test_itg_protocol_machines_compile_and_verify(task):
    m = G.protocol_machine(task)
    net = pn.compile(m, target="stack_rnn", model="grefenstette_lstm")
    pairs = (G.svo_sov_pairs if task == "svo_sov" else G.gender_pairs)(
        20, range(3, 40), np.random.default_rng(1))
    strings = [G.protocol_form(task, w)[0] for w, _ in pairs]
    rep = pn.verify(m, net, strings=strings, max_length=4, samples=20, sample_lengths=(5, 30),
                    long_samples=0, overlap=False)
    assert rep.ok, rep
