"""Alphabet: indices, splitting and encoding strings, one-hot and binary codes, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet, is_special
from pdanet.errors import InputError


def test_index_and_symbol_round_trip():
    a = Alphabet("xyz")
    assert [a.index(s) for s in "xyz"] == [0, 1, 2]
    assert [a.symbol(i) for i in range(3)] == ["x", "y", "z"]
    assert len(a) == 3 and list(a) == ["x", "y", "z"]
    assert "y" in a and "w" not in a and [1] not in a  # unhashable: simply not a member


def test_of_coerces_and_keeps_alphabets():
    a = Alphabet("ab")
    assert Alphabet.of(a) is a
    assert Alphabet.of("ab") == a == Alphabet(["a", "b"])
    assert hash(Alphabet.of("ab")) == hash(a)
    assert Alphabet("ab") != Alphabet("ba")


def test_split_single_char_and_tokens():
    assert Alphabet("ab").split("abba") == ("a", "b", "b", "a")
    words = Alphabet(["the", "cat", "sat"])
    assert not words.single_char
    assert words.split("the cat  sat") == ("the", "cat", "sat")
    assert words.split(["cat", "the"]) == ("cat", "the")
    ints = Alphabet([0, 1, 2])
    assert ints.split([2, 0]) == (2, 0)


def test_encode_and_decode():
    a = Alphabet("abc")
    ids = a.encode("cab")
    assert ids.dtype == np.int64 and ids.tolist() == [2, 0, 1]
    assert a.decode(ids) == ("c", "a", "b")
    assert a.decode([1, -1, -1]) == ("b",)  # padding is dropped
    assert a.format(("a", "c")) == "ac"
    assert Alphabet(["ab", "cd"]).format(("ab", "cd")) == "ab cd"


def test_encode_batch_pads_with_minus_one():
    ids, lengths = Alphabet("ab").encode_batch(["ab", "", "bba"])
    assert lengths.tolist() == [2, 0, 3]
    assert ids.tolist() == [[0, 1, -1], [-1, -1, -1], [1, 1, 0]]
    empty_ids, empty_lengths = Alphabet("ab").encode_batch([])
    assert empty_ids.shape == (0, 0) and empty_lengths.shape == (0,)


def test_one_hot_rows_and_padding():
    a = Alphabet("abc")
    oh = a.one_hot(np.array([[2, 0, -1]]))
    assert oh.shape == (1, 3, 3)
    assert oh[0].tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]


@pytest.mark.parametrize("bad", ["abd", ["a", "d"], "dab"])
def test_unknown_symbols_are_named(bad):
    a = Alphabet("abc")
    with pytest.raises(InputError, match="'d'"):
        a.split(bad)
    with pytest.raises(InputError, match="'d'"):
        a.encode(bad)
    with pytest.raises(InputError, match="'d'"):
        a.index("d")


def test_error_names_the_position():
    with pytest.raises(InputError, match="position 2"):
        Alphabet("ab").split("abz")


@pytest.mark.parametrize("special", [EPSILON, BOTTOM])
def test_distinguished_symbols_cannot_be_in_an_alphabet(special):
    assert is_special(special)
    with pytest.raises(InputError, match="distinguished"):
        Alphabet(["a", special])
    assert special not in Alphabet("ab")


def test_distinguished_symbols_are_not_strings():
    assert EPSILON != "ε" and BOTTOM != "⊥"
    assert not is_special("ε")
    # their printed names are reserved (machine files write ε and ⊥ so): refused as symbols
    for name in ("ε", "⊥"):
        with pytest.raises(InputError, match="reserved"):
            Alphabet(["a", name])


@pytest.mark.parametrize("symbols, message", [
    ("aa", "twice"),
    (["a", ""], "empty"),
    (["a", " b"], "whitespace"),
    ([["a"]], "hashable"),
])
def test_malformed_alphabets(symbols, message):
    with pytest.raises(InputError, match=message):
        Alphabet(symbols)


def _code_value(row: np.ndarray) -> int:
    return int("".join(map(str, row.tolist())), 2)


@given(st.integers(min_value=1, max_value=300), st.booleans())
@settings(max_examples=60, deadline=None)
def test_binary_codes_are_the_binary_expansions(n, nonzero):
    a = Alphabet(range(n))
    codes = a.binary_codes(nonzero=nonzero)
    width = a.code_width(nonzero)
    assert codes.shape == (n, width)
    assert set(np.unique(codes).tolist()) <= {0, 1}
    values = [_code_value(r) for r in codes]
    assert values == [i + (1 if nonzero else 0) for i in range(n)]
    # the width is the smallest that fits every value (at least one bit)
    assert width == max(1, math.ceil(math.log2(max(values) + 1)))
    if nonzero:
        assert codes.any(axis=1).all()


@given(st.integers(min_value=1, max_value=100), st.booleans())
@settings(max_examples=30, deadline=None)
def test_signed_codes_map_bits_to_plus_minus_one(n, nonzero):
    a = Alphabet(range(n))
    bits = a.binary_codes(nonzero=nonzero)
    signed = a.binary_codes(nonzero=nonzero, signed=True)
    assert np.array_equal(signed, 2 * bits.astype(np.int64) - 1)
    assert len({tuple(r) for r in signed.tolist()}) == n


def test_small_code_widths():
    assert Alphabet("a").code_width() == 1
    assert Alphabet("a").code_width(nonzero=True) == 1
    assert Alphabet("ab").code_width(nonzero=True) == 2
    assert Alphabet("abcd").code_width() == 2
    assert Alphabet("abcd").code_width(nonzero=True) == 3
    assert Alphabet("ab").binary_codes(nonzero=True).tolist() == [[0, 1], [1, 0]]
