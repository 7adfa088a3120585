"""Tasks of DuSell & Chiang (2021), Learning Hierarchical Structures with Differentiable
Nondeterministic Stacks, §4 (the tasks of DuSell & Chiang 2020): marked, unmarked and padded
reversal, and Greibach's hardest context-free language. (Dyck-2, the fifth, is `dyck2` of
`pdanet.automata.tasks.suzgun2019`.) Where the text gives no rule probabilities, ours say so."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.grammar import PCFG
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.tasks.sampling import check_alphabet, grammar_sampler, primed
from pdanet.automata.tasks.task import BLANK
from pdanet.automata.weighted import hardest_cfl_realtime


def marked_palindrome(syms: tuple, marker: str, phi: dict, name: str):
    """Real-time DPDA for { w marker phi(w^R) }: push w (the first symbol primed), then pop one
    symbol per matching phi-image; accept when the primed symbol is popped (or at once for w = ε)."""
    stack = syms + tuple(primed(x) for x in syms)
    t: dict = {("start", marker, BOTTOM): ("done", (BOTTOM,))}
    for x in syms:
        t[("start", x, BOTTOM)] = ("push", (primed(x), BOTTOM))
        for s in stack:
            t[("push", x, s)] = ("push", (x, s))
        t[("push", marker, x)] = ("pop", (x,))
        t[("push", marker, primed(x))] = ("pop", (primed(x),))
        t[("pop", phi[x], x)] = ("pop", ())
        t[("pop", phi[x], primed(x))] = ("done", ())
    input_syms = syms + (marker,) + tuple(v for v in dict.fromkeys(phi.values()) if v not in syms)
    return DPDA(("start", "push", "pop", "done"), input_syms, stack, t, "start",
                accepting=("done",), name=name)


def marked_reversal_machine(alphabet: Any = "01", marker: str = BLANK):
    """DuSell & Chiang (2021) §4 "Marked reversal"; Suzgun et al. (2019) §6.2: { w # w^R }.
    Real-time DPDA."""
    syms = check_alphabet(alphabet, (marker,))
    return marked_palindrome(syms, marker, {x: x for x in syms}, "marked_reversal")


def marked_reversal_reference(string: Sequence, alphabet: Any = "01", marker: str = BLANK) -> bool:
    syms = set(check_alphabet(alphabet, (marker,)))
    s = tuple(string)
    if s.count(marker) != 1:
        return False
    i = s.index(marker)
    w, v = s[:i], s[i + 1:]
    return all(x in syms for x in w) and v == tuple(reversed(w))


def marked_reversal_grammar(alphabet: Any = "01", marker: str = BLANK,
                            p_end: Any = Fraction(1, 10)) -> PCFG:
    """S → x S x (each x equally likely) | marker (probability `p_end`, our choice: the paper's
    probabilities are in DuSell & Chiang 2020, not in the text we have)."""
    syms = check_alphabet(alphabet, (marker,))
    p_end = Fraction(p_end)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", (marker,))] = p_end
    return PCFG(("S",), syms + (marker,), rules, "S", name="marked_reversal")


def marked_reversal_sampler(n, lengths, rng=None, alphabet: Any = "01", marker: str = BLANK):
    return grammar_sampler(marked_reversal_grammar(alphabet, marker), n, lengths, rng)


def unmarked_reversal_machine(alphabet: Any = "01"):
    """DuSell & Chiang (2021) §4 "Unmarked reversal": { w w^R }. Real-time PDA that guesses the
    middle: reading x with x on top it may pop instead of push."""
    syms = check_alphabet(alphabet)
    stack = syms + tuple(primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = {("push", (primed(x), BOTTOM))}
        for s in stack:
            t[("push", x, s)] = {("push", (x, s))}
        t[("push", x, x)].add(("pop", ()))
        t[("push", x, primed(x))].add(("done", ()))
        t[("pop", x, x)] = {("pop", ())}
        t[("pop", x, primed(x))] = {("done", ())}
    return PDA(("start", "push", "pop", "done"), syms, stack, t, "start",
               accepting=("start", "done"), name="unmarked_reversal")


def unmarked_reversal_reference(string: Sequence, alphabet: Any = "01") -> bool:
    syms = set(check_alphabet(alphabet))
    s = tuple(string)
    h = len(s) // 2
    return (len(s) % 2 == 0 and all(x in syms for x in s)
            and s[h:] == tuple(reversed(s[:h])))


def unmarked_reversal_grammar(alphabet: Any = "01", p_end: Any = Fraction(1, 10)) -> PCFG:
    """S → x S x (equally likely) | ε (`p_end`, our choice)."""
    syms = check_alphabet(alphabet)
    p_end = Fraction(p_end)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", ())] = p_end
    return PCFG(("S",), syms, rules, "S", name="unmarked_reversal")


def unmarked_reversal_sampler(n: int, lengths, rng=None, alphabet: Any = "01") -> list:
    """Strings of `unmarked_reversal_grammar` of exact lengths."""
    return grammar_sampler(unmarked_reversal_grammar(alphabet), n, lengths, rng)


def padded_reversal_machine(alphabet: Any = "01"):
    """DuSell & Chiang (2021) §4 "Padded reversal": { w a^p w^R : a a symbol, p ≥ 0 }. Real-time
    PDA that guesses the middle (pop instead of push) or the single middle symbol (skip it). As a
    set this is every palindrome; the padding shows in the PCFG's distribution."""
    syms = check_alphabet(alphabet)
    stack = syms + tuple(primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = {("push", (primed(x), BOTTOM)), ("done", (BOTTOM,))}
        for s in stack:
            t[("push", x, s)] = {("push", (x, s)), ("pop", (s,))}
        t[("push", x, x)].add(("pop", ()))
        t[("push", x, primed(x))].add(("done", ()))
        t[("pop", x, x)] = {("pop", ())}
        t[("pop", x, primed(x))] = {("done", ())}
    return PDA(("start", "push", "pop", "done"), syms, stack, t, "start",
               accepting=("start", "done"), name="padded_reversal")


def padded_reversal_reference(string: Sequence, alphabet: Any = "01") -> bool:
    """Literally: some split s = w a^p w^R."""
    syms = set(check_alphabet(alphabet))
    s = tuple(string)
    if any(x not in syms for x in s):
        return False
    n = len(s)
    for p in range(n % 2, n + 1, 2):
        h = (n - p) // 2
        mid = s[h:h + p]
        if len(set(mid)) <= 1 and s[h + p:] == tuple(reversed(s[:h])):
            return True
    return False


def padded_reversal_grammar(alphabet: Any = "01", p_end: Any = Fraction(1, 10),
                            p_pad: Any = Fraction(9, 10)) -> PCFG:
    """S → x S x (equally likely) | P (`p_end`); P → A_x (equally likely); A_x → x A_x (`p_pad`)
    | ε. Probabilities are our choice."""
    syms = check_alphabet(alphabet)
    p_end, p_pad = Fraction(p_end), Fraction(p_pad)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", ("P",))] = p_end
    pads = tuple(("pad", x) for x in syms)
    for x, a in zip(syms, pads):
        rules[("P", (a,))] = Fraction(1, len(syms))
        rules[(a, (x, a))] = p_pad
        rules[(a, ())] = 1 - p_pad
    return PCFG(("S", "P") + pads, syms, rules, "S", name="padded_reversal")


def padded_reversal_sampler(n: int, lengths, rng=None, alphabet: Any = "01") -> list:
    """Strings of `padded_reversal_grammar` of exact lengths."""
    return grammar_sampler(padded_reversal_grammar(alphabet), n, lengths, rng)


HARDEST_ALPHABET = ("(", ")", "[", "]", ",", ";")


def hardest_cfl_grammar(p_more: Any = Fraction(1, 2), p_fill: Any = Fraction(1, 2),
                        p_nest: Any = Fraction(1, 3), p_sep: Any = Fraction(1, 6)) -> PCFG:
    """Greibach's hardest context-free language (DuSell & Chiang 2021 §4), written with ``,`` for
    Greibach's c and ``;`` for d:

        L = { x1 , y1 , z1 ; … xn , yn , zn ; : n ≥ 0, y1…yn ∈ D_2, yi ∈ {( ) [ ]}*,
              xi, zi ∈ {( ) [ ] ,}* }

    Grammar: S → ε | X , T , X ; (the n-1 other blocks are separators inside T);
    T → ε | ( T ) T | [ T ] T | Sep T (Dyck words with separators anywhere);
    Sep → , X ; X , ;  X → ε | x X for x in ( ) [ ] , .
    Probabilities are our choice: `p_more` for S → X , T , X ;, `p_fill` for X → x X (x uniform),
    `p_nest` for each bracket rule of T, `p_sep` for T → Sep T."""
    p_more, p_fill, p_nest, p_sep = map(Fraction, (p_more, p_fill, p_nest, p_sep))
    rules: dict = {
        ("S", ()): 1 - p_more, ("S", ("X", ",", "T", ",", "X", ";")): p_more,
        ("T", ("(", "T", ")", "T")): p_nest / 2, ("T", ("[", "T", "]", "T")): p_nest / 2,
        ("T", ("Sep", "T")): p_sep, ("T", ()): 1 - p_nest - p_sep,
        ("Sep", (",", "X", ";", "X", ",")): 1,
        ("X", ()): 1 - p_fill,
    }
    for x in ("(", ")", "[", "]", ","):
        rules[("X", (x, "X"))] = p_fill / 5
    return PCFG(("S", "T", "Sep", "X"), HARDEST_ALPHABET, rules, "S", name="hardest_cfl")


def hardest_cfl_machine():
    """The PDA of `hardest_cfl_grammar` (nondeterministic: it guesses which comma-free segment of
    each block is y_i)."""
    return hardest_cfl_grammar().cfg().to_pda(name="hardest_cfl")


def hardest_cfl_reference(string: Sequence) -> bool:
    """Split into ;-terminated blocks; in each block y is a comma-free segment between two
    consecutive commas; track every reachable bracket stack."""
    s = tuple(string)
    if any(x not in HARDEST_ALPHABET for x in s):
        return False
    if not s:
        return True
    if s[-1] != ";":
        return False
    blocks: list = []
    cur: list = []
    for x in s:
        if x == ";":
            blocks.append(cur)
            cur = []
        else:
            cur.append(x)
    partner = {")": "(", "]": "["}
    stacks = {()}
    for block in blocks:
        segments: list = [[]]
        for x in block:
            if x == ",":
                segments.append([])
            else:
                segments[-1].append(x)
        new = set()
        for y in segments[1:-1]:  # between two consecutive commas
            for st in stacks:
                lst = list(st)
                ok = True
                for x in y:
                    if x in "([":
                        lst.append(x)
                    elif not lst or lst.pop() != partner[x]:
                        ok = False
                        break
                if ok:
                    new.add(tuple(lst))
        stacks = new
        if not stacks:
            return False
    return () in stacks


def hardest_cfl_sampler(n: int, lengths, rng=None) -> list:
    """Strings of `hardest_cfl_grammar` of exact lengths."""
    return grammar_sampler(hardest_cfl_grammar(), n, lengths, rng)


def hardest_cfl_task_machine(realtime: bool = False):
    """The grammar's PDA (ε-moves), or with ``realtime=True`` the real-time weighted PDA of
    `pdanet.automata.weighted.hardest_cfl_realtime` (one symbol per step, as the NS-RNN)."""
    if realtime:
        return hardest_cfl_realtime()
    return hardest_cfl_machine()


__all__ = [
    "HARDEST_ALPHABET",
    "hardest_cfl_grammar",
    "hardest_cfl_machine",
    "hardest_cfl_reference",
    "hardest_cfl_sampler",
    "hardest_cfl_task_machine",
    "marked_palindrome",
    "marked_reversal_grammar",
    "marked_reversal_machine",
    "marked_reversal_reference",
    "marked_reversal_sampler",
    "padded_reversal_grammar",
    "padded_reversal_machine",
    "padded_reversal_reference",
    "padded_reversal_sampler",
    "unmarked_reversal_grammar",
    "unmarked_reversal_machine",
    "unmarked_reversal_reference",
    "unmarked_reversal_sampler",
]
