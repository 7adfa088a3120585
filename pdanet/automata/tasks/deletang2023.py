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
once. (Stack Manipulation is in `butoi2024`.)

Sequence-to-sequence tasks, in the paper's form: the model reads the input w and then one "empty"
token per output position, and the output is read off those positions. pdanet writes this as the
delayed-output form w b^|f(w)| of Hao et al. (2018) §2.3 (b the blank ``#``): each step emits one
symbol — the blank while w is read, then f(w) one symbol per blank — and a string of any other
shape is outside the domain (reference None, machine blocks or rejects). Over {0, 1} by default,
as in the paper:

- ``reverse_string`` (DCF): w -> w^R, a real-time DPDT.
- ``duplicate_string`` (CS): w -> w w, a real-time transducer with one queue.
- ``odds_first`` (CS): a1 … an -> a1 a3 … a2 a4 …, a real-time transducer with one queue.
- ``marked_copy``: w # -> w, the copy language w # w of Butoi et al. (2025) as a transduction,
  w # _^|w| -> _^(|w|+1) w (blank ``_``, distinct from the marker), with one queue.

Missing Duplicate (CS; w w with one symbol hidden -> the hidden symbol) is not here: its one
output comes one step after the input ends and depends on where the middle of the input is,
known only then, so it needs random access to the stored input at the last step; pdanet has no
real-time machine with one stack or queue for it (with a bound on the length it is finite-state).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.pda import DPDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.store import StoreTransducer
from pdanet.automata.tasks.hao2018 import reversal_machine
from pdanet.automata.tasks.sampling import check_alphabet, check_rng, draw_lengths
from pdanet.automata.tasks.task import BLANK
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
                for tail in sorted(ends):         # a fixed state order
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


# --- sequence-to-sequence tasks ------------------------------------------------------------------
# Delétang et al. (2023) feed the input w, then one "empty" token per output position, and read
# the output off those positions (their `make_model_with_empty_targets`). pdanet writes that as
# the delayed-output form w b^|f(w)| (b the blank): each step emits one symbol, the blank while w
# is read and then f(w), one symbol per blank.
BITS = ("0", "1")
COPY_MARK = "#"
COPY_BLANK = "_"


def _symbols(alphabet: Any, reserved: Sequence[Hashable]) -> tuple:
    syms = check_alphabet(alphabet, reserved)
    if not syms:
        raise InputError("the alphabet must have at least one symbol")
    if len(set(reserved)) != len(reserved):
        raise InputError(f"the marker and the blank must differ, got {tuple(reserved)!r}")
    return syms


def _seq2seq_reference(string: Sequence, syms: tuple, blank: Hashable,
                       f: Callable[[tuple], tuple], marker: Hashable | None = None
                       ) -> tuple | None:
    """Per-step outputs of w [marker] blank^|f(w)| -> blank^(|w| [+1]) f(w); None off the
    domain (w over `syms`, then the marker when one is given, then exactly |f(w)| blanks)."""
    s = tuple(string)
    n = 0
    while n < len(s) and s[n] in syms:
        n += 1
    w, rest = s[:n], s[n:]
    if marker is not None:
        if not rest or rest[0] != marker:
            return None
        rest = rest[1:]
    y = f(w)
    if rest != (blank,) * len(y):
        return None
    return (blank,) * (len(s) - len(y)) + y


def _seq2seq_sampler(n: int, lengths, rng, syms: tuple, blank: Hashable, ratio: int,
                     what: str, marker: Hashable | None = None) -> list:
    """w [marker] blank^(|f(w)|) with w uniform, |f(w)| = (ratio - 1)·|w|; lengths are totals."""
    rng = check_rng(rng)
    extra = 0 if marker is None else 1
    out = []
    for L in draw_lengths(n, lengths, rng):
        if (L - extra) % ratio or L < extra:
            raise InputError(f"strings {what} have lengths ≡ {extra} (mod {ratio}); {L} is not")
        k = (L - extra) // ratio
        w = tuple(syms[i] for i in rng.integers(0, len(syms), size=k))
        out.append(w + ((marker,) if marker is not None else ()) + (blank,) * (L - extra - k))
    return out


def _queue_transducer(syms: tuple, blank: Hashable, trans: dict, states: Sequence,
                      store: Sequence, name: str, accepting: Sequence, marker=None):
    return StoreTransducer("queue", states, syms + ((marker,) if marker is not None else ())
                           + (blank,), syms + (blank,), store, trans, "start",
                           accepting=accepting, name=name)


# Reverse String (DCF) ----------------------------------------------------------------------------
def reverse_string_machine(alphabet: Any = BITS, blank: str = BLANK) -> DPDT:
    """Delétang et al. (2023), appendix, "Reverse String" (DCF): a1…an -> an…a1, over {0, 1} in
    the paper, in the delayed-output form w #^|w| -> #^|w| w^R. The real-time DPDT of Hao et al.
    (2018) Fig. 3 (`hao2018.reversal_machine`): push w, then pop one symbol per blank; domain
    exactly w #^|w|. (Compiles to ``stack_rnn``.)"""
    _symbols(alphabet, (blank,))
    return reversal_machine(alphabet, blank, name="reverse_string")


def reverse_string_reference(string: Sequence, alphabet: Any = BITS, blank: str = BLANK):
    """#^|w| w^R for w #^|w| (w read backwards, written from the task's text), else None."""
    syms = _symbols(alphabet, (blank,))
    return _seq2seq_reference(string, syms, blank, lambda w: tuple(w[i] for i in
                                                                   range(len(w) - 1, -1, -1)))


def reverse_string_sampler(n: int, lengths, rng=None, alphabet: Any = BITS, blank: str = BLANK):
    """w #^|w| with w uniform over the alphabet; total lengths are even."""
    syms = _symbols(alphabet, (blank,))
    return _seq2seq_sampler(n, lengths, rng, syms, blank, 2, "w #^|w|")


# Duplicate String (CS) ---------------------------------------------------------------------------
def duplicate_string_machine(alphabet: Any = BITS, blank: str = BLANK) -> StoreTransducer:
    """Delétang et al. (2023), appendix, "Duplicate String" (CS): a1…an -> a1…an a1…an, in the
    delayed-output form w #^2|w| -> #^|w| w w. A real-time transducer with one queue (no
    pushdown machine computes it): w is enqueued as read; the first pass dequeues and emits each
    symbol and re-enqueues it marked ("2", a), one step late — the state holds the symbol just
    emitted — so that when the front turns out to be a marked symbol the held one is known to be
    the last, and is enqueued as ("last", a); the second pass dequeues and emits the marked
    symbols and stops at ("last", a). Domain exactly w #^2|w| (accepting: ``start``, ``done``)."""
    syms = _symbols(alphabet, (blank,))
    t: dict = {}
    store = syms + tuple(("2", a) for a in syms) + tuple(("last", a) for a in syms)
    for x in syms:
        t[("start", x, BOTTOM)] = ("read", blank, ("push", x))
        for s in syms + (BOTTOM,):
            t[("read", x, s)] = ("read", blank, ("push", x))
    for a in syms:
        t[("read", blank, a)] = (("pass1", a), a, "pop")
        for h in syms:
            t[(("pass1", h), blank, a)] = (("pass1", a), a, ("replace", ("2", h)))
            t[(("pass1", h), blank, ("2", a))] = ("pass2", a, ("replace", ("last", h)))
        t[(("pass1", a), blank, BOTTOM)] = ("done", a, "noop")  # |w| = 1
        t[("pass2", blank, ("2", a))] = ("pass2", a, "pop")
        t[("pass2", blank, ("last", a))] = ("done", a, "pop")
    states = ("start", "read", "pass2", "done") + tuple(("pass1", a) for a in syms)
    return _queue_transducer(syms, blank, t, states, store, "duplicate_string",
                             ("start", "done"))


def duplicate_string_reference(string: Sequence, alphabet: Any = BITS, blank: str = BLANK):
    """#^|w| w w for w #^2|w|, else None."""
    syms = _symbols(alphabet, (blank,))
    return _seq2seq_reference(string, syms, blank, lambda w: w + w)


def duplicate_string_sampler(n: int, lengths, rng=None, alphabet: Any = BITS,
                             blank: str = BLANK):
    """w #^2|w| with w uniform; total lengths are multiples of 3."""
    syms = _symbols(alphabet, (blank,))
    return _seq2seq_sampler(n, lengths, rng, syms, blank, 3, "w #^2|w|")


# Odds First (CS) ---------------------------------------------------------------------------------
def odds_first_machine(alphabet: Any = BITS, blank: str = BLANK) -> StoreTransducer:
    """Delétang et al. (2023), appendix, "Odds First" (CS): a1 a2 … an -> a1 a3 a5 … a2 a4 a6 …
    (the symbols at odd positions, counted from 1, then those at even positions), in the
    delayed-output form w #^|w| -> #^|w| odds(w) evens(w). The paper's text and its examples
    (00110101 -> 0100 0111, 110 -> 10 1) fix this order; the sampler of the paper's released code
    concatenates the 0-based odd positions first (a2 a4 … a1 a3 …), the opposite order — we
    follow the text.

    A real-time transducer with one queue: w is enqueued in pairs (a_{2i-1}, a_{2i}) (the state
    holds a_{2i-1} until its partner comes; for odd n it still holds a_n at the first blank). The
    odds phase dequeues a pair, emits its first symbol and re-enqueues its second as ("even", a),
    one step late (the state holds it) so that the last even symbol can be enqueued as
    ("last", a) when the front stops being a pair; for odd n the held a_n is emitted at that step.
    The evens phase dequeues and emits until ("last", a). Domain exactly w #^|w|."""
    syms = _symbols(alphabet, (blank,))
    pairs = tuple((a, b) for a in syms for b in syms)
    store = pairs + tuple(("even", a) for a in syms) + tuple(("last", a) for a in syms)
    t: dict = {}
    G = store + (BOTTOM,)
    held = (None,) + syms
    for s in G:
        for x in syms:
            t[("start", x, s)] = (("read", x), blank, "noop")
            t[(("read", None), x, s)] = (("read", x), blank, "noop")
            for y in syms:
                t[(("read", y), x, s)] = (("read", None), blank, ("push", (y, x)))
    for z in held:
        for a, b in pairs:  # the first blank: the first odd symbol
            t[(("read", z), blank, (a, b))] = (("odds", z, b), a, "pop")
            for h in syms:
                t[(("odds", z, h), blank, (a, b))] = (("odds", z, b), a, ("replace", ("even", h)))
        for h in syms:
            for c in syms:  # no pair left
                if z is None:
                    t[(("odds", z, h), blank, ("even", c))] = ("evens", c,
                                                               ("replace", ("last", h)))
                else:
                    t[(("odds", z, h), blank, ("even", c))] = ("evens", z, ("push", ("last", h)))
            if z is None:
                t[(("odds", z, h), blank, BOTTOM)] = ("done", h, "noop")
            else:
                t[(("odds", z, h), blank, BOTTOM)] = ("evens", z, ("push", ("last", h)))
    for z in syms:
        t[(("read", z), blank, BOTTOM)] = ("done", z, "noop")  # |w| = 1
    for c in syms:
        t[("evens", blank, ("even", c))] = ("evens", c, "pop")
        t[("evens", blank, ("last", c))] = ("done", c, "pop")
    states = (("start", "evens", "done") + tuple(("read", z) for z in held)
              + tuple(("odds", z, h) for z in held for h in syms))
    return _queue_transducer(syms, blank, t, states, store, "odds_first", ("start", "done"))


def odds_first_reference(string: Sequence, alphabet: Any = BITS, blank: str = BLANK):
    """#^|w| a1 a3 … a2 a4 … for w = a1 … an followed by #^|w|, else None."""
    syms = _symbols(alphabet, (blank,))

    def odds_first(w: tuple) -> tuple:
        odd = [w[i - 1] for i in range(1, len(w) + 1) if i % 2 == 1]
        even = [w[i - 1] for i in range(1, len(w) + 1) if i % 2 == 0]
        return tuple(odd + even)

    return _seq2seq_reference(string, syms, blank, odds_first)


def odds_first_sampler(n: int, lengths, rng=None, alphabet: Any = BITS, blank: str = BLANK):
    """w #^|w| with w uniform; total lengths are even."""
    syms = _symbols(alphabet, (blank,))
    return _seq2seq_sampler(n, lengths, rng, syms, blank, 2, "w #^|w|")


# Marked Copy -------------------------------------------------------------------------------------
def marked_copy_machine(alphabet: Any = BITS, marker: str = COPY_MARK,
                        blank: str = COPY_BLANK) -> StoreTransducer:
    """The copy language w # w (Butoi et al. 2025, Table 1 "Marked Copy"; the copy task of
    Delétang et al. 2023) as a transduction: w # -> w, in the delayed-output form
    w # _^|w| -> _^(|w|+1) w — the marker ends the input, then each blank ``_`` asks for the next
    symbol of the copy (the blank differs from the marker here, so that the input prefix w # and
    the outputs after it spell w # w). A real-time transducer with one queue: w is enqueued one
    step late (the state holds the symbol just read), so that at the marker the held symbol is
    known to be the last and is enqueued as ("last", a); each blank dequeues and emits one symbol
    until ("last", a). Domain exactly w # _^|w|."""
    syms = _symbols(alphabet, (marker, blank))
    store = syms + tuple(("last", a) for a in syms)
    t: dict = {}
    for s in store + (BOTTOM,):
        for x in syms:
            t[("start", x, s)] = (("hold", x), blank, "noop")
            for h in syms:
                t[(("hold", h), x, s)] = (("hold", x), blank, ("push", h))
        for h in syms:
            t[(("hold", h), marker, s)] = ("copy", blank, ("push", ("last", h)))
    t[("start", marker, BOTTOM)] = ("done", blank, "noop")  # w = ε
    for a in syms:
        t[("copy", blank, a)] = ("copy", a, "pop")
        t[("copy", blank, ("last", a))] = ("done", a, "pop")
    states = ("start", "copy", "done") + tuple(("hold", h) for h in syms)
    return _queue_transducer(syms, blank, t, states, store, "marked_copy", ("done",),
                             marker=marker)


def marked_copy_reference(string: Sequence, alphabet: Any = BITS, marker: str = COPY_MARK,
                          blank: str = COPY_BLANK):
    """_^(|w|+1) w for w # _^|w|, else None."""
    syms = _symbols(alphabet, (marker, blank))
    return _seq2seq_reference(string, syms, blank, lambda w: w, marker=marker)


def marked_copy_sampler(n: int, lengths, rng=None, alphabet: Any = BITS,
                        marker: str = COPY_MARK, blank: str = COPY_BLANK):
    """w # _^|w| with w uniform; total lengths are odd."""
    syms = _symbols(alphabet, (marker, blank))
    return _seq2seq_sampler(n, lengths, rng, syms, blank, 2, "w # _^|w|", marker=marker)


__all__ = [
    "ANSWER", "BITS", "COPY_BLANK", "COPY_MARK", "MODULUS", "UNKNOWN",
    "duplicate_string_machine", "duplicate_string_reference", "duplicate_string_sampler",
    "marked_copy_machine", "marked_copy_reference", "marked_copy_sampler",
    "modular_arithmetic_brackets_machine", "modular_arithmetic_brackets_reference",
    "modular_arithmetic_brackets_sampler",
    "odds_first_machine", "odds_first_reference", "odds_first_sampler",
    "reverse_string_machine", "reverse_string_reference", "reverse_string_sampler",
    "solve_equation_machine", "solve_equation_reference", "solve_equation_sampler",
]
