"""Samplers and argument checks shared by the tasks: lengths drawn uniformly from a set, uniform
strings, length-conditioned sampling from a grammar, alphabets and vocabularies."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from pdanet.automata.alphabet import Alphabet
from pdanet.automata.grammar import CFG, LengthTable, _check_rng
from pdanet.errors import InputError

check_rng = _check_rng


def draw_lengths(n: int, lengths: int | Iterable[int], rng: np.random.Generator) -> list[int]:
    """n lengths drawn uniformly from `lengths` (an int or an iterable of ints)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"the number of strings must be a non-negative integer, got {n!r}")
    if isinstance(lengths, (int, np.integer)):
        choices = [int(lengths)]
    else:
        choices = [int(x) for x in lengths]
    if not choices or min(choices) < 0:
        raise InputError(f"lengths must be non-negative integers, got {lengths!r}")
    return [choices[i] for i in rng.integers(0, len(choices), size=n)]


def uniform_strings(symbols: Sequence, n: int, lengths, rng) -> list[tuple]:
    """n strings of independent uniform symbols, lengths drawn by `draw_lengths`."""
    rng = check_rng(rng)
    syms = tuple(symbols)
    return [tuple(syms[i] for i in rng.integers(0, len(syms), size=L))
            for L in draw_lengths(n, lengths, rng)]


def bits_sampler(n: int, lengths, rng=None) -> list:
    """Uniform bit strings (members and non-members of a bit-string language alike)."""
    return uniform_strings("01", n, lengths, rng)


@functools.lru_cache(maxsize=64)
def _table(g: CFG, max_length: int, weighted: bool) -> LengthTable:
    return g.length_table(max_length, weighted)


def grammar_sampler(g: CFG, n: int, lengths, rng, weighted: bool = True) -> list[tuple]:
    """n strings of exact lengths from `g`, by length-conditioned sampling (PCFG-weighted)."""
    rng = check_rng(rng)
    ls = draw_lengths(n, lengths, rng)
    if not ls:
        return []
    top = max(ls)
    table = _table(g, top, weighted)
    bad = sorted({L for L in ls if table._is_zero(table.total(L))})
    if bad:
        raise InputError(f"the grammar {g.name or g!r} has no string of length {bad[0]}; choose "
                         "other lengths")
    return [table.sample(rng, L) for L in ls]


def check_alphabet(alphabet: Any, reserved: Iterable[Hashable] = ()) -> tuple:
    """The alphabet's symbols; InputError when one of them is `reserved` by the task."""
    syms = tuple(Alphabet.of(alphabet))
    for r in reserved:
        if r in syms:
            raise InputError(f"symbol {r!r} is reserved by this task and cannot be in the alphabet")
    return syms


def vocabulary(vocab_size: int) -> tuple:
    """The vocabulary s0 … s{V-1} of the tasks of Grefenstette et al. (2015)."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) \
            or vocab_size < 1:
        raise InputError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    return tuple(f"s{i}" for i in range(int(vocab_size)))


def primed(x: Hashable) -> str:
    """The stack symbol for `x` pushed on an empty stack (marks the bottom-most cell, so a
    real-time machine knows when a pop empties the stack)."""
    return f"{x}'"


__all__ = ["bits_sampler", "check_alphabet", "check_rng", "draw_lengths", "grammar_sampler",
           "primed", "uniform_strings", "vocabulary"]
