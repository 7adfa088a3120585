"""Tasks of Grefenstette et al. (2015), Learning to Transduce with Unbounded Memory, §4.1:
sequence copying, sequence reversal and bigram flipping over a vocabulary s0 … s{V-1}, in the
delayed-output form w #^|w| (Hao et al. 2018 §2.3; bigram flipping also in a streaming form).

The paper's own protocol (§4) presents each (source, target) pair as ``<s> source ||| target
</s>``: the ``*_pairs`` samplers draw the pairs (sources uniform over the vocabulary, source
lengths uniform over `lengths` — the paper's are `TRAIN_LENGTHS` for training and
`TEST_LENGTHS` for testing — with a vocabulary of 128 symbols, ``vocab_size=128``, the
default), and `pdanet.learning.data.dataset(name, …, protocol="grefenstette")` builds the
sequences. `protocol_machine` is the real-time transducer of that form for copying, reversal,
bigram flipping (a queue, a stack, a queue) and the two ITG tasks (a queue): it reads ``<s> source ||| target`` and
emits the next target symbol after ``|||`` and after each target symbol, ``</s>`` last — the
targets of the paper's protocol — and compiles to the paper's models (``grefenstette_lstm``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from pdanet.automata import store as store_machines
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.dfa import DFA
from pdanet.automata.grammar import PCFG
from pdanet.automata.store import StoreTransducer
from pdanet.automata.tasks.hao2018 import delayed_output, reversal_machine, reversal_sampler
from pdanet.automata.tasks.sampling import _table, check_rng, draw_lengths, vocabulary
from pdanet.automata.tasks.task import BLANK
from pdanet.errors import InputError


def sequence_copy_machine(vocab_size: int = 128, max_length: int | None = None,
                          store: str | None = None):
    """Grefenstette et al. (2015) §4.1 "Sequence Copying", in delayed-output form:
    w #^|w| -> #^|w| w. Copying needs a queue, which no pushdown machine has: with ``store``
    ("queue" or "deque") the machine is the store transducer `pdanet.automata.store.sequence_copy`;
    with `max_length` (and no ``store``) it is a Mealy DFA whose states hold the bounded queue
    (Σ_{i ≤ max_length} |V|^i states — small vocabularies only). With neither, the queue
    transducer (``store="queue"``), so ``get("sequence_copy")`` is always a machine."""
    if store is None and max_length is None:
        store = "queue"
    if store is not None:
        return store_machines.sequence_copy(int(vocab_size), store)
    if max_length is None:
        return None
    vocab = vocabulary(vocab_size)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0:
        raise InputError(f"max_length must be a non-negative integer, got {max_length!r}")
    if len(vocab) ** max_length > 100_000:
        raise InputError(f"a copy machine for |V| = {len(vocab)}, max_length = {max_length} has "
                         "too many states; lower them")
    queues = [()]
    frontier = [()]
    for _ in range(max_length):
        frontier = [q + (x,) for q in frontier for x in vocab]
        queues.extend(frontier)
    states = [("read", q) for q in queues] + [("write", q) for q in queues]
    trans, outs = {}, {}
    for q in queues:
        if len(q) < max_length:
            for x in vocab:
                trans[(("read", q), x)] = ("read", q + (x,))
                outs[(("read", q), x)] = BLANK
        if q:
            for phase in ("read", "write"):
                trans[((phase, q), BLANK)] = ("write", q[1:])
                outs[((phase, q), BLANK)] = q[0]
    return DFA(states, vocab + (BLANK,), trans, ("read", ()),
               accepting=(("read", ()), ("write", ())), outputs=outs,
               output_alphabet=vocab + (BLANK,), name="sequence_copy")


TRAIN_LENGTHS = range(8, 65)   # §4.1: source lengths unif{8, 64} for training
TEST_LENGTHS = range(65, 129)  # §4.3: unif{65, 128} for testing


def _flip(w: tuple) -> tuple:
    return tuple(w[i ^ 1] for i in range(len(w)))


_TRANSFORMS: dict[str, Callable[[tuple], tuple]] = {
    "sequence_copy": lambda w: w,
    "sequence_reversal": lambda w: tuple(reversed(w)),
    "bigram_flip": _flip,
}


def pair_alphabets(vocab_size: int = 128, **_machine_params) -> tuple[tuple, tuple]:
    """The source and target vocabularies of the §4.1 tasks: both s0 … s{V-1} (the paper: "a
    vocabulary of 128 meaningless symbols")."""
    vocab = vocabulary(vocab_size)
    return vocab, vocab


def _pairs(name: str, n: int, lengths, rng, vocab_size: int) -> list[tuple[tuple, tuple]]:
    rng = check_rng(rng)
    vocab = vocabulary(vocab_size)
    ls = draw_lengths(n, lengths, rng)
    if name == "bigram_flip" and any(L % 2 for L in ls):
        raise InputError("bigram flipping restricts sources to even lengths (§4.1); "
                         f"{sorted({L for L in ls if L % 2})} are odd")
    out = []
    for L in ls:
        w = tuple(vocab[i] for i in rng.integers(0, len(vocab), size=L))
        out.append((w, _TRANSFORMS[name](w)))
    return out


def _pair_reference(name: str, source, vocab_size: int):
    vocab = set(vocabulary(vocab_size))
    w = tuple(source)
    if any(x not in vocab for x in w) or (name == "bigram_flip" and len(w) % 2):
        return None
    return _TRANSFORMS[name](w)


def sequence_copy_pairs(n: int, lengths=TRAIN_LENGTHS, rng=None, vocab_size: int = 128,
                        max_length: int | None = None, store: str | None = None) -> list:
    """§4.1 Sequence Copying: n pairs (w, w), w uniform over the vocabulary, |w| from `lengths`."""
    return _pairs("sequence_copy", n, lengths, rng, vocab_size)


def sequence_copy_target(source, vocab_size: int = 128, **_machine_params):
    """The copy of `source` (None when a symbol is outside the vocabulary)."""
    return _pair_reference("sequence_copy", source, vocab_size)


def sequence_reversal_pairs(n: int, lengths=TRAIN_LENGTHS, rng=None, vocab_size: int = 128,
                            store: str | None = None) -> list:
    """§4.1 Sequence Reversal: n pairs (w, w^R)."""
    return _pairs("sequence_reversal", n, lengths, rng, vocab_size)


def sequence_reversal_target(source, vocab_size: int = 128, **_machine_params):
    """The reversal of `source` (None when a symbol is outside the vocabulary)."""
    return _pair_reference("sequence_reversal", source, vocab_size)


def bigram_flip_pairs(n: int, lengths=TRAIN_LENGTHS, rng=None, vocab_size: int = 128,
                      store: str | None = None) -> list:
    """§4.1 Bigram flipping: n pairs (a1 a2 … ak, a2 a1 a4 a3 … ak ak-1), sources of even
    length only (InputError for an odd length)."""
    return _pairs("bigram_flip", n, lengths, rng, vocab_size)


def bigram_flip_target(source, vocab_size: int = 128, **_machine_params):
    """`source` with each pair (a_{2i-1}, a_{2i}) swapped (None for odd lengths or symbols
    outside the vocabulary)."""
    return _pair_reference("bigram_flip", source, vocab_size)


def _delayed_reference(string: Sequence, vocab_size: int, f: Callable[[tuple], tuple]):
    return delayed_output(string, set(vocabulary(vocab_size)), BLANK, f)


def sequence_copy_reference(string: Sequence, vocab_size: int = 128, max_length: int | None = None,
                            store: str | None = None):
    if max_length is not None and len(tuple(string)) > 2 * max_length:
        return None
    return _delayed_reference(string, vocab_size, lambda w: w)


def delayed_sampler(n, lengths, rng=None, vocab_size: int = 128, max_length: int | None = None,
                     store: str | None = None):
    """w #^|w| with w uniform over the vocabulary (lengths are total lengths, even)."""
    return reversal_sampler(n, lengths, rng, alphabet=vocabulary(vocab_size))




def sequence_reversal_machine(vocab_size: int = 128, store: str | None = None):
    """Grefenstette et al. (2015) §4.1 "Sequence Reversal", in delayed-output form
    w #^|w| -> #^|w| w^R: the reversal DPDT over the vocabulary s0 … s{V-1}; with ``store``
    ("stack" or "deque") the store transducer `pdanet.automata.store.sequence_reversal`."""
    if store is not None:
        return store_machines.sequence_reversal(int(vocab_size), store)
    return reversal_machine(vocabulary(vocab_size), name="sequence_reversal")




def sequence_reversal_reference(string: Sequence, vocab_size: int = 128,
                                store: str | None = None):
    return _delayed_reference(string, vocab_size, lambda w: tuple(reversed(w)))


def bigram_flip_machine(vocab_size: int = 128, store: str | None = None):
    """Grefenstette et al. (2015) §4.1 "Bigram flipping", in streaming form: w # -> # flip(w) for
    even |w|, where flip swaps the symbols at positions 2i-1 and 2i. Finite-state with a delay of
    one step: a Mealy DFA holding one pending symbol (2|V| + 2 states). In the delayed form
    w #^|w| -> #^|w| flip(w) the task needs a queue: ``store="queue"`` gives that form as the
    store transducer `pdanet.automata.store.bigram_flip` (sampler and reference follow)."""
    if store is not None:
        if store != "queue":
            raise InputError(f"bigram flip in delayed form needs a queue, not a {store!r}")
        return store_machines.bigram_flip(int(vocab_size))
    vocab = vocabulary(vocab_size)
    states = ["start", "done"] + [("hold", x) for x in vocab] + [("owe", x) for x in vocab]
    trans, outs = {}, {}
    trans[("start", BLANK)], outs[("start", BLANK)] = "done", BLANK
    for x in vocab:
        trans[("start", x)], outs[("start", x)] = ("hold", x), BLANK
        for y in vocab:
            trans[(("hold", x), y)], outs[(("hold", x), y)] = ("owe", x), y
            trans[(("owe", x), y)], outs[(("owe", x), y)] = ("hold", y), x
        trans[(("owe", x), BLANK)], outs[(("owe", x), BLANK)] = "done", x
    return DFA(states, vocab + (BLANK,), trans, "start", accepting=("done",), outputs=outs,
               output_alphabet=vocab + (BLANK,), name="bigram_flip")


def bigram_flip_reference(string: Sequence, vocab_size: int = 128, store: str | None = None):
    if store is not None:  # delayed form w #^|w| with |w| even
        s = tuple(string)
        if len(s) % 4:
            return None
        return _delayed_reference(s, vocab_size, _flip)
    vocab = set(vocabulary(vocab_size))
    s = tuple(string)
    if not s or s[-1] != BLANK:
        return None
    w = s[:-1]
    if len(w) % 2 or any(x not in vocab for x in w):
        return None
    flipped: list = []
    for i in range(0, len(w), 2):
        flipped += [w[i + 1], w[i]]
    return (BLANK,) + tuple(flipped)


def bigram_flip_sampler(n, lengths, rng=None, vocab_size: int = 128, store: str | None = None):
    """w # with w uniform over the vocabulary; `lengths` are total lengths (odd: |w| even). With
    ``store``: the delayed form w #^|w| (total lengths divisible by 4)."""
    rng = check_rng(rng)
    if store is not None:
        ls = draw_lengths(n, lengths, rng)
        if any(L % 4 for L in ls):
            raise InputError("strings w #^|w| with |w| even have lengths divisible by 4")
        return [s for L in ls for s in reversal_sampler(1, L, rng, alphabet=vocabulary(vocab_size))]
    vocab = vocabulary(vocab_size)
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L % 2 == 0:
            raise InputError(f"strings w # with |w| even have odd length; {L} is even")
        out.append(tuple(vocab[i] for i in rng.integers(0, len(vocab), size=L - 1)) + (BLANK,))
    return out


# --- §4: the paper's protocol form <s> source ||| target </s> --------------------------------
SOS, SEPARATOR, EOS = "<s>", "|||", "</s>"  # §4's start, separator and end symbols

#: the store of each task's protocol transducer (§5, Fig. 2a: the Queue-LSTM solves copying, the
#: Stack-LSTM reversal, the Queue- and DeQue-LSTMs bigram flipping), and the stores it takes
PROTOCOL_STORES = {"sequence_copy": ("queue", ("queue", "deque")),
                   "sequence_reversal": ("stack", ("stack", "deque")),
                   "bigram_flip": ("queue", ("queue", "deque")),
                   "svo_sov": ("queue", ("queue",)),
                   "gender_conjugation": ("queue", ("queue",))}
# (push, pop, look end) of each store used as a queue (copy, bigram flip) or as a stack (reversal)
_STORE_OPS = {("queue", "fifo"): ("push", "pop", "bottom"),
              ("deque", "fifo"): ("push_top", "pop_bottom", "bottom"),
              ("stack", "lifo"): ("push", "pop", "top"),
              ("deque", "lifo"): ("push_top", "pop_top", "top")}


def protocol_machine(task: str, vocab_size: int | None = None, store: str | None = None):
    """The real-time transducer of a §4.1 or §4.2 task in the paper's protocol form (Grefenstette
    et al. 2015 §4). For the §4.1 tasks (vocabulary s0 … s{V-1}, ``vocab_size`` 128 unless
    given) it reads the teacher-forced joint input ``<s> a1 … an ||| b1 … bm`` — the input
    alphabet is ``(<s>, |||) + V`` (V = s0 … s{V-1}, source and target vocabulary alike, in the
    order of `pdanet.learning.data.pair_dataset`'s inputs) — and emits nothing on ``<s>`` and the
    source, then on ``|||`` and on each target symbol the NEXT symbol of the target side
    f(a1 … an) ``</s>`` (output alphabet ``V + (</s>,)``, `pair_dataset`'s classes in order). So
    its output after ``|||`` and after bi is the paper's prediction target there (§4.3: greedy
    decoding of the symbol that follows).

    Teacher-forced symbols: the machine ignores *which* target symbol it is fed (any symbol of
    V); it checks the joint input's shape only — one ``<s>`` first, a source over V, one
    ``|||``, then exactly |f(w)| = n target symbols (a further symbol blocks), and for bigram
    flipping an even n (``|||`` after an odd source blocks). Its outputs therefore depend on the
    source and the position only, and are the same under teacher forcing (§4.4's training, the
    gold previous symbol fed) and under greedy decoding (§4.3's testing, the model's own previous
    prediction fed) up to the first error; checking that bi is the gold symbol would need the
    last output held in the finite control (|V| states). Domain (``accepting``): the complete
    joint inputs, after which ``</s>`` has been emitted.

    The store is the paper's (`PROTOCOL_STORES`; §5's table): a queue for copying (enqueue the
    source, then dequeue one symbol per step), a stack for reversal (push the source, then pop
    one per step), a queue for bigram flipping (the source enters one symbol late, x_{2i} before
    x_{2i−1}, the odd symbol held in the state ``("hold", x)`` and then owed, ``("owe", x)``;
    ``|||`` dequeues a2 and enqueues the owed x_{n−1} in one move). ``store="deque"`` gives the
    DeQue-LSTM's machine instead (the deque used as a queue for copying and bigram flipping, as
    a stack for reversal; for bigram flipping, with no one-step dequeue-and-enqueue, x_{n−1}
    stays owed, ``("target", x)``, until the store is empty). No store does bigram flipping
    without a symbol held in the finite control: one store operation per step cannot put
    x_{2i} before x_{2i−1}. A `pdanet.automata.store.StoreTransducer`: it compiles with
    ``pn.compile(m, target="stack_rnn", model="grefenstette_lstm")`` (or ``_rnn``) — copying
    and reversal with 21 hidden units at |V| = 128; bigram flipping with 33 units at |V| = 8
    and 65 at |V| = 128 (queue; 1 + 8 + 8·⌈log₂ |V|⌉), though its table has |V|³ transitions,
    so building the machine and compiling it take minutes at |V| = 128.

    The §4.2 ITG tasks (``vocab_size`` `ITG_VOCAB` unless given) are real-time with a queue too:
    their inputs are ``(<s>, |||)`` + the source words + the target words and their outputs the
    target words + ``</s>`` (`svo_sov_alphabets`, `gender_alphabets`). SVO → SOV enqueues every
    source word but the main verb, which the finite control holds (with its place in the
    grammar) until the queue is empty, then emits it translated; genderless → gendered enqueues
    each word translated one step late (an article once its noun, and so its gender, is read),
    the last word paid with ``|||``'s dequeue (a replace). Both check the source against the
    grammar (`svo_sov_grammar`, `gender_grammar`): ``|||`` after a source outside it blocks.
    They compile at `ITG_VOCAB` with 68 (SVO) and 114 hidden units; at vocab_size=128 with 2,202
    and 3,858 (minutes: the held verb or word multiplies the states)."""
    if task not in PROTOCOL_STORES:
        raise InputError(f"no protocol-form transducer for task {task!r}; tasks that have one: "
                         f"{', '.join(PROTOCOL_STORES)}")
    default, allowed = PROTOCOL_STORES[task]
    store = default if store is None else store
    if store not in allowed:
        raise InputError(f"{task} in protocol form takes a store in {allowed}, not {store!r}")
    if task in ("svo_sov", "gender_conjugation"):
        vocab_size = ITG_VOCAB if vocab_size is None else vocab_size
        return (_svo_protocol if task == "svo_sov" else _gender_protocol)(vocab_size)
    V = vocabulary(128 if vocab_size is None else vocab_size)
    for x in (SOS, SEPARATOR, EOS):
        if x in V:
            raise InputError(f"{x!r} is a protocol symbol; the vocabulary must not use it")
    push, pop, end = _STORE_OPS[(store, "lifo" if task == "sequence_reversal" else "fifo")]
    if task == "bigram_flip":
        states, t = _flip_protocol(V, store, push, pop)
    else:
        states, t = ("start", "source", "target", "done"), {}
        t[("start", SOS, BOTTOM)] = ("source", None, "noop")
        for X in V + (BOTTOM,):
            for x in V:
                t[("source", x, X)] = ("source", None, (push, x))
        _separator(t, "source", "target", V, pop)
        _target_side(t, "target", V, pop)
    reads = {q: end for q in states} if store == "deque" else None
    return StoreTransducer(store, states, (SOS, SEPARATOR) + V, V + (EOS,), V, t, "start",
                           accepting=("done",), reads=reads, name=f"{task}_protocol_{store}")


def _separator(t: dict, last_source, target, V: tuple, op) -> None:
    """On ``|||`` from `last_source`: emit the symbol the store yields, apply `op` (the pop, or a
    queue's replace) and go to `target`; on an empty store emit ``</s>`` and stop."""
    for X in V:
        t[(last_source, SEPARATOR, X)] = (target, X, op)
    t[(last_source, SEPARATOR, BOTTOM)] = ("done", EOS, "noop")


def _target_side(t: dict, target, V: tuple, pop: str, owed=None) -> None:
    """In `target` on each target symbol (whichever it is): emit the symbol the store yields and
    remove it; on an empty store emit the owed symbol (``owed``; then ``"last"``) or ``</s>``
    and stop in ``"done"``."""
    for y in V:
        for X in V:
            t[(target, y, X)] = (target, X, pop)
        t[(target, y, BOTTOM)] = ("done", EOS, "noop") if owed is None else \
            ("last", owed, "noop")


def _flip_protocol(V: tuple, store: str, push: str, pop: str) -> tuple[tuple, dict]:
    """Bigram flipping's protocol transducer (see `protocol_machine`): a store used as a queue,
    lagging one symbol, the odd symbol x_{2i−1} held (``("hold", x)``) then owed
    (``("owe", x)``). On ``|||`` a queue dequeues a2 and enqueues the owed x_{n−1} in one move
    (``replace``); a deque has no such move, so it only dequeues and keeps x_{n−1} owed
    (``("target", x)``) until the store is empty, then emits it (``"last"``)."""
    states = ("start", "even", "target", "last", "done") + tuple(
        (tag, x) for tag in ("hold", "owe") + (("target",) if store == "deque" else ())
        for x in V)
    t: dict = {("start", SOS, BOTTOM): ("even", None, "noop"),
               ("even", SEPARATOR, BOTTOM): ("done", EOS, "noop")}   # the empty source
    for y in V:
        t[("last", y, BOTTOM)] = ("done", EOS, "noop")
    for x in V:
        t[("even", x, BOTTOM)] = (("hold", x), None, "noop")         # a1
        for X in V + (BOTTOM,):
            for y in V:
                t[(("hold", x), y, X)] = (("owe", x), None, (push, y))   # x_{2i}, owe x_{2i-1}
                t[(("owe", x), y, X)] = (("hold", y), None, (push, x))   # pay x_{2i-1}, hold y
    if store == "queue":
        for x in V:                    # the store holds x2 at least: ||| never finds it empty
            for X in V:
                t[(("owe", x), SEPARATOR, X)] = ("target", X, ("replace", x))
        _target_side(t, "target", V, pop)
    else:
        for x in V:
            for X in V:
                t[(("owe", x), SEPARATOR, X)] = (("target", x), X, pop)
            _target_side(t, ("target", x), V, pop, owed=x)
    return states, t


def protocol_form(task: str, source: Sequence, vocab_size: int | None = None
                  ) -> tuple[tuple, tuple]:
    """The joint input ``<s> source ||| f(source)`` of a task of `protocol_machine` (teacher
    forcing) and its per-step targets: None for each step on ``<s>`` and the source, then the
    target side f(source) ``</s>`` — what `protocol_machine` emits. InputError for a source
    outside the task's domain."""
    if task not in PROTOCOL_STORES:
        raise InputError(f"no protocol form for task {task!r}; tasks: "
                         f"{', '.join(PROTOCOL_STORES)}")
    if task == "svo_sov":
        target = svo_sov_target(source, ITG_VOCAB if vocab_size is None else vocab_size)
    elif task == "gender_conjugation":
        target = gender_target(source, ITG_VOCAB if vocab_size is None else vocab_size)
    else:
        target = _pair_reference(task, source, 128 if vocab_size is None else vocab_size)
    if target is None:
        raise InputError(f"{tuple(source)!r} is not a source of {task} (vocab_size "
                         f"{vocab_size})" + (" (bigram flipping needs an even length)"
                                             if task == "bigram_flip" else ""))
    w = tuple(source)
    return (SOS, *w, SEPARATOR, *target), (None,) * (len(w) + 1) + tuple(target) + (EOS,)


# --- §4.2: the ITG transduction tasks --------------------------------------------------------
# The paper gives its two grammars in an appendix table that is not part of its text; the grammars
# below are read from §4.2's prose and its two sample pairs, and say where they choose. Their
# vocabulary defaults to `ITG_VOCAB` = 12 words (3 per class), small enough to compile every
# machine quickly; vocab_size=128 is the paper's ("approximately 128/k" words per class).

ITG_VOCAB = 12      # default vocabulary of the ITG tasks; the paper's is vocab_size=128
_SVO_CLASSES = 3     # subject, verb and object words (the relative pronoun is one word)
_GENDER_CLASSES = 4  # verbs and masculine, feminine and neuter nouns


def _class_size(vocab_size: int, k: int) -> int:
    """Words per class: ⌊vocab_size / k⌋, at least one."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise InputError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    return max(1, vocab_size // k)


def _feasible_lengths(n: int, lengths, rng, ok: Callable[[int], bool], what: str) -> list[int]:
    """n lengths drawn uniformly from those of `lengths` that pass `ok`."""
    pool = [lengths] if isinstance(lengths, (int, np.integer)) else list(lengths)
    if any(isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 0 for L in pool):
        raise InputError(f"lengths must be non-negative integers, got {lengths!r}")
    good = [int(L) for L in pool if ok(int(L))]
    if not good:
        raise InputError(f"{what} has no source of any length in {pool!r}")
    return draw_lengths(n, good, rng)


def _class_strings(g: PCFG, ls: list[int], rng) -> list[tuple]:
    """One string of `g` of each length in `ls` (length-conditioned, PCFG-weighted)."""
    if not ls:
        return []
    table = _table(g, max(ls), True)
    return [table.sample(rng, L) for L in ls]


def svo_sov_grammar() -> PCFG:
    """The source side of the SVO → SOV ITG over word classes s, v, o, rp (our reading of
    Grefenstette et al. 2015 §4.2; the paper's appendix table is not in its text):

        A → s v O                       (target: s O v — the ITG's inverted rule on [v O])
        O → o O | o | s rp s v O        (objects; a relative clause "s rp s v O" in place)

    Relative clauses keep their order in the target, as in the paper's sample pair
    ``si1 vi28 oi5 oi7 si15 rpi si19 vi16 oi10 oi24 ||| so1 oo5 oo7 so15 rpo so19 vo16 oo10
    oo24 vo28``. The rule probabilities (½, ¼, ¼) are ours; sampling is conditioned on the
    length, which makes them matter only within a length."""
    h, q = Fraction(1, 2), Fraction(1, 4)
    return PCFG(("A", "O"), ("s", "v", "o", "rp"), {
        ("A", ("s", "v", "O")): Fraction(1),
        ("O", ("o", "O")): h, ("O", ("o",)): q, ("O", ("s", "rp", "s", "v", "O")): q},
        "A", name="svo_sov")


def _svo_words(vocab_size: int) -> tuple[tuple, tuple]:
    n = _class_size(vocab_size, _SVO_CLASSES)
    src = tuple(f"{c}i{j}" for c in "svo" for j in range(1, n + 1)) + ("rpi",)
    tgt = tuple(f"{c}o{j}" for c in "svo" for j in range(1, n + 1)) + ("rpo",)
    return src, tgt


def _svo_class(word: Any) -> str | None:
    if word == "rpi":
        return "rp"
    if isinstance(word, str) and len(word) > 2 and word[0] in "svo" and word[1] == "i" \
            and word[2:].isdigit():
        return word[0]
    return None


def _svo_translate(word: str) -> str:
    return "rpo" if word == "rpi" else word[0] + "o" + word[2:]


def svo_sov_target(source: Sequence, vocab_size: int = ITG_VOCAB, **_machine_params):
    """The SOV target of an SVO source of `svo_sov_grammar` (each word's ``i`` → ``o``, the main
    verb moved to the end), or None when the source is not in the grammar's language."""
    src_words = set(_svo_words(vocab_size)[0])
    w = tuple(source)
    if any(x not in src_words for x in w):
        return None
    cls = [_svo_class(x) for x in w]
    if cls[:2] != ["s", "v"]:
        return None
    state = "O0"                          # the right-linear O: expecting an object phrase
    for c in cls[2:]:
        state = {("O0", "o"): "Oo", ("Oo", "o"): "Oo", ("O0", "s"): "Rs", ("Oo", "s"): "Rs",
                 ("Rs", "rp"): "Rrp", ("Rrp", "s"): "Rs2", ("Rs2", "v"): "O0"}.get((state, c))
        if state is None:
            return None
    if state != "Oo":
        return None
    return (_svo_translate(w[0]),) + tuple(_svo_translate(x) for x in w[2:]) + \
        (_svo_translate(w[1]),)


def svo_sov_pairs(n: int, lengths=TRAIN_LENGTHS, rng=None,
                  vocab_size: int = ITG_VOCAB) -> list:
    """n (source, target) pairs: a source length drawn uniformly from `lengths` (those with a
    source: ≥ 3), a class string of that length from `svo_sov_grammar`, each class word drawn
    uniformly from its ⌊vocab_size / 3⌋ words, at least one (the paper: "approximately 128/k"
    words per class, all equiprobable). The paper instead rejects samples outside [8, 64]
    (training) or [65, 128] (testing)."""
    rng = check_rng(rng)
    _class_size(vocab_size, _SVO_CLASSES)
    ls = _feasible_lengths(n, lengths, rng, lambda L: L >= 3, "SVO → SOV")
    return _svo_pairs(ls, rng, vocab_size)


def _svo_pairs(ls: list[int], rng, vocab_size: int) -> list:
    per = _class_size(vocab_size, _SVO_CLASSES)
    out = []
    for cls in _class_strings(svo_sov_grammar(), ls, rng):
        w = tuple("rpi" if c == "rp" else f"{c}i{int(rng.integers(1, per + 1))}" for c in cls)
        out.append((w, svo_sov_target(w, vocab_size)))
    return out


def svo_sov_alphabets(vocab_size: int = ITG_VOCAB, **_machine_params) -> tuple[tuple, tuple]:
    """(source words, target words) of the SVO → SOV task."""
    return _svo_words(vocab_size)


def svo_sov_machine(vocab_size: int = ITG_VOCAB) -> DFA:
    """Grefenstette et al. (2015) §4.2 SVO → SOV in streaming form: w # → # t, t the SOV target
    of w (`svo_sov_target`), one output per step, one step behind. A Mealy DFA: it holds the
    subject for one step, then the main verb until ``#`` (its states: the verb held × the place in
    the right-linear object phrase); words of the object phrase are translated as they come."""
    src, tgt = _svo_words(vocab_size)
    by_class = {c: [x for x in src if _svo_class(x) == c] for c in ("s", "v", "o", "rp")}
    trans: dict = {}
    outs: dict = {}

    def arc(q, x, r, y):
        trans[(q, x)], outs[(q, x)] = r, y

    for s_ in by_class["s"]:
        arc("start", s_, ("subj", s_), BLANK)
        for v in by_class["v"]:
            arc(("subj", s_), v, (v, "O0"), _svo_translate(s_))
    moves = {("O0", "o"): "Oo", ("Oo", "o"): "Oo", ("O0", "s"): "Rs", ("Oo", "s"): "Rs",
             ("Rs", "rp"): "Rrp", ("Rrp", "s"): "Rs2", ("Rs2", "v"): "O0"}
    for v in by_class["v"]:
        for (q, c), r in moves.items():
            for x in by_class[c]:
                arc((v, q), x, (v, r), _svo_translate(x))
        arc((v, "Oo"), BLANK, "done", _svo_translate(v))
    states = ["start", "done"] + sorted({q for q, _ in trans} | set(trans.values()), key=str)
    states = list(dict.fromkeys(states))
    return DFA(states, src + (BLANK,), trans, "start", accepting=("done",), outputs=outs,
               output_alphabet=tgt + (BLANK,), name="svo_sov")


def _streaming_reference(string: Sequence, target: Callable[[tuple], Any]):
    s = tuple(string)
    if not s or s[-1] != BLANK:
        return None
    t = target(s[:-1])
    return None if t is None else (BLANK,) + tuple(t)


def svo_sov_reference(string: Sequence, vocab_size: int = ITG_VOCAB):
    """Per-step outputs of the streaming form w # → # t (None off the domain)."""
    return _streaming_reference(string, lambda w: svo_sov_target(w, vocab_size))


def svo_sov_sampler(n: int, lengths, rng=None, vocab_size: int = ITG_VOCAB) -> list:
    """Strings w # of the streaming form (`lengths`: total lengths, so sources of length − 1)."""
    rng = check_rng(rng)
    ls = _feasible_lengths(n, lengths, rng, lambda L: L >= 4, "SVO → SOV (streaming form w #)")
    return [w + (BLANK,) for w, _ in _svo_pairs([L - 1 for L in ls], rng, vocab_size)]


_ARTICLES = {("the", "m"): "der", ("the", "f"): "die", ("the", "n"): "das",
             ("a", "m"): "ein", ("a", "f"): "eine", ("a", "n"): "ein"}


def gender_grammar() -> PCFG:
    """The source side of the genderless → gendered ITG over word classes (our reading of
    Grefenstette et al. 2015 §4.2; the paper's appendix table is not in its text):

        A → NP V NP | NP V            ("sentences in (NP/(V/NP)) or (NP/V) form")
        NP → D N | D N and NP          ("every noun phrase can become an infinite sequence of
                                        nouns joined by a conjunction")
        D → the | a                    N → em | ef | en (masculine, feminine, neuter nouns)

    Word for word in the target: ``the`` → der / die / das and ``a`` → ein / eine / ein by the
    gender of the noun that follows, ``and`` → ``und``, ``e{g}{j}`` → ``g{g}{j}``, verbs
    ``we{j}`` → ``wg{j}``. The paper's sample ``we11 the en19 and the em17 ||| wg11 das gn19 und
    der gm17`` is the V NP part of a sentence. Sources have lengths 3, 5, 6, 8, 9, … (none
    ≡ 1 mod 3). The rule probabilities are ours (uniform choices; NP → D N and NP with ¼)."""
    half, third = Fraction(1, 2), Fraction(1, 3)
    return PCFG(("A", "NP", "D", "N"), ("the", "a", "and", "V", "em", "ef", "en"), {
        ("A", ("NP", "V", "NP")): half, ("A", ("NP", "V")): half,
        ("NP", ("D", "N")): Fraction(3, 4), ("NP", ("D", "N", "and", "NP")): Fraction(1, 4),
        ("D", ("the",)): half, ("D", ("a",)): half,
        ("N", ("em",)): third, ("N", ("ef",)): third, ("N", ("en",)): third}, "A",
        name="gender_conjugation")


def _gender_words(vocab_size: int) -> tuple[tuple, tuple]:
    n = _class_size(vocab_size, _GENDER_CLASSES)
    js = range(1, n + 1)
    src = ("the", "a", "and") + tuple(f"we{j}" for j in js) + tuple(
        f"e{g}{j}" for g in "mfn" for j in js)
    tgt = ("der", "die", "das", "ein", "eine", "und") + tuple(f"wg{j}" for j in js) + tuple(
        f"g{g}{j}" for g in "mfn" for j in js)
    return src, tgt


def _gender_class(word: Any) -> str | None:
    if word in ("the", "a", "and"):
        return "D" if word != "and" else "and"
    if isinstance(word, str) and len(word) > 2 and word[2:].isdigit():
        if word[:2] == "we":
            return "V"
        if word[0] == "e" and word[1] in "mfn":
            return "N"
    return None


def _gender_translate(word: str, next_word: Any = None) -> str:
    if word in ("the", "a"):
        return _ARTICLES[(word, next_word[1])]
    if word == "and":
        return "und"
    return ("wg" if word[:2] == "we" else "g" + word[1]) + word[2:]


_GENDER_MOVES = {("S0", "D"): "S1", ("S1", "N"): "S2", ("S2", "and"): "S0", ("S2", "V"): "V1",
                 ("V1", "D"): "O1", ("O1", "N"): "O2", ("O2", "and"): "O0", ("O0", "D"): "O1"}
_GENDER_FINAL = ("V1", "O2")


def gender_target(source: Sequence, vocab_size: int = ITG_VOCAB, **_machine_params):
    """The gendered target of a source of `gender_grammar`, or None outside its language."""
    src_words = set(_gender_words(vocab_size)[0])
    w = tuple(source)
    if any(x not in src_words for x in w):
        return None
    state = "S0"
    for x in w:
        state = _GENDER_MOVES.get((state, _gender_class(x)))
        if state is None:
            return None
    if state not in _GENDER_FINAL:
        return None
    return tuple(_gender_translate(x, w[i + 1] if i + 1 < len(w) else None)
                 for i, x in enumerate(w))


def gender_pairs(n: int, lengths=TRAIN_LENGTHS, rng=None,
                 vocab_size: int = ITG_VOCAB) -> list:
    """n (source, target) pairs: a source length drawn uniformly from those of `lengths` the
    grammar has (not ≡ 1 mod 3; ≥ 3), a class string of `gender_grammar` of that length, each
    verb and noun drawn uniformly from its ⌊vocab_size / 4⌋ words, at least one. The paper
    instead rejects samples outside [8, 64] (training) or [65, 128] (testing)."""
    rng = check_rng(rng)
    _class_size(vocab_size, _GENDER_CLASSES)
    ls = _feasible_lengths(n, lengths, rng, lambda L: L >= 3 and L % 3 != 1,
                           "genderless → gendered")
    return _gender_pairs(ls, rng, vocab_size)


def _gender_pairs(ls: list[int], rng, vocab_size: int) -> list:
    per = _class_size(vocab_size, _GENDER_CLASSES)
    out = []
    for cls in _class_strings(gender_grammar(), ls, rng):
        w = tuple(c if c in ("the", "a", "and") else
                  ("we" if c == "V" else c) + str(int(rng.integers(1, per + 1))) for c in cls)
        out.append((w, gender_target(w, vocab_size)))
    return out


def gender_alphabets(vocab_size: int = ITG_VOCAB, **_machine_params) -> tuple[tuple, tuple]:
    """(source words, target words) of the genderless → gendered task."""
    return _gender_words(vocab_size)


def gender_machine(vocab_size: int = ITG_VOCAB) -> DFA:
    """Grefenstette et al. (2015) §4.2 genderless → gendered in streaming form: w # → # t, t the
    target of w (`gender_target`), one output per step, one step behind: a Mealy DFA holding the
    last word (an article is translated when its noun is read) and its place in the grammar."""
    src, tgt = _gender_words(vocab_size)
    trans: dict = {}
    outs: dict = {}
    held_states = [("S0", "")]             # "": no word held yet
    seen = {("S0", "")}
    while held_states:
        q, held = held_states.pop()
        for x in src:
            r = _GENDER_MOVES.get((q, _gender_class(x)))
            if r is None:
                continue
            nxt = (r, x)
            trans[((q, held), x)] = nxt
            outs[((q, held), x)] = BLANK if held == "" else _gender_translate(held, x)
            if nxt not in seen:
                seen.add(nxt)
                held_states.append(nxt)
        if q in _GENDER_FINAL:
            trans[((q, held), BLANK)] = "done"
            outs[((q, held), BLANK)] = _gender_translate(held)
    states = sorted(seen, key=str) + ["done"]
    return DFA(states, src + (BLANK,), trans, ("S0", ""), accepting=("done",), outputs=outs,
               output_alphabet=tgt + (BLANK,), name="gender_conjugation")


def gender_reference(string: Sequence, vocab_size: int = ITG_VOCAB):
    """Per-step outputs of the streaming form w # → # t (None off the domain)."""
    return _streaming_reference(string, lambda w: gender_target(w, vocab_size))


def gender_sampler(n: int, lengths, rng=None, vocab_size: int = ITG_VOCAB) -> list:
    """Strings w # of the streaming form (`lengths`: total lengths, so sources of length − 1)."""
    rng = check_rng(rng)
    ls = _feasible_lengths(n, lengths, rng, lambda L: L >= 4 and (L - 1) % 3 != 1,
                           "genderless → gendered (streaming form w #)")
    return [w + (BLANK,) for w, _ in _gender_pairs([L - 1 for L in ls], rng, vocab_size)]


def _svo_protocol(vocab_size: int) -> StoreTransducer:
    """SVO → SOV in protocol form (see `protocol_machine`): states ``("svo", q, v)`` hold the
    main verb v and the place q in the object phrase (`svo_sov_target`'s automaton); the queue
    holds the source words but v, translated as they are dequeued."""
    src, tgt = _svo_words(vocab_size)
    by_class = {c: [x for x in src if _svo_class(x) == c] for c in ("s", "v", "o", "rp")}
    moves = {("O0", "o"): "Oo", ("Oo", "o"): "Oo", ("O0", "s"): "Rs", ("Oo", "s"): "Rs",
             ("Rs", "rp"): "Rrp", ("Rrp", "s"): "Rs2", ("Rs2", "v"): "O0"}
    G = src
    t: dict = {("start", SOS, BOTTOM): ("subject", None, "noop")}
    for x in by_class["s"]:
        t[("subject", x, BOTTOM)] = ("verb", None, ("push", x))
    states = ["start", "subject", "verb", "last", "done"]
    for v in by_class["v"]:
        for X in G:
            t[("verb", v, X)] = (("svo", "O0", v), None, "noop")
        for (q, c), r in moves.items():
            for x in by_class[c]:
                for X in G:
                    t[(("svo", q, v), x, X)] = (("svo", r, v), None, ("push", x))
        for X in G:                        # the queue holds the subject at least
            t[(("svo", "Oo", v), SEPARATOR, X)] = (("owe", v), _svo_translate(X), "pop")
            for y in tgt:
                t[(("owe", v), y, X)] = (("owe", v), _svo_translate(X), "pop")
        for y in tgt:
            t[(("owe", v), y, BOTTOM)] = ("last", _svo_translate(v), "noop")
        states += [("svo", q, v) for q in ("O0", "Oo", "Rs", "Rrp", "Rs2")] + [("owe", v)]
    for y in tgt:
        t[("last", y, BOTTOM)] = ("done", EOS, "noop")
    return StoreTransducer("queue", states, (SOS, SEPARATOR) + src + tgt, tgt + (EOS,), G, t,
                           "start", accepting=("done",), name="svo_sov_protocol_queue")


def _gender_protocol(vocab_size: int) -> StoreTransducer:
    """Genderless → gendered in protocol form (see `protocol_machine`): states ``("gen", q, p)``
    hold the place q in the grammar (`gender_target`'s automaton) and the last word p, not yet
    enqueued; reading the next word x enqueues p translated (an article by x's gender)."""
    src, tgt = _gender_words(vocab_size)
    t: dict = {}
    states = {"start", "target", "done"}
    t[("start", SOS, BOTTOM)] = (("gen", "S0", None), None, "noop")
    todo, seen = [("S0", None)], {("S0", None)}
    while todo:
        q, p = todo.pop()
        states.add(("gen", q, p))
        for x in src:
            r = _GENDER_MOVES.get((q, _gender_class(x)))
            if r is None:
                continue
            op = "noop" if p is None else ("push", _gender_translate(p, x))
            for X in (BOTTOM,) if p is None else tgt + (BOTTOM,):
                t[(("gen", q, p), x, X)] = (("gen", r, x), None, op)
            if (r, x) not in seen:
                seen.add((r, x))
                todo.append((r, x))
        if q in _GENDER_FINAL and p is not None:     # ||| pays p: the queue is not empty
            for X in tgt:
                t[(("gen", q, p), SEPARATOR, X)] = ("target", X, ("replace", _gender_translate(p)))
    for y in tgt:
        for X in tgt:
            t[("target", y, X)] = ("target", X, "pop")
        t[("target", y, BOTTOM)] = ("done", EOS, "noop")
    return StoreTransducer("queue", sorted(states, key=str), (SOS, SEPARATOR) + src + tgt,
                           tgt + (EOS,), tgt, t, "start", accepting=("done",),
                           name="gender_conjugation_protocol_queue")


__all__ = [
    "EOS",
    "ITG_VOCAB",
    "PROTOCOL_STORES",
    "SEPARATOR",
    "SOS",
    "TEST_LENGTHS",
    "TRAIN_LENGTHS",
    "bigram_flip_machine",
    "bigram_flip_pairs",
    "bigram_flip_reference",
    "bigram_flip_sampler",
    "bigram_flip_target",
    "delayed_sampler",
    "gender_alphabets",
    "gender_grammar",
    "gender_machine",
    "gender_pairs",
    "gender_reference",
    "gender_sampler",
    "gender_target",
    "pair_alphabets",
    "protocol_form",
    "protocol_machine",
    "sequence_copy_machine",
    "sequence_copy_pairs",
    "sequence_copy_reference",
    "sequence_copy_target",
    "sequence_reversal_machine",
    "sequence_reversal_pairs",
    "sequence_reversal_reference",
    "sequence_reversal_target",
    "svo_sov_alphabets",
    "svo_sov_grammar",
    "svo_sov_machine",
    "svo_sov_pairs",
    "svo_sov_reference",
    "svo_sov_sampler",
    "svo_sov_target",
]
