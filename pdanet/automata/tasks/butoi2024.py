"""Languages of Butoi et al. (2025), Training Neural Networks as Recognizers of Formal Languages
(ICLR 2025; the FLaRe benchmark), Table 1 and the definitions of their appendix: the
regular languages Repeat 01, Even Pairs, Cycle Navigation and Modular Arithmetic (Simple), and the
deterministic context-free languages Majority and Stack Manipulation. Several recast the
transduction tasks of Delétang et al. (2023) as languages by writing the task's answer after the
input (after ``=`` or ``#``), so that a string is a member iff the answer is right.

Marked Copy (w # w, context-sensitive) has a reference and a sampler here but no machine: no
machine of the library recognises it, so it is not a registered task.

Every sampler draws members of exactly the requested lengths; lengths that no member has raise
InputError. The ways of drawing are our own (the paper samples length-controlled from weighted
automata); they are described in each sampler.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA
from pdanet.automata.tasks.sampling import check_rng, draw_lengths, primed, uniform_strings
from pdanet.errors import InputError

BITS = ("0", "1")
MODULUS = 5
_DIGITS = tuple(str(i) for i in range(MODULUS))


def _bits(n: int, rng) -> tuple:
    return tuple(BITS[i] for i in rng.integers(0, 2, size=n))


# --- Repeat 01 -----------------------------------------------------------------------------------
def repeat_01_machine() -> DFA:
    """Butoi et al. (2025), Table 1 "Repeat 01": the language (01)*; a two-state partial DFA."""
    return DFA(("even", "odd"), BITS, {("even", "0"): "odd", ("odd", "1"): "even"}, "even",
               accepting=("even",), name="repeat_01")


def repeat_01_reference(string: Sequence) -> bool:
    """Member iff the string is 01 repeated some number of times (zero included)."""
    s = tuple(string)
    return s == ("0", "1") * (len(s) // 2)


def repeat_01_sampler(n: int, lengths, rng=None) -> list:
    """(01)^(L/2) for each drawn length L; every length must be even."""
    rng = check_rng(rng)
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L % 2:
            raise InputError(f"strings of (01)* have even length; {L} is odd")
        out.append(("0", "1") * (L // 2))
    return out


# --- Even Pairs ----------------------------------------------------------------------------------
def even_pairs_machine() -> DFA:
    """Butoi et al. (2025), Table 1 "Even Pairs" (from Delétang et al. 2023, appendix): bit strings
    whose number of occurrences of 01 and 10 together is even. Such a count is even iff the string
    is empty or its first and last bits agree, so the DFA remembers the first bit and the last one
    (state ``fl``: first f, last l; accepting: ``start``, ``00``, ``11``)."""
    states = ("start", "00", "01", "10", "11")
    t = {("start", a): a + a for a in BITS}
    for f in BITS:
        for last in BITS:
            for a in BITS:
                t[(f + last, a)] = f + a
    return DFA(states, BITS, t, "start", accepting=("start", "00", "11"), name="even_pairs")


def even_pairs_reference(string: Sequence) -> bool:
    """Member iff every symbol is a bit and the adjacent pairs 01 and 10 occur an even number of
    times in total (counted directly)."""
    s = tuple(string)
    if any(a not in BITS for a in s):
        return False
    return sum(1 for pair in pairwise(s) if pair in (("0", "1"), ("1", "0"))) % 2 == 0


def even_pairs_sampler(n: int, lengths, rng=None) -> list:
    """Members uniformly among those of each drawn length: uniform bits, then (length ≥ 2) the
    last bit set equal to the first."""
    rng = check_rng(rng)
    out = []
    for L in draw_lengths(n, lengths, rng):
        s = _bits(L, rng)
        out.append(s[:-1] + s[:1] if L >= 2 else s)
    return out


# --- Cycle Navigation ----------------------------------------------------------------------------
CYCLE_MOVES = ("<", "=", ">")


def cycle_navigation_machine(size: int = MODULUS) -> DFA:
    """Butoi et al. (2025), Table 1 "Cycle Navigation" (from Delétang et al. 2023, appendix): moves
    on a cycle of `size` positions starting at 0 — ``>`` one step forward, ``<`` one step back,
    ``=`` stay — followed by the final position (a digit); member iff that digit is where the moves
    end. States: the positions 0 … size-1 and the accepting state ``end``."""
    size = _check_size(size)
    digits = tuple(str(i) for i in range(size))
    t: dict = {}
    for q in range(size):
        t[(q, ">")] = (q + 1) % size
        t[(q, "<")] = (q - 1) % size
        t[(q, "=")] = q
        t[(q, digits[q])] = "end"
    return DFA(tuple(range(size)) + ("end",), CYCLE_MOVES + digits, t, 0, accepting=("end",),
               name="cycle_navigation")


def cycle_navigation_reference(string: Sequence, size: int = MODULUS) -> bool:
    """Member iff the string is moves then one digit, the position the moves reach from 0."""
    size = _check_size(size)
    s = tuple(string)
    if not s or any(a not in CYCLE_MOVES for a in s[:-1]):
        return False
    position = (s[:-1].count(">") - s[:-1].count("<")) % size
    return s[-1] == str(position)


def cycle_navigation_sampler(n: int, lengths, rng=None, size: int = MODULUS) -> list:
    """Uniform moves (length L - 1) followed by their final position; lengths ≥ 1."""
    rng = check_rng(rng)
    size = _check_size(size)
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L < 1:
            raise InputError("cycle-navigation strings have length ≥ 1 (the final position)")
        moves = uniform_strings(CYCLE_MOVES, 1, L - 1, rng)[0]
        out.append(moves + (str((moves.count(">") - moves.count("<")) % size),))
    return out


def _check_size(size) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 10:
        raise InputError(f"the cycle size / modulus must be an integer in [1, 10] (one digit per "
                         f"value), got {size!r}")
    return size


# --- Modular Arithmetic (Simple) -----------------------------------------------------------------
ARITH_OPS = ("+", "-", "*")


def _apply(op: str, a: int, b: int, m: int) -> int:
    return (a + b) % m if op == "+" else (a - b) % m if op == "-" else (a * b) % m


def modular_arithmetic_simple_machine(modulus: int = MODULUS) -> DFA:
    """Butoi et al. (2025), Table 1 "Modular Arithmetic (Simple)" (from Delétang et al. 2023,
    appendix): d (op d)* = r with digits d, r in 0 … modulus-1 and op in + - *, evaluated from left
    to right modulo `modulus`; member iff r is the value. States: ``v`` (value so far), ``v op``
    (an operator waits for its digit), ``=v`` (the answer is due) and the accepting ``end``."""
    m = _check_size(modulus)
    digits = tuple(str(i) for i in range(m))
    t: dict = {("start", d): str(i) for i, d in enumerate(digits)}
    for v in range(m):
        for op in ARITH_OPS:
            t[(str(v), op)] = f"{v}{op}"
            for i, d in enumerate(digits):
                t[(f"{v}{op}", d)] = str(_apply(op, v, i, m))
        t[(str(v), "=")] = f"={v}"
        t[(f"={v}", digits[v])] = "end"
    states = (("start",) + tuple(str(v) for v in range(m))
              + tuple(f"{v}{op}" for v in range(m) for op in ARITH_OPS)
              + tuple(f"={v}" for v in range(m)) + ("end",))
    return DFA(states, digits + ARITH_OPS + ("=",), t, "start", accepting=("end",),
               name="modular_arithmetic_simple")


def modular_arithmetic_simple_reference(string: Sequence, modulus: int = MODULUS) -> bool:
    """Member iff the string is d op d … op d = r and r is the left-to-right value mod `modulus`."""
    m = _check_size(modulus)
    digits = {str(i): i for i in range(m)}
    s = tuple(string)
    if len(s) < 3 or len(s) % 2 == 0 or s[-2] != "=":
        return False
    terms, ops = s[:-2:2], s[1:-2:2]
    if any(d not in digits for d in terms) or any(op not in ARITH_OPS for op in ops):
        return False
    value = digits[terms[0]]
    for op, d in zip(ops, terms[1:]):
        value = _apply(op, value, digits[d], m)
    return s[-1] == str(value)


def modular_arithmetic_simple_sampler(n: int, lengths, rng=None, modulus: int = MODULUS) -> list:
    """Uniform digits and operators, then ``=`` and the value; lengths are odd and ≥ 3."""
    rng = check_rng(rng)
    m = _check_size(modulus)
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L < 3 or L % 2 == 0:
            raise InputError(f"strings d (op d)* = r have odd length ≥ 3; got {L}")
        k = (L - 3) // 2
        values = [int(v) for v in rng.integers(0, m, size=k + 1)]
        ops = [ARITH_OPS[i] for i in rng.integers(0, 3, size=k)]
        value, s = values[0], [str(values[0])]
        for op, v in zip(ops, values[1:]):
            value = _apply(op, value, v, m)
            s += [op, str(v)]
        out.append(tuple(s) + ("=", str(value)))
    return out


# --- Majority ------------------------------------------------------------------------------------
def majority_machine() -> DPDA:
    """Butoi et al. (2025), Table 1 "Majority": bit strings with more 1s than 0s. Real-time DPDA
    that keeps the excess of the majority bit on the stack (the bottom-most cell primed, so a pop
    that empties the stack returns to ``tie``); accepting state ``ones``."""
    stack = BITS + tuple(primed(b) for b in BITS)
    lead = {"0": "zeros", "1": "ones"}
    t: dict = {}
    for b in BITS:
        other = "1" if b == "0" else "0"
        t[("tie", b, BOTTOM)] = (lead[b], (primed(b), BOTTOM))
        for top in (b, primed(b)):
            t[(lead[b], b, top)] = (lead[b], (b, top))
        t[(lead[other], b, other)] = (lead[other], ())
        t[(lead[other], b, primed(other))] = ("tie", ())
    return DPDA(("tie", "ones", "zeros"), BITS, stack, t, "tie", accepting=("ones",),
                name="majority")


def majority_reference(string: Sequence) -> bool:
    s = tuple(string)
    return all(a in BITS for a in s) and s.count("1") > s.count("0")


def majority_sampler(n: int, lengths, rng=None) -> list:
    """Length L ≥ 1: a number of 1s drawn uniformly in (L/2, L], placed at uniform positions."""
    rng = check_rng(rng)
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L < 1:
            raise InputError("Majority has no string of length 0")
        ones = int(rng.integers(L // 2 + 1, L + 1))
        s = ["1"] * ones + ["0"] * (L - ones)
        out.append(tuple(s[i] for i in rng.permutation(L)))
    return out


# --- Stack Manipulation --------------------------------------------------------------------------
PUSH, POP, MARK = "PUSH", "POP", "#"
STACK_SYMBOLS = BITS + (PUSH, POP, MARK)


def stack_manipulation_machine() -> DPDA:
    """Butoi et al. (2025), Table 1 "Stack Manipulation" (from Delétang et al. 2023, appendix): an
    initial stack of bits (bottom first), then operations ``PUSH b`` and ``POP`` (a POP on the empty
    stack is not allowed), then ``#`` and the resulting stack read from top to bottom.

    Real-time DPDA (final-state acceptance): it pushes the initial bits (state ``init``), runs the
    operations (``ops``; ``push`` waits for the pushed bit), and after ``#`` pops one cell per
    matching bit (``check``). The cell pushed on an empty stack is primed, so popping it goes to
    the accepting state ``done``; ``#`` on the empty stack goes there at once."""
    stack = BITS + tuple(primed(b) for b in BITS)
    tops = stack + (BOTTOM,)
    t: dict = {}
    for top in tops:
        for b in BITS:
            cell = primed(b) if top is BOTTOM else b
            keep = (top,)
            t[("init", b, top)] = ("init", (cell,) + keep)
            t[("push", b, top)] = ("ops", (cell,) + keep)
        for q in ("init", "ops"):
            t[(q, PUSH, top)] = ("push", (top,))
            if top is not BOTTOM:
                t[(q, POP, top)] = ("ops", ())
            t[(q, MARK, top)] = ("done" if top is BOTTOM else "check", (top,))
    for b in BITS:
        t[("check", b, b)] = ("check", ())
        t[("check", b, primed(b))] = ("done", ())
    return DPDA(("init", "ops", "push", "check", "done"), STACK_SYMBOLS, stack, t, "init",
                accepting=("done",), name="stack_manipulation")


def stack_manipulation_reference(string: Sequence) -> bool:
    """Simulate the operations on a Python list and compare the rest with the stack, top first."""
    s = tuple(string)
    i, stack = 0, []
    while i < len(s) and s[i] in BITS:
        stack.append(s[i])
        i += 1
    while i < len(s) and s[i] in (PUSH, POP):
        if s[i] == PUSH:
            if i + 1 >= len(s) or s[i + 1] not in BITS:
                return False
            stack.append(s[i + 1])
            i += 2
        else:
            if not stack:
                return False
            stack.pop()
            i += 1
    if i >= len(s) or s[i] != MARK:
        return False
    return s[i + 1:] == tuple(reversed(stack))


def stack_manipulation_sampler(n: int, lengths, rng=None) -> list:
    """Members of length L: with k initial bits and p pushes, any number j ≤ k + p of pops gives
    length 2k + 3p + 1 (each pop adds a symbol and removes one from the answer). (k, p) is drawn
    uniformly among the solutions, j uniformly in [0, k + p], and the pushes and pops are ordered
    at random (a pop only on a non-empty stack). Lengths 0 and 2 have no member."""
    rng = check_rng(rng)
    out = []
    for L in draw_lengths(n, lengths, rng):
        splits = [(k, (L - 1 - 2 * k) // 3) for k in range((L - 1) // 2 + 1)
                  if L >= 1 and (L - 1 - 2 * k) % 3 == 0]
        if not splits:
            raise InputError(f"Stack Manipulation has no string of length {L}")
        k, p = splits[int(rng.integers(len(splits)))]
        pops = int(rng.integers(0, k + p + 1))
        stack = list(_bits(k, rng))
        s = list(stack)
        pushes = p
        while pushes or pops:
            if pops and stack and (not pushes or rng.random() < pops / (pops + pushes)):
                s.append(POP)
                stack.pop()
                pops -= 1
            else:
                b = _bits(1, rng)[0]
                s += [PUSH, b]
                stack.append(b)
                pushes -= 1
        out.append(tuple(s) + (MARK,) + tuple(reversed(stack)))
    return out


# --- Marked Copy (no machine) --------------------------------------------------------------------
def marked_copy_reference(string: Sequence) -> bool:
    """Butoi et al. (2025), Table 1 "Marked Copy" (context-sensitive): w # w with w over {0, 1}."""
    s = tuple(string)
    if s.count(MARK) != 1:
        return False
    i = s.index(MARK)
    return all(a in BITS for a in s[:i]) and s[:i] == s[i + 1:]


def marked_copy_sampler(n: int, lengths, rng=None) -> list:
    """w # w with w uniform; lengths are odd."""
    rng = check_rng(rng)
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L % 2 == 0:
            raise InputError(f"strings w # w have odd length; {L} is even")
        w = _bits(L // 2, rng)
        out.append(w + (MARK,) + w)
    return out


__all__ = [
    "ARITH_OPS", "BITS", "CYCLE_MOVES", "MARK", "MODULUS", "POP", "PUSH", "STACK_SYMBOLS",
    "cycle_navigation_machine", "cycle_navigation_reference", "cycle_navigation_sampler",
    "even_pairs_machine", "even_pairs_reference", "even_pairs_sampler",
    "majority_machine", "majority_reference", "majority_sampler",
    "marked_copy_reference", "marked_copy_sampler",
    "modular_arithmetic_simple_machine", "modular_arithmetic_simple_reference",
    "modular_arithmetic_simple_sampler",
    "repeat_01_machine", "repeat_01_reference", "repeat_01_sampler",
    "stack_manipulation_machine", "stack_manipulation_reference", "stack_manipulation_sampler",
]
