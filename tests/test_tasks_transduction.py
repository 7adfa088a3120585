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
