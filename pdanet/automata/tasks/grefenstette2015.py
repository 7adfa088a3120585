"""Tasks of Grefenstette et al. (2015), Learning to Transduce with Unbounded Memory, §4.1:
sequence copying, sequence reversal and bigram flipping over a vocabulary s0 … s{V-1}, in the
delayed-output form w #^|w| (Hao et al. 2018 §2.3; bigram flipping also in a streaming form)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pdanet.automata import store as store_machines
from pdanet.automata.dfa import DFA
from pdanet.automata.tasks.hao2018 import delayed_output, reversal_machine, reversal_sampler
from pdanet.automata.tasks.sampling import check_rng, draw_lengths, vocabulary
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


def _flip(w: tuple) -> tuple:
    return tuple(w[i ^ 1] for i in range(len(w)))


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


__all__ = [
    "bigram_flip_machine",
    "bigram_flip_reference",
    "bigram_flip_sampler",
    "delayed_sampler",
    "sequence_copy_machine",
    "sequence_copy_reference",
    "sequence_reversal_machine",
    "sequence_reversal_reference",
]
