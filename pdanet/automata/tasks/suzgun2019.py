"""Tasks of Suzgun et al. (2019), Memory-Augmented Recurrent Neural Networks Can Learn Generalized
Dyck Languages: the Dyck languages D_k (§5), the palindromes w # w^R (§6.2) and the homomorphic
palindromes w # φ(w^R) (§6.1). (String reversal, §7, is the reversal of Hao et al. 2018.)"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.grammar import CFG, PCFG
from pdanet.automata.pda import DPDA
from pdanet.automata.tasks.dusell2021 import (
    marked_palindrome,
    marked_reversal_grammar,
    marked_reversal_machine,
    marked_reversal_reference,
    marked_reversal_sampler,
)
from pdanet.automata.tasks.hewitt2020 import brackets, well_nested
from pdanet.automata.tasks.sampling import (
    check_alphabet,
    check_rng,
    draw_lengths,
    grammar_sampler,
    primed,
)
from pdanet.automata.tasks.task import BLANK, END
from pdanet.errors import InputError


def w_wr_marked_machine(alphabet: Any = "abc", marker: str = BLANK):
    """Suzgun et al. (2019) §6.2: the palindrome language w # w^R (alias of marked_reversal with
    w over {a, b, c})."""
    return marked_reversal_machine(alphabet, marker)


def w_wr_marked_reference(string: Sequence, alphabet: Any = "abc", marker: str = BLANK) -> bool:
    return marked_reversal_reference(string, alphabet, marker)


def w_wr_marked_grammar(alphabet: Any = "abc", marker: str = BLANK) -> PCFG:
    """`marked_reversal_grammar` over {a, b, c}."""
    return marked_reversal_grammar(alphabet, marker)


def w_wr_marked_sampler(n: int, lengths, rng=None, alphabet: Any = "abc",
                        marker: str = BLANK) -> list:
    return marked_reversal_sampler(n, lengths, rng, alphabet, marker)


_PHI = {"a": "x", "b": "y", "c": "z"}


def w_phi_wr_machine():
    """Suzgun et al. (2019) §6.1: the homomorphic palindromes w # φ(w^R), w ∈ {a, b, c}*, φ maps
    a, b, c to x, y, z. Real-time DPDA."""
    return marked_palindrome(tuple(_PHI), BLANK, _PHI, "w_phi_wr")


def w_phi_wr_reference(string: Sequence) -> bool:
    s = tuple(string)
    if s.count(BLANK) != 1:
        return False
    i = s.index(BLANK)
    w, v = s[:i], s[i + 1:]
    return all(x in _PHI for x in w) and v == tuple(_PHI[x] for x in reversed(w))


def w_phi_wr_grammar(p_end: Any = Fraction(1, 10)) -> PCFG:
    """S → a S x | b S y | c S z (equally likely) | # (`p_end`, our choice)."""
    p_end = Fraction(p_end)
    rules = {("S", (x, "S", y)): (1 - p_end) / 3 for x, y in _PHI.items()}
    rules[("S", (BLANK,))] = p_end
    return PCFG(("S",), tuple(_PHI) + (BLANK,) + tuple(_PHI.values()), rules, "S",
                name="w_phi_wr")


def w_phi_wr_sampler(n: int, lengths, rng=None) -> list:
    """Strings of `w_phi_wr_grammar` of exact lengths."""
    return grammar_sampler(w_phi_wr_grammar(), n, lengths, rng)


def dyck_machine(k: int = 2):
    """A real-time DPDA recognising Dyck-k (well-nested strings over k bracket pairs; the bracket
    symbols are those of `DyckKM`). The bracket pushed on an empty stack is primed, so popping it
    returns to the accepting state ``empty``."""
    opens, closes = brackets(k)
    stack = opens + tuple(primed(o) for o in opens)
    t: dict = {}
    for o, c in zip(opens, closes):
        t[("empty", o, BOTTOM)] = ("in", (primed(o), BOTTOM))
        for s in stack:
            t[("in", o, s)] = ("in", (o, s))
        t[("in", c, o)] = ("in", ())
        t[("in", c, primed(o))] = ("empty", ())
    return DPDA(("empty", "in"), opens + closes, stack, t, "empty", accepting=("empty",),
                name=f"dyck{k}")


def dyck_reference(string: Sequence, k: int = 2) -> bool:
    """Well-nested over k bracket types (any depth)."""
    return well_nested(string, k)


def dyck_grammar(k: int = 2, p: Any = Fraction(1, 2), q: Any = Fraction(1, 4)) -> PCFG:
    """Suzgun et al. (2019) §5: S → (_i S )_i with probability p/k each | S S with q | ε with
    1 - (p + q); the paper sets p = 1/2, q = 1/4. (Ambiguous: sample it with `sample`.)"""
    opens, closes = brackets(k)
    p, q = Fraction(p), Fraction(q)
    rules = {("S", (o, "S", c)): p / k for o, c in zip(opens, closes)}
    rules[("S", ("S", "S"))] = q
    rules[("S", ())] = 1 - p - q
    return PCFG(("S",), opens + closes, rules, "S", name=f"dyck{k}")


def dyck_unambiguous_grammar(k: int = 2) -> CFG:
    """S → (_i S )_i S | ε: one derivation per Dyck word, so length-conditioned sampling from it
    is uniform over the Dyck-k words of that length."""
    opens, closes = brackets(k)
    rules = [("S", (o, "S", c, "S")) for o, c in zip(opens, closes)] + [("S", ())]
    return CFG(("S",), opens + closes, rules, "S", name=f"dyck{k}")


def dyck_nonempty_grammar(k: int = 2, p: Any = Fraction(1, 2), q: Any = Fraction(1, 4)):
    """A `WeightedCFG` without ε-rules whose strings are the non-empty Dyck-k words, each with the
    total probability the paper's PCFG `dyck_grammar` (k, p, q) gives it (float64 weights).

    ε-removal of S → (_i S )_i (p/k) | S S (q) | ε (e = 1 − p − q): S derives ε with probability
    z = (1 − √(1 − 4qe)) / (2q) (the least root of z = e + q z²), and S ⇒ S through S S with one
    child ε with probability 2qz, so N (non-empty S) → (_i N )_i | (_i )_i z | N N, each times
    (p/k, p/k, q) / (1 − 2qz)."""
    from pdanet.automata.tasks.probability import WeightedCFG

    opens, closes = brackets(k)
    p, q = Fraction(p), Fraction(q)
    e = 1 - p - q
    if not (0 < p and 0 <= q and e > 0):
        raise InputError(f"p and q must be probabilities with p > 0, q ≥ 0 and p + q < 1, got "
                         f"p={p}, q={q}")
    z = float(e) if q == 0 else (1 - (1 - 4 * float(q) * float(e)) ** 0.5) / (2 * float(q))
    loop = 1 / (1 - 2 * float(q) * z)
    rules: dict = {}
    for o, c in zip(opens, closes):
        rules[("N", (o, "N", c))] = float(p) / k * loop
        rules[("N", (o, c))] = float(p) / k * z * loop
    if q:
        rules[("N", ("N", "N"))] = float(q) * loop
    return WeightedCFG(("N",), opens + closes, rules, "N", name=f"dyck{k}")


def dyck_sampler(n, lengths, rng=None, k: int = 2, grammar: bool = False,
                 p: Any = Fraction(1, 2), q: Any = Fraction(1, 4)):
    """Dyck-k words of the given lengths (lengths must be even).

    Default: uniform over the Dyck-k words of each length, exactly. ``grammar=True``: each word
    with its probability under Suzgun et al.'s PCFG (`dyck_grammar`, p = 1/2 and q = 1/4 as §5
    states) among the words of its length — the paper draws from the PCFG and keeps the lengths
    it wants; here the length is drawn uniformly from `lengths` and the word from the PCFG
    conditioned on it (length-conditioned sampling of `dyck_nonempty_grammar`).

    Every Dyck-k word of length L is a Dyck path with a label in [k] on each of its L/2 up-steps,
    so the words are uniform when the path is uniform and the labels are independent and uniform.
    The path is drawn left to right: from height d with r steps left, of the N(r, d) =
    (d+1)/(r+1)·C(r+1, (r−d)/2) completions (ballot numbers) a fraction
    N(r−1, d+1)/N(r, d) = (d+2)(r−d) / (2r(d+1)) starts with an up-step; that ratio is drawn
    exactly, with integers. Vectorised over the strings of one length: O(L) numpy steps."""
    rng = check_rng(rng)
    ls = draw_lengths(n, lengths, rng)
    odd = sorted({L for L in ls if L % 2})
    if odd:
        raise InputError(f"Dyck-{k} has no string of length {odd[0]}; choose even lengths")
    if not isinstance(grammar, bool):
        raise InputError(f"grammar must be True or False, got {grammar!r}")
    if grammar:
        from pdanet.automata.tasks.sampling import _table

        table = _table(dyck_nonempty_grammar(k, p, q), max(ls, default=0), True)
        return [table.sample(rng, L) if L else () for L in ls]
    opens, closes = brackets(k)
    symbols = np.array(opens + closes, dtype=object)
    out: list = [None] * len(ls)
    for L in sorted(set(ls)):
        rows = [i for i, x in enumerate(ls) if x == L]
        b = len(rows)
        ids = np.empty((b, L), np.int64)
        labels = np.zeros((b, L // 2 + 1), np.int64)       # labels of the open brackets, by height
        d = np.zeros(b, np.int64)
        at = np.arange(b)
        for t in range(L):
            r = L - t
            up = rng.integers(0, 2 * r * (d + 1)) < (d + 2) * (r - d)
            new = rng.integers(0, k, size=b)
            labels[at[up], d[up]] = new[up]                   # an open at height d gets a label
            ids[:, t] = np.where(up, new, k + labels[at, np.maximum(d - 1, 0)])
            d += np.where(up, 1, -1)
        for i, row in zip(rows, symbols[ids]):
            out[i] = tuple(row)
    return out


# --- Suzgun et al. (2019) §4.1, Table 1: the set of next symbols at every prefix -------------

def _bad_prefix(name: str, string: tuple, t: int) -> InputError:
    return InputError(f"{string[:t + 1]!r} is not a prefix of a {name} string, so no next-symbol "
                      "set is defined there; pass strings of the task (its sampler draws them)")


def dyck_next_sets(string: Sequence, k: int = 2, **_sampler_params) -> tuple[frozenset, ...]:
    """Suzgun et al. (2019) §4.1 and Table 1: for each prefix of a Dyck-k string (positions
    0..|s|, position t after t symbols) the set of symbols that may come next — every open
    bracket, the partner of the innermost unclosed bracket when there is one, and `END` when
    the prefix is itself a Dyck word (Table 1 prints the Dyck rows without it; drop the END
    column for those). InputError when a prefix is not a prefix of a Dyck-k word."""
    opens, closes = brackets(k)
    s = tuple(string)
    stack: list = []
    out = []
    for t in range(len(s) + 1):
        out.append(frozenset(opens) | ({closes[stack[-1]]} if stack else {END}))
        if t == len(s):
            break
        x = s[t]
        if x in opens:
            stack.append(opens.index(x))
        elif x in closes and stack and closes.index(x) == stack[-1]:
            stack.pop()
        else:
            raise _bad_prefix(f"Dyck-{k}", s, t)
    return tuple(out)


def _palindrome_next_sets(string: Sequence, left: tuple, marker: str, mirror: dict,
                          name: str) -> tuple[frozenset, ...]:
    """Next-symbol sets of w marker h(w^R) (w over `left`, h = `mirror`): before the marker,
    `left` and the marker; after it, the image of the symbol of w still to be mirrored, then
    `END`."""
    s = tuple(string)
    out = []
    w: list = []
    t = 0
    while t < len(s) and s[t] != marker:
        if s[t] not in left:
            raise _bad_prefix(name, s, t)
        out.append(frozenset(left) | {marker})
        w.append(s[t])
        t += 1
    if t == len(s):
        out.append(frozenset(left) | {marker})
        return tuple(out)
    out.append(frozenset(left) | {marker})         # the set before the marker
    t += 1
    for i, x in enumerate(reversed(w)):
        out.append(frozenset({mirror[x]}))
        if t + i == len(s):
            return tuple(out)
        if s[t + i] != mirror[x]:
            raise _bad_prefix(name, s, t + i)
    if t + len(w) < len(s):
        raise _bad_prefix(name, s, t + len(w))
    out.append(frozenset({END}))
    return tuple(out)


def w_phi_wr_next_sets(string: Sequence) -> tuple[frozenset, ...]:
    """Suzgun et al. (2019) §6.1 and Table 1 (abc#zyx → a/b/c/# ×3, z, y, x, ⊣): the next-symbol
    sets of w # φ(w^R) at positions 0..|s| — {a, b, c, #} while reading w, then the image of
    the symbol to be mirrored, then `END`."""
    return _palindrome_next_sets(string, tuple(_PHI), BLANK, _PHI, "w # φ(w^R)")


def w_wr_marked_next_sets(string: Sequence, alphabet: Any = "abc",
                          marker: str = BLANK) -> tuple[frozenset, ...]:
    """Suzgun et al. (2019) §6.2: the next-symbol sets of w # w^R, as for `w_phi_wr_next_sets`
    with the identity for φ."""
    left = check_alphabet(alphabet, (marker,))
    return _palindrome_next_sets(string, left, marker, {x: x for x in left}, "w # w^R")


__all__ = [
    "dyck_grammar",
    "dyck_machine",
    "dyck_next_sets",
    "dyck_nonempty_grammar",
    "dyck_reference",
    "dyck_sampler",
    "dyck_unambiguous_grammar",
    "w_phi_wr_grammar",
    "w_phi_wr_machine",
    "w_phi_wr_next_sets",
    "w_phi_wr_reference",
    "w_phi_wr_sampler",
    "w_wr_marked_grammar",
    "w_wr_marked_machine",
    "w_wr_marked_next_sets",
    "w_wr_marked_reference",
    "w_wr_marked_sampler",
]
