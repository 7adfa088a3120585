"""Ordered alphabets, strings over them, and their codes.

A *symbol* is any hashable value other than the two distinguished symbols `EPSILON` (the empty
string, used on transitions) and `BOTTOM` (the bottom-of-stack marker), ``None``, and the strings
``"ε"``, ``"⊥"`` (their spellings in machine files), ``""`` and strings with surrounding
whitespace. A *string* is a Python ``str`` (one symbol per character when every symbol is one
character, otherwise whitespace separated) or any sequence of symbols (a list or tuple).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

from pdanet.errors import InputError


class _Special:
    """A distinguished symbol that cannot collide with a user symbol (compared by identity)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):  # pickling keeps identity
        return (_special, (self.name,))


EPSILON = _Special("ε")
BOTTOM = _Special("⊥")
_SPECIALS = {"ε": EPSILON, "⊥": BOTTOM}


def _special(name: str) -> _Special:
    return _SPECIALS[name]


def is_special(symbol: Any) -> bool:
    return symbol is EPSILON or symbol is BOTTOM


@dataclass(frozen=True)
class Alphabet:
    """An ordered, duplicate-free tuple of symbols with index maps and codes.

    Refused at construction (InputError naming the symbol): `EPSILON`, `BOTTOM`, ``None``, the
    reserved strings ``"ε"`` and ``"⊥"``, ``""``, strings with surrounding whitespace, booleans
    (``True == 1`` would merge with the integer symbol 1), unhashable values and duplicates.

    Reading a ``str`` as a string (`split`): when every symbol is one character, each character
    is a symbol. Otherwise the text is split at whitespace and each piece must be a symbol; a
    piece that is a symbol *and* a concatenation of two or more symbols (alphabet ``a, b, ab``:
    the text ``"ab"``) is ambiguous and refused with an InputError saying to pass a list of
    symbols (``["ab"]`` or ``["a", "b"]``). Lists and tuples of symbols are never ambiguous.
    """

    symbols: tuple
    _index: dict = field(init=False, repr=False, compare=False, hash=False)

    def __init__(self, symbols: Iterable[Hashable]):
        if symbols is None or not isinstance(symbols, Iterable):
            raise InputError(f"an alphabet is a str or an iterable of symbols, got "
                             f"{type(symbols).__name__}")
        syms = tuple(symbols)
        object.__setattr__(self, "symbols", syms)
        index: dict = {}
        for i, s in enumerate(syms):
            if is_special(s):
                raise InputError(f"{s!r} is a distinguished symbol and cannot be in an alphabet")
            if s is None:
                raise InputError(f"alphabet symbol at position {i} is None; None cannot be a symbol (ε is "
                                 "written EPSILON on transitions, never in an alphabet)")
            if isinstance(s, (bool, np.bool_)):
                raise InputError(f"alphabet symbol {s!r} is a boolean; use a string or an "
                                 "integer (True would be the same symbol as 1)")
            try:
                hash(s)
            except TypeError as exc:
                raise InputError(f"alphabet symbol {s!r} is not hashable") from exc
            if s in index:
                raise InputError(f"alphabet symbol {s!r} occurs twice")
            if isinstance(s, str) and (s == "" or s.strip() != s):
                raise InputError(f"alphabet symbol {s!r} is empty or has surrounding whitespace")
            if isinstance(s, str) and s in _SPECIALS:
                raise InputError(f"alphabet symbol {s!r} is reserved (it is how machine files "
                                 f"write {'ε' if s == 'ε' else 'the bottom of the stack'}); "
                                 "rename it")
            index[s] = i
        object.__setattr__(self, "_index", index)

    @classmethod
    def of(cls, symbols: "Alphabet | Iterable[Hashable] | str") -> "Alphabet":
        """Coerce: an Alphabet, a str (one symbol per character) or an iterable of symbols."""
        if isinstance(symbols, Alphabet):
            return symbols
        return cls(symbols)

    def __len__(self) -> int:
        return len(self.symbols)

    def __iter__(self):
        return iter(self.symbols)

    def __contains__(self, symbol: object) -> bool:
        try:
            return symbol in self._index
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.symbols)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Alphabet) and self.symbols == other.symbols

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self.symbols[:8]))
        more = f", … ({len(self)} symbols)" if len(self) > 8 else ""
        return f"Alphabet([{shown}{more}])"

    def index(self, symbol: Hashable) -> int:
        """The position of `symbol`; InputError naming it when it is not in the alphabet."""
        try:
            return self._index[symbol]
        except (KeyError, TypeError):
            shown = ", ".join(map(repr, self.symbols[:10]))
            raise InputError(
                f"symbol {symbol!r} is not in the alphabet [{shown}{', …' if len(self) > 10 else ''}]"
            ) from None

    def symbol(self, i: int) -> Hashable:
        return self.symbols[i]

    @cached_property
    def single_char(self) -> bool:
        return all(isinstance(s, str) and len(s) == 1 for s in self.symbols)

    @cached_property
    def _compound(self) -> dict:
        """Cache of `is_compound` answers, filled as pieces of text are read."""
        return {}

    def is_compound(self, word: str) -> bool:
        """True when the str `word` is a concatenation of two or more str symbols (word-break,
        O(len(word)²) look-ups, cached per word)."""
        cache = self._compound
        if word not in cache:
            n = len(word)
            # reach[i]: word[:i] is a concatenation of one or more symbols
            reach = [False] * (n + 1)
            for i in range(1, n):
                reach[i] = any((j == 0 or reach[j]) and word[j:i] in self for j in range(i))
            cache[word] = any(reach[j] and word[j:] in self for j in range(1, n))
        return cache[word]

    def split(self, string: "str | Sequence[Hashable]") -> tuple:
        """A string as a tuple of symbols (validated; see the class docstring for ``str``)."""
        if isinstance(string, str):
            if self.single_char:
                syms = tuple(string)
            else:
                syms = tuple(string.split())
                bad = [w for w in set(syms) if len(w) > 1 and w in self and self.is_compound(w)]
                if bad:
                    w = min(bad)
                    raise InputError(
                        f"the text {string[:80]!r} is ambiguous: {w!r} is a symbol and also a "
                        "concatenation of other symbols of the alphabet; pass a list of symbols "
                        f"instead (e.g. [{w!r}])")
        elif string is None or isinstance(string, (bytes, bytearray, dict, set, frozenset)) \
                or not isinstance(string, Iterable):
            raise InputError(f"a string is a str or a sequence of symbols, got "
                             f"{type(string).__name__}")
        else:
            syms = tuple(string)
        for pos, s in enumerate(syms):
            if s not in self:
                hint = ("" if self.single_char or not isinstance(string, str) else
                        "; symbols of this alphabet are separated by whitespace in a str, or "
                        "pass a list of symbols")
                raise InputError(
                    f"symbol {s!r} at position {pos} of {string!r} is not in the alphabet "
                    f"{self!r}{hint}"
                )
        return syms

    def encode(self, string: "str | Sequence[Hashable]") -> np.ndarray:
        """Symbol indices of a string as an int64 array."""
        return np.fromiter((self._index[s] for s in self.split(string)), dtype=np.int64)

    def encode_batch(self, strings: Sequence) -> tuple[np.ndarray, np.ndarray]:
        """Pad a batch of strings: (ids of shape (B, T) with -1 padding, lengths of shape (B,))."""
        encoded = [self.encode(s) for s in strings]
        lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        ids = np.full((len(encoded), int(lengths.max(initial=0))), -1, dtype=np.int64)
        for b, e in enumerate(encoded):
            ids[b, : len(e)] = e
        return ids, lengths

    def decode(self, ids: Iterable[int]) -> tuple:
        return tuple(self.symbols[int(i)] for i in ids if int(i) >= 0)

    def format(self, string: Sequence[Hashable]) -> str:
        """A string printed as users write it: concatenated, or space-separated for long symbols."""
        sep = "" if self.single_char else " "
        return sep.join(map(str, string))

    def one_hot(self, ids: np.ndarray) -> np.ndarray:
        """One-hot rows (…, |Σ|) for an index array; padding (-1) maps to the zero row."""
        ids = np.asarray(ids)
        out = np.zeros(ids.shape + (len(self),), dtype=np.int8)
        valid = ids >= 0
        out[valid, ids[valid]] = 1
        return out

    def code_width(self, nonzero: bool = False) -> int:
        """Bits of the binary code: ⌈log₂|Σ|⌉, or ⌈log₂(|Σ|+1)⌉ when the all-zero code is excluded;
        at least 1."""
        n = len(self) + (1 if nonzero else 0)
        return max(1, math.ceil(math.log2(n))) if n > 1 else 1

    def binary_codes(self, nonzero: bool = False, signed: bool = False) -> np.ndarray:
        """Binary codes of the symbols, one row each, most significant bit first.

        With ``nonzero`` the code of symbol i is the binary expansion of i + 1, so no symbol has the
        all-zero code. With ``signed`` the bits are mapped 0 → -1, 1 → +1.
        """
        width = self.code_width(nonzero)
        values = np.arange(len(self), dtype=np.int64) + (1 if nonzero else 0)
        shifts = np.arange(width - 1, -1, -1, dtype=np.int64)
        bits = ((values[:, None] >> shifts[None, :]) & 1).astype(np.int8)
        return 2 * bits - 1 if signed else bits


__all__ = ["Alphabet", "EPSILON", "BOTTOM", "is_special"]
