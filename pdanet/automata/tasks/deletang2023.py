"""Tasks of Delétang et al. (2023), Neural Networks and the Chomsky Hierarchy (ICLR 2023), from
the task descriptions of its appendix: the deterministic context-free tasks Modular Arithmetic
(with brackets) and Solve Equation, as languages: the task's answer is written after the input,
in the manner of Butoi et al. (2025), and a string is a member iff the answer is right.

Expressions are those of the paper's generator: E → d | -d | ( d ) | ( -d ) | ( E op E ), with
digits d in 0 … modulus-1 (modulus 5 in the paper) and op in + - (and * with ``mult=True``), every
binary operation bracketed, so no precedence is involved; values are taken modulo `modulus`.

- ``modular_arithmetic_brackets``: E = r, member iff r is the value of E.
- ``solve_equation``: E = v # s where exactly one digit of E is replaced by the unknown x; member
  iff substituting s for x makes E equal v (the paper's task is to output such an s; with
  ``mult=True`` several s may solve an equation).

Machines are real-time DPDAs (final-state acceptance) built by one construction: the stack holds a
cell per open bracket — ``(`` or, once the left operand and the operator are read, the pair — and
the state holds the value of the operand just completed. For Solve Equation a value is the affine
map a·x + c (mod modulus) with a flag telling whether x occurred, which is exact because x occurs
once. (Reverse String, the remaining deterministic context-free task, is `reversal`; Stack
Manipulation is in `butoi2024`.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.pda import DPDA
from pdanet.automata.tasks.sampling import check_rng, draw_lengths
from pdanet.errors import InputError

MODULUS = 5
UNKNOWN = "x"
ANSWER = "#"


def _check(modulus: Any, mult: Any) -> tuple[int, tuple]:
    if isinstance(modulus, bool) or not isinstance(modulus, int) or not 1 <= modulus <= 10:
        raise InputError(f"the modulus must be an integer in [1, 10] (one digit per value), got "
                         f"{modulus!r}")
    if not isinstance(mult, bool):
        raise InputError(f"mult must be a bool, got {mult!r}")
    return modulus, ("+", "-", "*") if mult else ("+", "-")


def _ev(op: str, a: int, b: int, m: int) -> int:
    return (a + b) % m if op == "+" else (a - b) % m if op == "-" else (a * b) % m


# --- the shared DPDA construction ----------------------------------------------------------------
def _expression_dpda(digits: tuple, ops: tuple, leaf: Callable[[str, bool], Hashable | None],
                     combine: Callable[[str, Hashable, Hashable], Hashable | None],
                     tails: Callable[[Hashable], set], extra: tuple, name: str) -> DPDA:
    """The DPDA for E = tail: `leaf(symbol, negated)` is the value of a leaf (None: not allowed),
    `combine(op, u, v)` that of ( u op v ) (None: not allowed), and `tails(v)` the accepted
    continuations after ``=`` (tuples of symbols) when E has value v."""
    values: list = []
    for d in digits:
        for neg in (False, True):
            v = leaf(d, neg)
            if v is not None and v not in values:
                values.append(v)
    grown = True
    while grown:  # the values closed under combine (finite)
        grown = False
        for op in ops:
            for u in list(values):
                for v in list(values):
                    w = combine(op, u, v)
                    if w is not None and w not in values:
                        values.append(w)
                        grown = True
    index = {v: i for i, v in enumerate(values)}

    def val(v, is_leaf):
        return f"v{index[v]}" + ("l" if is_leaf else "")

    def cell(v, op):
        return f"({index[v]}{op}"

    cells = ("(",) + tuple(cell(v, op) for v in values for op in ops)
    tops = cells + (BOTTOM,)
    t: dict = {}
    states = ["start", "neg"]
    for top in tops:
        t[("start", "-", top)] = ("neg", (top,))
        t[("start", "(", top)] = ("start", ("(", top))
        for d in digits:
            for q, neg in (("start", False), ("neg", True)):
                v = leaf(d, neg)
                if v is not None:
                    t[(q, d, top)] = (val(v, True), (top,))
    accepting = set()
    for v in values:
        for is_leaf in (True, False):
            q = val(v, is_leaf)
            states.append(q)
            for op in ops:
                t[(q, op, "(")] = ("start", (cell(v, op),))
            if is_leaf:
                t[(q, ")", "(")] = (val(v, False), ())
            for u in values:
                for op in ops:
                    w = combine(op, u, v)
                    if w is not None:
                        t[(q, ")", cell(u, op))] = (val(w, False), ())
            # the answer: a trie of the accepted continuations after "="
            ends = tails(v)
            if ends:
                root = f"={index[v]}"
                t[(q, "=", BOTTOM)] = (root, (BOTTOM,))
                for tail in ends:
                    node = root
                    for k, a in enumerate(tail):
                        nxt = f"{root}:{''.join(tail[:k + 1])}"
                        t[(node, a, BOTTOM)] = (nxt, (BOTTOM,))
                        if node not in states:
                            states.append(node)
                        node = nxt
                    if node not in states:
                        states.append(node)
                    accepting.add(node)
    return DPDA(states, digits + ops + ("(", ")", "=") + extra, cells, t, "start",
                accepting=sorted(accepting), name=name)


# --- an independent parser -----------------------------------------------------------------------
def _parse(s: tuple, i: int, leaves: set, ops: tuple):
    """Parse E → d | -d | ( d ) | ( -d ) | ( E op E ) at s[i:]: (tree, next index) or None. A tree
    is ("leaf", symbol, negated) or (op, left, right); only a bare d or -d may stand alone in
    brackets, so ( ( d ) ) is not an expression."""
    if i < len(s) and s[i] in leaves:
        return ("leaf", s[i], False), i + 1
    if i + 1 < len(s) and s[i] == "-" and s[i + 1] in leaves:
        return ("leaf", s[i + 1], True), i + 2
    if i < len(s) and s[i] == "(":
        inner = _parse(s, i + 1, leaves, ops)
        if inner is None:
            return None
        left, j = inner
        if left[0] == "leaf" and s[i + 1] != "(" and j < len(s) and s[j] == ")":
            return left, j + 1
        if j < len(s) and s[j] in ops:
            right = _parse(s, j + 1, leaves, ops)
            if right is not None and right[1] < len(s) and s[right[1]] == ")":
                return (s[j], left, right[0]), right[1] + 1
    return None


def _evaluate(tree, m: int, x: int | None = None) -> int:
    if tree[0] == "leaf":
        v = x if tree[1] == UNKNOWN else int(tree[1])
        return -v % m if tree[2] else v % m
    return _ev(tree[0], _evaluate(tree[1], m, x), _evaluate(tree[2], m, x), m)


def _unknowns(tree) -> int:
    if tree[0] == "leaf":
        return int(tree[1] == UNKNOWN)
    return _unknowns(tree[1]) + _unknowns(tree[2])


def _split(s: tuple, leaves: set, ops: tuple):
    """(tree, rest after '=') when s is E = rest for an expression E, else None."""
    if "=" not in s:
        return None
    i = s.index("=")
    parsed = _parse(s[:i], 0, leaves, ops)
    if parsed is None or parsed[1] != i:
        return None
    return parsed[0], s[i + 1:]


def _expression(rng, length: int, digits: tuple, ops: tuple) -> tuple:
    """An expression of exactly `length` ≥ 1 symbols, as the paper's generator draws them: a leaf
    d, -d, (d), (-d) for lengths 1–4, else ( E op E ) split at a uniform point."""
    if length <= 4:
        d = digits[int(rng.integers(len(digits)))]
        return {1: (d,), 2: ("-", d), 3: ("(", d, ")"), 4: ("(", "-", d, ")")}[length]
    left = int(rng.integers(1, length - 3))
    op = ops[int(rng.integers(len(ops)))]
    return (("(",) + _expression(rng, left, digits, ops) + (op,)
            + _expression(rng, length - 3 - left, digits, ops) + (")",))


# --- Modular Arithmetic (brackets) ---------------------------------------------------------------
def modular_arithmetic_brackets_machine(modulus: int = MODULUS, mult: bool = False) -> DPDA:
    """Delétang et al. (2023), appendix, "Modular Arithmetic" (DCF): E = r, member iff r is the
    value of the bracketed expression E modulo `modulus` (see the module docstring). Real-time
    DPDA."""
    m, ops = _check(modulus, mult)
    digits = tuple(str(i) for i in range(m))
    return _expression_dpda(
        digits, ops, lambda d, neg: -int(d) % m if neg else int(d),
        lambda op, u, v: _ev(op, u, v, m), lambda v: {(str(v),)}, (),
        "modular_arithmetic_brackets")


def modular_arithmetic_brackets_reference(string: Sequence, modulus: int = MODULUS,
                                          mult: bool = False) -> bool:
    """Parse E (recursive descent), evaluate it and compare with the symbol after ``=``."""
    m, ops = _check(modulus, mult)
    split = _split(tuple(string), {str(i) for i in range(m)}, ops)
    return split is not None and split[1] == (str(_evaluate(split[0], m)),)


def modular_arithmetic_brackets_sampler(n: int, lengths, rng=None, modulus: int = MODULUS,
                                        mult: bool = False) -> list:
    """E = r with E drawn as by the paper's generator (length L - 2 ≥ 1) and r its value."""
    rng = check_rng(rng)
    m, ops = _check(modulus, mult)
    digits = tuple(str(i) for i in range(m))
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L < 3:
            raise InputError(f"strings E = r have length ≥ 3; got {L}")
        e = _expression(rng, L - 2, digits, ops)
        tree = _parse(e, 0, set(digits), ops)[0]
        out.append(e + ("=", str(_evaluate(tree, m))))
    return out


# --- Solve Equation ------------------------------------------------------------------------------
def solve_equation_machine(modulus: int = MODULUS, mult: bool = False) -> DPDA:
    """Delétang et al. (2023), appendix, "Solve Equation" (DCF): E = v # s where E has exactly
    one unknown x in place of a digit; member iff E with s for x has value v modulo `modulus`.
    Real-time DPDA whose values are (a, c, has_x) for a·x + c (see the module docstring)."""
    m, ops = _check(modulus, mult)
    digits = tuple(str(i) for i in range(m))

    def leaf(d, neg):
        sign = -1 if neg else 1
        return (sign % m, 0, True) if d == UNKNOWN else (0, sign * int(d) % m, False)

    def combine(op, u, v):
        if u[2] and v[2]:
            return None  # a second x
        if op == "*":
            return ((u[0] * v[1] + v[0] * u[1]) % m, u[1] * v[1] % m, u[2] or v[2])
        return (_ev(op, u[0], v[0], m), _ev(op, u[1], v[1], m), u[2] or v[2])

    def tails(v):
        if not v[2]:
            return set()
        return {(str((v[0] * s + v[1]) % m), ANSWER, str(s)) for s in range(m)}

    return _expression_dpda(digits + (UNKNOWN,), ops, leaf, combine, tails, (ANSWER,),
                            "solve_equation")


def solve_equation_reference(string: Sequence, modulus: int = MODULUS, mult: bool = False
                             ) -> bool:
    """Parse E, check it has one x, substitute s and evaluate."""
    m, ops = _check(modulus, mult)
    digits = {str(i) for i in range(m)}
    split = _split(tuple(string), digits | {UNKNOWN}, ops)
    if split is None:
        return False
    tree, rest = split
    if _unknowns(tree) != 1 or len(rest) != 3 or rest[1] != ANSWER or rest[2] not in digits \
            or rest[0] not in digits:
        return False
    return _evaluate(tree, m, int(rest[2])) == int(rest[0])


def solve_equation_sampler(n: int, lengths, rng=None, modulus: int = MODULUS,
                           mult: bool = False) -> list:
    """As the paper: an expression of length L - 4 ≥ 1 in which one digit (uniformly chosen among
    its digits) becomes x; then = v # s with s the replaced digit and v the value."""
    rng = check_rng(rng)
    m, ops = _check(modulus, mult)
    digits = tuple(str(i) for i in range(m))
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L < 5:
            raise InputError(f"strings E = v # s have length ≥ 5; got {L}")
        e = _expression(rng, L - 4, digits, ops)
        spots = [i for i, a in enumerate(e) if a in digits]
        i = spots[int(rng.integers(len(spots)))]
        tree = _parse(e, 0, set(digits), ops)[0]
        out.append(e[:i] + (UNKNOWN,) + e[i + 1:]
                   + ("=", str(_evaluate(tree, m)), ANSWER, e[i]))
    return out


__all__ = [
    "ANSWER", "MODULUS", "UNKNOWN",
    "modular_arithmetic_brackets_machine", "modular_arithmetic_brackets_reference",
    "modular_arithmetic_brackets_sampler",
    "solve_equation_machine", "solve_equation_reference", "solve_equation_sampler",
]
