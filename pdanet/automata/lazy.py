"""Alphabets and symbol sets too large to list: the brackets of Dyck-(k, m) for huge k.

For k ≥ 5 bracket types the Dyck alphabet is ``(0 (1 … (k-1 )0 )1 … )k-1`` (opens first, then
closes; the output alphabet adds the end marker ``$``). `BracketAlphabet` computes the i-th symbol
and parses a symbol back to its index arithmetically, so k = 10⁹ costs no more memory than k = 5;
`NextSet` is the set of allowed next symbols of a Dyck configuration (every open, the matching
close, or ``$``) without listing the opens. Both behave like their explicit counterparts
(`Alphabet`, ``frozenset``) for membership, indexing, length, iteration and equality; iterating
them is O(k) and is for small k only.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from functools import cached_property
from typing import Any

from pdanet.automata.alphabet import Alphabet

END = "$"
# explicit alphabets and sets are used up to this many symbols; lazy ones above
LAZY_ABOVE = 4096
# an equality test against an explicit tuple / hash is computed elementwise up to this size
_ELEMENTWISE = 2_000_000


def bracket(i: int, k: int) -> str:
    """The symbol of index i of the Dyck alphabet for k ≥ 5: ``(i`` for i < k, ``)(i-k)`` below
    2k, and ``$`` at 2k."""
    if i < k:
        return f"({i}"
    if i < 2 * k:
        return f"){i - k}"
    return END


def bracket_index(symbol: Any, k: int, with_end: bool) -> int:
    """The index of ``(i`` (i), ``)i`` (k + i) or ``$`` (2k, when ``with_end``); KeyError for
    anything else. The digits are canonical (no sign, no leading zero), as `bracket` prints them."""
    if not isinstance(symbol, str) or len(symbol) < 2:
        if with_end and symbol == END:
            return 2 * k
        raise KeyError(symbol)
    head, digits = symbol[0], symbol[1:]
    if head not in "()" or not digits.isascii() or not digits.isdigit() \
            or (digits[0] == "0" and len(digits) > 1):
        raise KeyError(symbol)
    i = int(digits)
    if i >= k:
        raise KeyError(symbol)
    return i if head == "(" else k + i


class BracketSymbols(Sequence):
    """The symbol tuple of a `BracketAlphabet`: ``(0 … (k-1 )0 … )k-1`` (then ``$`` with
    ``with_end``), computed on demand. ``part`` "opens" / "closes" gives just that half."""

    __slots__ = ("k", "part", "with_end")

    def __init__(self, k: int, with_end: bool = False, part: str = "all"):
        self.k, self.with_end, self.part = int(k), bool(with_end), part

    def __len__(self) -> int:
        if self.part != "all":
            return self.k
        return 2 * self.k + self.with_end

    def _symbol(self, i: int) -> str:
        return bracket(i + (self.k if self.part == "closes" else 0), self.k)

    def __getitem__(self, i: int | slice) -> Any:
        n = len(self)
        if isinstance(i, slice):
            return tuple(self._symbol(j) for j in range(*i.indices(n)))
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("bracket index out of range")
        return self._symbol(i)

    def __iter__(self) -> Iterator[str]:
        return (self._symbol(i) for i in range(len(self)))

    def __contains__(self, symbol: object) -> bool:
        try:
            i = bracket_index(symbol, self.k, self.with_end and self.part == "all")
        except KeyError:
            return False
        return self.part == "all" or (i < self.k) == (self.part == "opens")

    def index(self, symbol: Any, start: int = 0, stop: int | None = None) -> int:
        i = bracket_index(symbol, self.k, self.with_end and self.part == "all")
        if self.part == "closes":
            i -= self.k
        if not 0 <= i < len(self):
            raise ValueError(f"{symbol!r} is not in the sequence")
        return i

    def __add__(self, other: tuple) -> tuple:
        if not isinstance(other, (tuple, BracketSymbols)):
            return NotImplemented
        return tuple(self) + tuple(other)

    def __radd__(self, other: tuple) -> tuple:
        if not isinstance(other, tuple):
            return NotImplemented
        return other + tuple(self)

    def _key(self) -> tuple:
        return (self.k, self.with_end, self.part)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BracketSymbols):
            return self._key() == other._key()
        if isinstance(other, tuple):
            return len(other) == len(self) and len(self) <= _ELEMENTWISE and \
                all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        if len(self) <= _ELEMENTWISE:   # as the tuple of the same symbols
            return hash(tuple(self))
        return hash(("BracketSymbols",) + self._key())

    def __repr__(self) -> str:
        shown = " ".join(self[:3])
        return f"BracketSymbols({shown} … {self[-1]}; {len(self)} symbols)"


class BracketAlphabet(Alphabet):
    """The Dyck alphabet for k bracket types (``with_end``: the output alphabet, with ``$`` last),
    with symbols printed and parsed arithmetically (see the module docstring). An `Alphabet` in
    every respect used by machines and verifiers (index, membership, split, encode, decode)."""

    def __init__(self, k: int, with_end: bool = False):
        object.__setattr__(self, "symbols", BracketSymbols(k, with_end))
        object.__setattr__(self, "_index", _BracketIndex(int(k), bool(with_end)))

    @property
    def k(self) -> int:
        return self.symbols.k

    @cached_property
    def single_char(self) -> bool:
        return False

    @cached_property
    def compound_symbols(self) -> frozenset:
        return frozenset()    # "(i" and ")i" are never concatenations of two symbols

    def __hash__(self) -> int:
        return hash(self.symbols)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Alphabet) and self.symbols == other.symbols

    def __repr__(self) -> str:
        return (f"Alphabet([{', '.join(map(repr, self.symbols[:4]))}, … "
                f"({len(self)} symbols)])")


class _BracketIndex:
    """The ``symbol → index`` map of a `BracketAlphabet`, by parsing."""

    __slots__ = ("k", "with_end")

    def __init__(self, k: int, with_end: bool):
        self.k, self.with_end = k, with_end

    def __getitem__(self, symbol: Hashable) -> int:
        return bracket_index(symbol, self.k, self.with_end)

    def __contains__(self, symbol: object) -> bool:
        return self.get(symbol) is not None

    def get(self, symbol: Hashable, default: Any = None) -> Any:
        try:
            return bracket_index(symbol, self.k, self.with_end)
        except KeyError:
            return default

    def __len__(self) -> int:
        return 2 * self.k + self.with_end


class NextSet(AbstractSet):
    """The allowed next symbols of a live Dyck-(k, m) configuration, without listing them: every
    open ``(i`` when ``opens`` is true, plus ``close`` (the close bracket matching the top, or
    ``$`` when the stack is empty). Membership and length are O(1); iteration is O(k) in the
    output alphabet's order; it equals the ``frozenset`` of the same symbols."""

    __slots__ = ("close", "k", "opens")

    def __init__(self, k: int, opens: bool, close: str):
        self.k, self.opens, self.close = int(k), bool(opens), close

    def __contains__(self, symbol: object) -> bool:
        if symbol == self.close:
            return True
        if not self.opens:
            return False
        try:
            return bracket_index(symbol, self.k, False) < self.k
        except KeyError:
            return False

    def __len__(self) -> int:
        return (self.k if self.opens else 0) + 1

    def __iter__(self) -> Iterator[str]:
        if self.opens:
            yield from (bracket(i, self.k) for i in range(self.k))
        yield self.close

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NextSet):
            return (self.k, self.opens, self.close) == (other.k, other.opens, other.close)
        return AbstractSet.__eq__(self, other)

    def __hash__(self) -> int:
        return self._hash()      # as the frozenset of the same symbols (O(k))

    def __str__(self) -> str:
        parts = ["(0", "(1", "…", f"({self.k - 1}"] if self.opens else []
        return "{" + " ".join(parts + [self.close]) + "}"

    def __repr__(self) -> str:
        return f"NextSet({self})"


__all__ = [
    "END",
    "LAZY_ABOVE",
    "BracketAlphabet",
    "BracketSymbols",
    "NextSet",
    "bracket",
    "bracket_index",
]
