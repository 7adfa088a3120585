"""The sequence-to-sequence tasks of Delétang et al. (2023) and Marked Copy as a transduction:
machine against the independent reference on every string up to length 8, the paper's examples,
samplers, typed errors, and the compiled stack-RNN networks verified."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.pdt import DPDT
from pdanet.automata.store import StoreTransducer
from pdanet.automata.tasks import deletang2023 as D
from pdanet.automata.tasks import registry as T
from pdanet.automata.tasks.task import apply
from pdanet.errors import InputError

NAMES = ("reverse_string", "duplicate_string", "odds_first", "marked_copy")
# task -> (factory, reference, sampler, output length per input symbol, marker)
PARTS = {
    "reverse_string": (D.reverse_string_machine, D.reverse_string_reference,
                       D.reverse_string_sampler, 1, False),
    "duplicate_string": (D.duplicate_string_machine, D.duplicate_string_reference,
                         D.duplicate_string_sampler, 2, False),
    "odds_first": (D.odds_first_machine, D.odds_first_reference, D.odds_first_sampler, 1, False),
    "marked_copy": (D.marked_copy_machine, D.marked_copy_reference, D.marked_copy_sampler, 1,
                    True),
}


def all_strings(alphabet, max_length: int):
    for n in range(max_length + 1):
        yield from itertools.product(alphabet, repeat=n)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("alphabet, max_length", [(("0", "1"), 8), (("a", "b", "c"), 6)])
def test_machine_equals_reference_on_every_short_string(name, alphabet, max_length):
    make, ref, _, ratio, marked = PARTS[name]
    m = make(alphabet=alphabet)
    in_domain = 0
    for s in all_strings(tuple(m.alphabet), max_length):
        want = ref(s, alphabet=alphabet)
        assert apply(m, s) == want, s
        in_domain += want is not None
    # one member per w whose delayed form fits: sum over k of |Σ|^k
    step = ratio + 1
    fits = [k for k in range(max_length + 1) if step * k + marked <= max_length]
    assert in_domain == sum(len(alphabet) ** k for k in fits)


@pytest.mark.parametrize("name", NAMES)
def test_registry_entries(name):
    t = T.task(name)
    assert t.kind == "transduce" and "Delétang" in t.paper
    m = T.get(name)
    assert isinstance(m, DPDT if name == "reverse_string" else StoreTransducer)
    if isinstance(m, StoreTransducer):
        assert m.store == "queue" and m.is_realtime
    else:
        assert m.is_realtime
    ref = T.reference(name)
    for s in T.sample(name, 20, [1, 3, 5, 9, 13] if name == "marked_copy" else [0, 6, 12], 3):
        assert ref(s) is not None and apply(m, s) == ref(s)


def test_the_papers_examples():
    def out(ref, w, k, **kw):
        s = tuple(w) + ("#",) * k
        return "".join(ref(s, **kw)[len(w):])

    assert out(D.reverse_string_reference, "0111", 4) == "1110"
    assert out(D.duplicate_string_reference, "101", 6) == "101101"
    assert out(D.duplicate_string_reference, "111111", 12) == "111111111111"
    assert out(D.odds_first_reference, "00110101", 8) == "01000111"
    assert out(D.odds_first_reference, "110", 3) == "101"
    s = tuple("011#___")
    assert D.marked_copy_reference(s) == tuple("____011")
    assert "".join(s[:4]) + "".join(D.marked_copy_reference(s)[4:]) == "011#011"
    assert D.marked_copy_reference(tuple("#")) == ("_",)
    # outside the domain
    for ref, s in [(D.reverse_string_reference, "01#"), (D.duplicate_string_reference, "01##"),
                   (D.odds_first_reference, "0#1#"), (D.marked_copy_reference, "01__"),
                   (D.marked_copy_reference, "0#_#"), (D.reverse_string_reference, "02##")]:
        assert ref(tuple(s)) is None


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.lists(st.sampled_from("01"), max_size=25),
       st.integers(-2, 2))
def test_long_strings_and_near_misses(name, w, shift):
    """w followed by the right number of blanks (shift = 0) or a few too many or too few."""
    make, ref, _, ratio, marked = PARTS[name]
    blank = D.COPY_BLANK if marked else "#"
    k = max(ratio * len(w) + shift, 0)
    s = tuple(w) + ((D.COPY_MARK,) if marked else ()) + (blank,) * k
    want = ref(s)
    assert (want is not None) == (shift == 0 or k == ratio * len(w))
    assert apply(make(), s) == want


def test_samplers_draw_valid_strings_of_the_requested_lengths():
    rng = np.random.default_rng(7)
    for name, lengths in [("reverse_string", [0, 2, 10]), ("duplicate_string", [0, 3, 12]),
                          ("odds_first", [2, 4, 14]), ("marked_copy", [1, 3, 15])]:
        _, ref, sample, _, _ = PARTS[name]
        strings = sample(30, lengths, rng)
        assert {len(s) for s in strings} <= set(lengths) and len(strings) == 30
        assert all(ref(s) is not None for s in strings)
        assert len({s for s in strings if len(s) == max(lengths)}) > 1  # w is drawn at random
    assert D.odds_first_sampler(5, 6, 0, alphabet="abc")[0][3:] == ("#",) * 3


def test_bad_input_raises_typed_errors():
    with pytest.raises(InputError, match="even|≡ 0"):
        D.reverse_string_sampler(1, 3)
    with pytest.raises(InputError, match="mod 3"):
        D.duplicate_string_sampler(1, 4)
    with pytest.raises(InputError, match="≡ 1"):
        D.marked_copy_sampler(1, 4)
    with pytest.raises(InputError, match="reserved"):
        D.odds_first_machine(alphabet="01#")
    with pytest.raises(InputError, match="reserved"):
        D.duplicate_string_reference(("0",), alphabet="0#")
    with pytest.raises(InputError, match="differ"):
        D.marked_copy_machine(marker="#", blank="#")
    with pytest.raises(InputError, match="at least one"):
        D.reverse_string_machine(alphabet=())
    with pytest.raises(InputError):
        D.marked_copy_sampler(2, [3], 0, marker="0")
    m = D.duplicate_string_machine()
    with pytest.raises(InputError, match="blocks"):
        m.transduce("01#####")  # one blank too many
    with pytest.raises(InputError, match="accepting"):
        m.transduce("01###")  # one blank short
    assert m.transduce("01####") == tuple("##0101")


@pytest.mark.parametrize("name, max_length", [("reverse_string", 8), ("duplicate_string", 9),
                                              ("odds_first", 8), ("marked_copy", 9)])
def test_compiles_to_stack_rnn_and_verifies(name, max_length):
    pytest.importorskip("torch")
    import pdanet as pn

    m = T.get(name)
    net = pn.compile(m, target="stack_rnn")
    report = pn.verify(m, net, max_length=max_length, samples=20, long_samples=0)
    assert report.ok, report


# --- Grefenstette et al. (2015) §4: <s> source ||| target </s>, coarse and fine accuracy --------
GREF = {  # §4.1, written from the paper's text
    "sequence_copy": lambda w: tuple(w),
    "sequence_reversal": lambda w: tuple(w[::-1]),
    "bigram_flip": lambda w: tuple(x for i in range(0, len(w), 2) for x in (w[i + 1], w[i])),
}


@pytest.mark.parametrize("name", sorted(GREF))
def test_grefenstette_pair_reference_on_every_source_up_to_8(name):
    ref = T.task(name).pair_reference
    vocab = ("s0", "s1")
    for L in range(9):
        for w in itertools.product(vocab, repeat=L):
            want = None if name == "bigram_flip" and L % 2 else GREF[name](w)
            assert ref(w, vocab_size=2) == want, w
    assert ref(("s0", "s2"), vocab_size=2) is None
    assert T.task(name).pair_alphabets() == (tuple(f"s{i}" for i in range(128)),) * 2


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(GREF)), st.integers(0, 10**6), st.integers(1, 5))
def test_grefenstette_protocol_sequences(name, seed, vocab):
    pytest.importorskip("torch")
    from pdanet.learning.data import dataset

    d = dataset(name, 6, [2, 4, 6], seed=seed, protocol="grefenstette", vocab_size=vocab)
    out = list(d.output_alphabet)
    assert out[-1] == "</s>" and d.kind == "symbol" and d.num_outputs == vocab + 1
    for (ids, tg), joint in zip(d, d.strings()):
        assert joint[0] == "<s>" and joint.count("|||") == 1
        cut = joint.index("|||")
        src, tgt = joint[1:cut], joint[cut + 1:]
        assert len(src) in (2, 4, 6) and tgt == GREF[name](src)
        tg = tg.tolist()
        assert tg[:cut + 1] == [-1] * (cut + 1)             # the source side is not scored
        assert [out[i] for i in tg[cut + 1:len(joint) + 1]] == list(tgt) + ["</s>"]
        assert tg[len(joint) + 1:] == [-1] * (len(tg) - len(joint) - 1)


def _coarse_fine_oracle(z, tg):
    """The paper's formulas, one sequence at a time: the greedy prediction at each target
    position until the first error."""
    coarse, fine = 0, 0.0
    for b in range(tg.shape[0]):
        pos = [t for t in range(tg.shape[1]) if tg[b, t] >= 0]
        n = 0
        for t in pos:
            if int(np.argmax(z[b, t])) != tg[b, t]:
                break
            n += 1
        coarse += n == len(pos)
        fine += n / len(pos)
    return coarse / tg.shape[0], fine / tg.shape[0]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.floats(0.0, 0.5))
def test_coarse_and_fine_accuracy_against_the_papers_formulas(seed, noise):
    pytest.importorskip("torch")
    from pdanet.learning import metrics
    from pdanet.learning.data import dataset

    d = dataset("sequence_reversal", 8, range(1, 6), seed=seed, protocol="grefenstette",
                vocab_size=3)
    tg = d.targets.numpy()
    rng = np.random.default_rng(seed)
    z = rng.normal(size=tg.shape + (d.num_outputs,))
    perfect = np.zeros_like(z)
    np.put_along_axis(perfect, np.maximum(tg, 0)[..., None], 5.0, axis=-1)
    z = np.where(rng.random(tg.shape)[..., None] < noise, z, perfect)
    coarse, fine = _coarse_fine_oracle(z, tg)
    assert metrics.coarse_accuracy(z, tg) == pytest.approx(coarse)
    assert metrics.fine_accuracy(z, tg) == pytest.approx(fine)
    assert metrics.coarse_accuracy(perfect, tg) == metrics.fine_accuracy(perfect, tg) == 1.0


def test_fine_accuracy_by_hand_and_bad_inputs():
    pytest.importorskip("torch")
    from pdanet.learning import metrics
    from pdanet.learning.data import dataset, pair_dataset

    tg = np.array([[-1, -1, 0, 1, 2], [-1, -1, 1, 1, 2]])  # two targets of 3 (</s> included)
    z = np.zeros(tg.shape + (3,))
    z[0, 2, 0] = z[0, 3, 2] = z[0, 4, 2] = 1.0             # right, wrong, right: 1 of 3
    z[1, 2, 1] = z[1, 3, 1] = z[1, 4, 2] = 1.0             # all right
    assert metrics.fine_accuracy(z, tg) == pytest.approx((1 / 3 + 1) / 2)
    assert metrics.coarse_accuracy(z, tg) == 0.5
    with pytest.raises(InputError, match="no scored position"):
        metrics.coarse_accuracy(z, np.full(tg.shape, -1))
    d = dataset("sequence_copy", 2, 8, seed=0, protocol="grefenstette")   # V = 128 by default
    assert len(d.alphabet) == 130 and d.num_outputs == 129
    with pytest.raises(InputError, match="protocol must be"):
        dataset("sequence_copy", 2, 4, protocol="seq2seq")
    with pytest.raises(InputError, match="no \\(source, target\\) pairs"):
        dataset("reversal", 2, 4, protocol="grefenstette")
    with pytest.raises(InputError, match="task name"):
        dataset(T.get("reversal"), 2, 4, protocol="grefenstette")
    with pytest.raises(InputError, match="symbol targets"):
        dataset("sequence_copy", 2, 4, protocol="grefenstette", target="accept")
    with pytest.raises(InputError, match="even lengths"):
        dataset("bigram_flip", 2, 3, protocol="grefenstette")
    with pytest.raises(InputError, match="outside the task's"):
        pair_dataset(T.get("reversal"), [(("a",), ("c",))], "ab", "ab")
    with pytest.raises(InputError, match="protocol symbol"):
        pair_dataset(T.get("reversal"), [(("a",), ("a",))], ("a", "|||"), "a")
    with pytest.raises(InputError, match="no \\(source"):
        pair_dataset(T.get("reversal"), [], "ab", "ab")


# --- Grefenstette et al. (2015) §4.2: the ITG tasks, against their synchronous grammars --------
def _synchronous(rules: dict, start: str, maxlen: int) -> set[tuple]:
    """Every (source, target) pair of a synchronous grammar with sources of ≤ maxlen symbols.
    ``rules[X]`` lists (source body, target order): the target of X → Y1 … Yk lists the
    children's targets in ``order`` (ITG: straight = identity, inverted = reversed); a terminal
    is a (source word, target word) pair."""
    pairs: dict = {x: set() for x in rules}
    changed = True
    while changed:
        changed = False
        for lhs, bodies in rules.items():
            for body, order in bodies:
                combos: set = {((), ())}
                for sym in body:
                    opts = pairs[sym] if sym in pairs else {((sym[0],), (sym[1],))}
                    combos = {(s + a, t + (b,)) for s, t in combos for a, b in opts
                              if len(s) + len(a) <= maxlen}
                new = {(s, tuple(x for i in order for x in t[i])) for s, t in combos}
                new -= pairs[lhs]
                if new:
                    pairs[lhs] |= new
                    changed = True
    return pairs[start]


def _svo_itg(n: int) -> dict:
    """§4.2 SVO → SOV as an ITG: A → [Ws VP], VP → ⟨Wv O⟩ (inverted: the verb goes last),
    objects and relative clauses straight (the sample pair keeps "so19 vo16 oo10 oo24" in
    order); W_c → (ci_j, co_j)."""
    rules = {f"W{c}": [(((f"{c}i{j}", f"{c}o{j}"),), (0,)) for j in range(1, n + 1)]
             for c in "svo"}
    rules.update({
        "A": [(("Ws", "VP"), (0, 1))],
        "VP": [(("Wv", "O"), (1, 0))],
        "O": [(("Wo", "O"), (0, 1)), (("Wo",), (0,)),
              (("Ws", ("rpi", "rpo"), "Ws", "Wv", "O"), (0, 1, 2, 3, 4))],
    })
    return rules


_ART = {("the", "m"): "der", ("the", "f"): "die", ("the", "n"): "das",
        ("a", "m"): "ein", ("a", "f"): "eine", ("a", "n"): "ein"}


def _gender_itg(n: int) -> dict:
    """§4.2 genderless → gendered: A → NP V NP | NP V; NP → DN | DN and NP; a determiner–noun
    pair DN_g translates its article by the gender g of its noun."""
    rules = {
        "A": [(("NP", "V", "NP"), (0, 1, 2)), (("NP", "V"), (0, 1))],
        "NP": [(("DN",), (0,)), (("DN", ("and", "und"), "NP"), (0, 1, 2))],
        "V": [(((f"we{j}", f"wg{j}"),), (0,)) for j in range(1, n + 1)],
        "DN": [(((d, _ART[(d, g)]), (f"e{g}{j}", f"g{g}{j}")), (0, 1))
               for d in ("the", "a") for g in "mfn" for j in range(1, n + 1)],
    }
    return rules


ITG = {"svo_sov": (_svo_itg, 3), "gender_conjugation": (_gender_itg, 4)}


@pytest.mark.parametrize("name", sorted(ITG))
def test_itg_tasks_against_their_synchronous_grammars_up_to_8(name):
    make, classes = ITG[name]
    for per in (1, 2):
        vocab = classes * per
        pairs = _synchronous(make(per), "A", 8)
        assert pairs and all(len(s) == len(t) for s, t in pairs)
        src, _ = T.task(name).pair_alphabets(vocab_size=vocab)
        target = T.task(name).pair_reference
        by_source = dict(pairs)
        assert len(by_source) == len(pairs)           # one target per source: a function
        m = T.get(name, vocab_size=vocab)
        ref = T.reference(name, vocab_size=vocab)
        max_all = {(1, 3): 8, (1, 4): 6}.get((per, classes), 4)  # every string over the words
        for L in range(max_all + 1):
            for w in itertools.product(src, repeat=L):
                want = by_source.get(w)
                assert target(w, vocab_size=vocab) == want, w
                if L <= max_all - 2 or want is not None:
                    out = None if want is None else ("#",) + want
                    assert ref(w + ("#",)) == out, w
                    assert apply(m, w + ("#",)) == out, w
        for s, t in pairs:                             # the longer members of the grammar
            assert target(s, vocab_size=vocab) == t
            assert apply(m, s + ("#",)) == ("#",) + t


def test_itg_tasks_reproduce_the_papers_sample_pairs():
    from pdanet.automata.tasks import grefenstette2015 as G

    svo = ["si1", "vi28", "oi5", "oi7", "si15", "rpi", "si19", "vi16", "oi10", "oi24"]
    sov = ["so1", "oo5", "oo7", "so15", "rpo", "so19", "vo16", "oo10", "oo24", "vo28"]
    assert G.svo_sov_target(svo, vocab_size=128) == tuple(sov)
    # the gender sample is the V NP part of a sentence: give it a subject
    src = ["the", "em3", "we11", "the", "en19", "and", "the", "em17"]
    want = ("wg11", "das", "gn19", "und", "der", "gm17")
    assert G.gender_target(src, vocab_size=128)[2:] == want
    assert G.gender_target(src[2:], vocab_size=128) is None


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(ITG)), st.integers(0, 10**6))
def test_itg_samplers_and_protocol(name, seed):
    pytest.importorskip("torch")
    from pdanet.learning.data import dataset

    rng = np.random.default_rng(seed)
    task = T.task(name)
    for s, t in task.pair_sampler(5, range(3, 30), rng):
        assert task.pair_reference(s) == t and len(s) in range(3, 30)
    m = T.get(name)
    for w in T.sample(name, 5, range(4, 30), rng):
        assert apply(m, w) == T.reference(name)(w) is not None
    d = dataset(name, 4, range(8, 20), seed=seed, protocol="grefenstette")
    out = list(d.output_alphabet)
    for (ids, tg), joint in zip(d, d.strings()):
        cut = joint.index("|||")
        assert task.pair_reference(joint[1:cut]) == joint[cut + 1:]
        assert [out[i] for i in tg.tolist() if i >= 0] == list(joint[cut + 1:]) + ["</s>"]


def test_itg_bad_inputs():
    for name in sorted(ITG):
        task = T.task(name)
        with pytest.raises(InputError, match="vocab_size"):
            T.get(name, vocab_size=0)
        with pytest.raises(InputError, match="no source"):
            task.pair_sampler(3, [0, 1, 2], 0)
        with pytest.raises(InputError, match="non-negative"):
            task.pair_sampler(3, [-1], 0)
    with pytest.raises(InputError, match="no source"):
        T.task("gender_conjugation").pair_sampler(2, [4, 7, 10], 0)   # lengths ≡ 1 mod 3
    assert T.task("gender_conjugation").pair_sampler(2, [4, 5], 0)[0][0].__len__() == 5
