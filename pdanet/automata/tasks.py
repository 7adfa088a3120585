"""The named tasks of the source papers: machines, samplers and independent reference functions.

Each task is a frozen `Task`. ``get(name, **params)`` builds its machine, ``sample(name, n,
lengths, rng, **params)`` draws n strings (tuples of symbols) whose lengths are drawn uniformly
from ``lengths`` (an int or an iterable of ints), and ``reference(name, **params)`` returns a pure
Python function of a string that does not use the machine:

- recognition tasks (``kind == "recognise"``): ``reference(s) -> bool`` (membership);
  Samplers of recognition tasks draw members, except `parity` and `modular_counter`, whose samplers
  draw uniform bit strings (members and non-members alike);
- transduction tasks (``kind == "transduce"``): ``reference(s) -> tuple | None``: the symbol
  emitted by each step (None for a step that emits nothing), or None when s is outside the
  transduction's domain. `apply(machine, s)` gives the machine's answer in the same form.

Strings of the transduction tasks of Hao et al. (2018) and Grefenstette et al. (2015) are written in
the delayed-output form of Hao et al. §2.3: the source w followed by one blank ``#`` per output
symbol still to come, so that the machine reads one symbol and emits one symbol per step.

Where a paper gives no rule probabilities, the defaults here are our own choice and say so.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import Machine
from pdanet.automata.bounded import DyckKM
from pdanet.automata.bounded import dyck as _dyck_km
from pdanet.automata.dfa import DFA
from pdanet.automata.grammar import CFG, PCFG, LengthTable, _check_rng
from pdanet.errors import InputError

BLANK = "#"

PAPERS = {
    "hao2018": "Hao et al. (2018), Context-Free Transductions with Neural Stacks",
    "dusell2021": "DuSell & Chiang (2021), Learning Hierarchical Structures with Differentiable "
                  "Nondeterministic Stacks (Renormalizing NS-RNN)",
    "suzgun2019": "Suzgun et al. (2019), Memory-Augmented Recurrent Neural Networks Can Learn "
                  "Generalized Dyck Languages",
    "grefenstette2015": "Grefenstette et al. (2015), Learning to Transduce with Unbounded Memory",
    "hewitt2020": "Hewitt et al. (2020), RNNs can generate bounded hierarchical languages with "
                  "optimal memory",
    "folklore": "standard finite-state examples",
}


@dataclass(frozen=True)
class Task:
    """A named task: ``machine_factory(**params)`` (may return None when no machine of the library
    computes the task — the description says why), ``sampler(n, lengths, rng, **params)``,
    ``reference(string, **params)``, the paper and section, and a description. ``grammar(**params)``
    is the task's (P)CFG where the paper gives one."""

    name: str
    machine_factory: Callable[..., Machine | None]
    sampler: Callable[..., list]
    reference: Callable[..., Any]
    paper: str
    description: str
    kind: str = "recognise"
    grammar: Callable[..., CFG] | None = None


_REGISTRY: dict[str, Task] = {}


def _register(task: Task) -> Task:
    _REGISTRY[task.name] = task
    return task


def names() -> list[str]:
    """The registered task names, sorted."""
    return sorted(_REGISTRY)


def task(name: str) -> Task:
    """The `Task` called `name`."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(f"no task named {name!r}; known tasks: {', '.join(names())}") from None


def get(name: str, **params) -> Machine:
    """The machine of task `name` built with `params` (every task has a machine by default)."""
    return task(name).machine_factory(**params)


def dyck(k: int = 2, m: int = 3) -> DyckKM:
    """The Dyck-(k, m) generator of Hewitt et al. (2020): k bracket types, depth ≤ m."""
    return _dyck_km(k, m)


def dataset(task_or_machine, n: int, lengths, seed: int | None = None,
            target: str | None = None, **params):
    """A torch Dataset of inputs and learning targets labelled by the machine (see
    `pdanet.learning.data.dataset`)."""
    from pdanet.learning.data import dataset as _dataset

    return _dataset(task_or_machine, n, lengths, seed=seed, target=target, **params)


def sample(name: str, n: int, lengths: int | Iterable[int], rng: Any = None, **params) -> list:
    """n strings of task `name` (tuples of symbols), lengths drawn uniformly from `lengths`."""
    return task(name).sampler(n, lengths, rng, **params)


def reference(name: str, **params) -> Callable[[Any], Any]:
    """The independent reference function of task `name` (see the module docstring)."""
    t = task(name)
    return functools.partial(t.reference, **params) if params else t.reference


def grammar(name: str, **params) -> CFG:
    """The (P)CFG of task `name`."""
    t = task(name)
    if t.grammar is None:
        raise InputError(f"task {name!r} has no grammar")
    return t.grammar(**params)


def apply(machine: Machine, string: Sequence[Hashable]) -> Any:
    """The machine's answer in the form of the reference functions: membership (bool) for
    recognisers and generators; for transducers the per-step outputs (None for a step that emits
    nothing), or None when the string is outside the domain (blocked, or not ending in an
    accepting state when the machine has accepting states)."""
    if machine.output_kind in ("accept", "next_set"):
        return bool(machine.accepts(string))
    config = machine.initial()
    outs = []
    for sym in machine.alphabet.split(string):
        config = machine.step(config, sym)
        if getattr(config, "state", None) is None:
            return None
        outs.append(machine.output(config))
    accepting = getattr(machine, "accepting", None)
    if accepting and config.state not in accepting:
        return None
    return tuple(outs)


# --- helpers ----------------------------------------------------------------------------------------
def _lengths(n: int, lengths: int | Iterable[int], rng: np.random.Generator) -> list[int]:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"the number of strings must be a non-negative integer, got {n!r}")
    if isinstance(lengths, (int, np.integer)):
        choices = [int(lengths)]
    else:
        choices = [int(x) for x in lengths]
    if not choices or min(choices) < 0:
        raise InputError(f"lengths must be non-negative integers, got {lengths!r}")
    return [choices[i] for i in rng.integers(0, len(choices), size=n)]


def _uniform_strings(symbols: Sequence, n: int, lengths, rng) -> list[tuple]:
    rng = _check_rng(rng)
    syms = tuple(symbols)
    return [tuple(syms[i] for i in rng.integers(0, len(syms), size=L))
            for L in _lengths(n, lengths, rng)]


@functools.lru_cache(maxsize=64)
def _table(g: CFG, max_length: int, weighted: bool) -> LengthTable:
    return g.length_table(max_length, weighted)


def _grammar_sampler(g: CFG, n: int, lengths, rng, weighted: bool = True) -> list[tuple]:
    """n strings of exact lengths from `g`, by length-conditioned sampling (PCFG-weighted)."""
    rng = _check_rng(rng)
    ls = _lengths(n, lengths, rng)
    if not ls:
        return []
    top = max(ls)
    table = _table(g, top, weighted)
    bad = sorted({L for L in ls if table._is_zero(table.total(L))})
    if bad:
        raise InputError(f"the grammar {g.name or g!r} has no string of length {bad[0]}; choose "
                         "other lengths")
    return [table.sample(rng, L) for L in ls]


def _check_alphabet(alphabet: Any, reserved: Iterable[Hashable] = ()) -> tuple:
    syms = tuple(Alphabet.of(alphabet))
    for r in reserved:
        if r in syms:
            raise InputError(f"symbol {r!r} is reserved by this task and cannot be in the alphabet")
    return syms


def _vocab(vocab_size: int) -> tuple:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) \
            or vocab_size < 1:
        raise InputError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    return tuple(f"s{i}" for i in range(int(vocab_size)))


def _primed(x: Hashable) -> str:
    """The stack symbol for `x` pushed on an empty stack (marks the bottom-most cell, so a
    real-time machine knows when a pop empties the stack)."""
    return f"{x}'"


# ================================================================================================
# Hao et al. (2018)
# ================================================================================================
def reversal_machine(alphabet: Any = "ab", blank: str = BLANK, name: str = "reversal"):
    """Hao et al. (2018) §3, §4.1 (Fig. 3): the DPDT computing f(w #^|w|) = #^|w| w^R, real-time.

    While reading w it pushes each symbol and emits the blank; on each blank it pops the top and
    emits it. The first symbol of w is pushed as a primed (bottom-most) stack symbol so the machine
    knows when the last one is popped and enters the accepting state ``done`` (domain: exactly
    the strings w #^|w|)."""
    from pdanet.automata.pdt import DPDT

    syms = _check_alphabet(alphabet, (blank,))
    stack = syms + tuple(_primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = ("push", blank, (_primed(x), BOTTOM))
        for s in stack:
            t[("push", x, s)] = ("push", blank, (x, s))
        for q in ("push", "pop"):
            t[(q, blank, x)] = ("pop", x, ())
            t[(q, blank, _primed(x))] = ("done", x, ())
    return DPDT(("start", "push", "pop", "done"), syms + (blank,), syms + (blank,), stack, t,
                "start", accepting=("start", "done"), name=name)


def reversal_reference(string: Sequence, alphabet: Any = "ab", blank: str = BLANK):
    """#^|w| w^R for s = w #^|w| (per-step outputs), else None."""
    syms = set(_check_alphabet(alphabet, (blank,)))
    s = tuple(string)
    if len(s) % 2:
        return None
    h = len(s) // 2
    w, pad = s[:h], s[h:]
    if any(x not in syms for x in w) or any(x != blank for x in pad):
        return None
    return (blank,) * h + tuple(reversed(w))


def reversal_sampler(n: int, lengths, rng=None, alphabet: Any = "ab", blank: str = BLANK):
    """Strings w #^|w| with w uniform over the alphabet; every length must be even."""
    rng = _check_rng(rng)
    syms = _check_alphabet(alphabet, (blank,))
    out = []
    for L in _lengths(n, lengths, rng):
        if L % 2:
            raise InputError(f"strings w #^|w| have even length; {L} is odd")
        w = tuple(syms[i] for i in rng.integers(0, len(syms), size=L // 2))
        out.append(w + (blank,) * (L // 2))
    return out


def reversal_eps_machine(alphabet: Any = "ab", marker: str = BLANK, name: str = "reversal_eps"):
    """Hao et al. (2018) §2.3: string reversal without #-padding, w # -> w^R, as a DPDT with
    ε-moves. While reading w it pushes each symbol and emits nothing; on the end marker it follows
    ε-moves that pop the stack and emit each popped symbol, then (on ⊥) an ε-move to the accepting
    state ``done``. So the step that reads the marker emits all of w^R (output kind "string");
    the domain is exactly the strings w #."""
    from pdanet.automata.pdt import DPDT

    syms = _check_alphabet(alphabet, (marker,))
    t: dict = {}
    for s in syms + (BOTTOM,):
        for x in syms:
            t[("read", x, s)] = ("read", EPSILON, (x, s))
        t[("read", marker, s)] = ("emit", EPSILON, (s,))
    for x in syms:
        t[("emit", EPSILON, x)] = ("emit", x, ())
    t[("emit", EPSILON, BOTTOM)] = ("done", EPSILON, (BOTTOM,))
    return DPDT(("read", "emit", "done"), syms + (marker,), syms, syms, t, "read",
                accepting=("done",), name=name)


def reversal_eps_reference(string: Sequence, alphabet: Any = "ab", marker: str = BLANK):
    """Per-step outputs of w # -> w^R: () for each symbol of w, then w^R; None off the domain."""
    syms = set(_check_alphabet(alphabet, (marker,)))
    s = tuple(string)
    if not s or s[-1] != marker or any(x not in syms for x in s[:-1]):
        return None
    return ((),) * (len(s) - 1) + (tuple(reversed(s[:-1])),)


def reversal_eps_sampler(n: int, lengths, rng=None, alphabet: Any = "ab", marker: str = BLANK):
    """Strings w # with w uniform over the alphabet (total lengths ≥ 1)."""
    rng = _check_rng(rng)
    syms = _check_alphabet(alphabet, (marker,))
    out = []
    for L in _lengths(n, lengths, rng):
        if L < 1:
            raise InputError("strings w # have length ≥ 1")
        out.append(tuple(syms[i] for i in rng.integers(0, len(syms), size=L - 1)) + (marker,))
    return out


def _reversal_task_machine(alphabet: Any = "ab", blank: str = BLANK, epsilon: bool = False):
    """``epsilon=True``: the unpadded w # -> w^R with ε-moves (`reversal_eps_machine`, `blank`
    is its end marker); else the real-time padded DPDT (`reversal_machine`)."""
    if epsilon:
        return reversal_eps_machine(alphabet, blank)
    return reversal_machine(alphabet, blank)


def _reversal_task_sampler(n: int, lengths, rng=None, alphabet: Any = "ab", blank: str = BLANK,
                           epsilon: bool = False):
    if epsilon:
        return reversal_eps_sampler(n, lengths, rng, alphabet, blank)
    return reversal_sampler(n, lengths, rng, alphabet, blank)


def _reversal_task_reference(string: Sequence, alphabet: Any = "ab", blank: str = BLANK,
                             epsilon: bool = False):
    if epsilon:
        return reversal_eps_reference(string, alphabet, blank)
    return reversal_reference(string, alphabet, blank)


_register(Task("reversal", _reversal_task_machine, _reversal_task_sampler,
               _reversal_task_reference, "Hao et al. (2018), §3 and §4.1 (Fig. 3); §2.3",
               "String reversal w #^|w| -> #^|w| w^R as a real-time DPDT; with epsilon=True "
               "the unpadded w # -> w^R with ε-moves (for the buffered model).", "transduce"))


def cumulative_xor_machine() -> DFA:
    """Hao et al. (2018) §4.2 (Fig. 4 left): emits the XOR of all bits read so far (Mealy)."""
    return DFA((0, 1), "01", {(q, a): q ^ int(a) for q in (0, 1) for a in "01"}, 0,
               accepting=(0, 1), outputs={(q, a): str(q ^ int(a)) for q in (0, 1) for a in "01"},
               output_alphabet="01", name="cumulative_xor")


def cumulative_xor_reference(string: Sequence) -> tuple:
    out, acc = [], 0
    for a in string:
        acc ^= int(a)
        out.append(str(acc))
    return tuple(out)


def delayed_xor_machine() -> DFA:
    """Hao et al. (2018) §4.2: emits the XOR of all bits read before the current one (Mealy)."""
    return DFA((0, 1), "01", {(q, a): q ^ int(a) for q in (0, 1) for a in "01"}, 0,
               accepting=(0, 1), outputs={(q, a): str(q) for q in (0, 1) for a in "01"},
               output_alphabet="01", name="delayed_xor")


def delayed_xor_reference(string: Sequence) -> tuple:
    out, acc = [], 0
    for a in string:
        out.append(str(acc))
        acc ^= int(a)
    return tuple(out)


def _bits_sampler(n: int, lengths, rng=None) -> list:
    return _uniform_strings("01", n, lengths, rng)


_register(Task("cumulative_xor", cumulative_xor_machine, _bits_sampler, cumulative_xor_reference,
               "Hao et al. (2018), §4.2 (Fig. 4 left)",
               "After each bit, the XOR of all bits so far (Mealy DFA).", "transduce"))
_register(Task("delayed_xor", delayed_xor_machine, _bits_sampler, delayed_xor_reference,
               "Hao et al. (2018), §4.2",
               "After each bit, the XOR of the bits before it (Mealy DFA).", "transduce"))

_PAREN_OPEN = {"(": ")", "[": "]"}


def parenthesis_grammar() -> PCFG:
    """Hao et al. (2018) §4.3: S → S T | T S | T; T → ( T ) | ( ) | [ T ] | [ ].
    Rule probabilities are not given in the paper; ours are uniform per nonterminal."""
    third, quarter = Fraction(1, 3), Fraction(1, 4)
    return PCFG(("S", "T"), "()[]", {
        ("S", ("S", "T")): third, ("S", ("T", "S")): third, ("S", ("T",)): third,
        ("T", ("(", "T", ")")): quarter, ("T", ("(", ")")): quarter,
        ("T", ("[", "T", "]")): quarter, ("T", ("[", "]")): quarter}, "S", name="parenthesis")


def parenthesis_prediction_machine():
    """Hao et al. (2018) §4.3 (Fig. 4 right): after each symbol, predict the next symbol where it
    is a closing bracket — the partner of the open bracket on top of the stack — and emit nothing
    when the stack is empty. Real-time DPDT: each stack symbol records its bracket and the bracket
    below it (``$`` for none), so that after a pop the machine knows the new top. Domain: the
    language of the grammar (non-empty well-nested strings over ( ) [ ])."""
    from pdanet.automata.pdt import DPDT

    opens = tuple(_PAREN_OPEN)
    below = opens + ("$",)
    stack = tuple(o + b for o in opens for b in below)
    t: dict = {}
    for o in opens:
        for q in ("start", "out"):
            t[(q, o, BOTTOM)] = ("in", _PAREN_OPEN[o], (o + "$", BOTTOM))
        for s in stack:
            t[("in", o, s)] = ("in", _PAREN_OPEN[o], (o + s[0], s))
        for b in below:
            if b == "$":
                t[("in", _PAREN_OPEN[o], o + b)] = ("out", EPSILON, ())
            else:
                t[("in", _PAREN_OPEN[o], o + b)] = ("in", _PAREN_OPEN[b], ())
    return DPDT(("start", "in", "out"), "()[]", ")]", stack, t, "start", accepting=("out",),
                name="parenthesis_prediction")


def parenthesis_prediction_reference(string: Sequence):
    stack: list = []
    out = []
    closes = {v: k for k, v in _PAREN_OPEN.items()}
    for x in string:
        if x in _PAREN_OPEN:
            stack.append(x)
        elif x in closes:
            if not stack or stack[-1] != closes[x]:
                return None
            stack.pop()
        else:
            return None
        out.append(_PAREN_OPEN[stack[-1]] if stack else None)
    if stack or not out:
        return None
    return tuple(out)


_register(Task("parenthesis_prediction", parenthesis_prediction_machine,
               lambda n, lengths, rng=None: _grammar_sampler(parenthesis_grammar(), n, lengths, rng),
               parenthesis_prediction_reference, "Hao et al. (2018), §4.3 (Fig. 4 right)",
               "Predict the closing bracket that may come next (DPDT).", "transduce",
               parenthesis_grammar))

_BOOL_OPS = {"∨": lambda a, b: a or b, "∧": lambda a, b: a and b}


def boolean_grammar() -> PCFG:
    """Hao et al. (2018) §4.4: S → S S ∨ | S S ∧ | T | F (reverse Polish notation).
    Rule probabilities are not given in the paper; ours are uniform."""
    q = Fraction(1, 4)
    return PCFG(("S",), ("T", "F", "∨", "∧"), {
        ("S", ("S", "S", "∨")): q, ("S", ("S", "S", "∧")): q, ("S", ("T",)): q,
        ("S", ("F",)): q}, "S", name="boolean_formula")


def boolean_formula_machine():
    """Hao et al. (2018) §4.4: after each symbol, the truth value of the longest sub-formula
    ending there. Real-time DPDT: the finite control holds the top value of the evaluation stack
    (states T/F, or T0/F0 when nothing is below it) and the stack holds the values below it; an
    operator combines the state's value with the popped one. Accepting: T0, F0 (one formula)."""
    from pdanet.automata.pdt import DPDT

    vals = ("T", "F")
    stack = vals + tuple(_primed(v) for v in vals)
    t: dict = {}
    for x in vals:
        t[("start", x, BOTTOM)] = (x + "0", x, (BOTTOM,))
        for v in vals:
            t[(v + "0", x, BOTTOM)] = (x, x, (_primed(v), BOTTOM))
            for s in stack:
                t[(v, x, s)] = (x, x, (v, s))
    for op, f in _BOOL_OPS.items():
        for v in vals:
            for s in vals:
                r = "T" if f(s == "T", v == "T") else "F"
                t[(v, op, s)] = (r, r, ())
                t[(v, op, _primed(s))] = (r + "0", r, ())
    return DPDT(("start", "T0", "F0", "T", "F"), ("T", "F", "∨", "∧"), vals, stack, t, "start",
                accepting=("T0", "F0"), name="boolean_formula")


def boolean_formula_reference(string: Sequence):
    """Recursive evaluation of the sub-formula ending at each position (None if s is not one
    formula)."""
    s = tuple(string)

    def ending_at(t: int):  # -> (value, start) or None
        if t < 0:
            return None
        x = s[t]
        if x in ("T", "F"):
            return (x == "T", t)
        if x not in _BOOL_OPS:
            return None
        right = ending_at(t - 1)
        if right is None:
            return None
        left = ending_at(right[1] - 1)
        if left is None:
            return None
        return (_BOOL_OPS[x](left[0], right[0]), left[1])

    if not s:
        return None
    whole = ending_at(len(s) - 1)
    if whole is None or whole[1] != 0:
        return None
    out = []
    for t in range(len(s)):
        r = ending_at(t)
        if r is None:
            return None
        out.append("T" if r[0] else "F")
    return tuple(out)


_register(Task("boolean_formula", boolean_formula_machine,
               lambda n, lengths, rng=None: _grammar_sampler(boolean_grammar(), n, lengths, rng),
               boolean_formula_reference, "Hao et al. (2018), §4.4",
               "Evaluate a boolean formula in reverse Polish notation at every symbol (DPDT).",
               "transduce", boolean_grammar))


def agreement_grammar(p_base: Any = Fraction(3, 5), p_pp: Any = Fraction(1, 5)) -> PCFG:
    """Hao et al. (2018) §4.5, the subject–auxiliary agreement grammar, read as

        S → NP_sing has | NP_plur have          NP → NP_sing | NP_plur
        NP_sing → the lobster | NP_sing PP | NP_sing Rel_sing      (likewise NP_plur, lobsters)
        PP → in NP        Rel_sing → that has VP | Rel_obj     Rel_plur → that have VP | Rel_obj
        Rel_obj → that NP_sing has devoured | that NP_plur have devoured
        VP → slept | devoured NP

    (the text of the paper available to us drops a symbol in the NP rules; "NP_sing (PP |
    Rel_sing)" is read as left recursion). Words are symbols. Probabilities are not given in the
    paper: NP_x → the lobster(s) with `p_base`, → NP_x PP with `p_pp`, the rest to NP_x Rel_x;
    every other choice is uniform."""
    p_base, p_pp = Fraction(p_base), Fraction(p_pp)
    p_rel = 1 - p_base - p_pp
    h = Fraction(1, 2)
    rules: dict = {
        ("S", ("NP_sing", "has")): h, ("S", ("NP_plur", "have")): h,
        ("NP", ("NP_sing",)): h, ("NP", ("NP_plur",)): h,
        ("PP", ("in", "NP")): 1,
        ("Rel_sing", ("that", "has", "VP")): h, ("Rel_sing", ("Rel_obj",)): h,
        ("Rel_plur", ("that", "have", "VP")): h, ("Rel_plur", ("Rel_obj",)): h,
        ("Rel_obj", ("that", "NP_sing", "has", "devoured")): h,
        ("Rel_obj", ("that", "NP_plur", "have", "devoured")): h,
        ("VP", ("slept",)): h, ("VP", ("devoured", "NP")): h,
    }
    for num, noun in (("sing", "lobster"), ("plur", "lobsters")):
        np_ = f"NP_{num}"
        rules[(np_, ("the", noun))] = p_base
        rules[(np_, (np_, "PP"))] = p_pp
        rules[(np_, (np_, f"Rel_{num}"))] = p_rel
    return PCFG(("S", "NP", "NP_sing", "NP_plur", "PP", "Rel_sing", "Rel_plur", "Rel_obj", "VP"),
                AGREEMENT_WORDS, rules, "S", name="agreement")


AGREEMENT_WORDS = ("the", "lobster", "lobsters", "in", "that", "has", "have", "devoured", "slept")


def agreement_right_recursive() -> CFG:
    """The same language as `agreement_grammar` without left recursion (NP_x → the lobster(s) M_x,
    M_x → PP M_x | Rel_x M_x | ε), so that its PDA has finite ε-closures."""
    return CFG.parse("""
        S -> NP_sing has | NP_plur have
        NP -> NP_sing | NP_plur
        NP_sing -> the lobster M_sing
        NP_plur -> the lobsters M_plur
        M_sing -> PP M_sing | Rel_sing M_sing | ε
        M_plur -> PP M_plur | Rel_plur M_plur | ε
        PP -> in NP
        Rel_sing -> that has VP | Rel_obj
        Rel_plur -> that have VP | Rel_obj
        Rel_obj -> that NP_sing has devoured | that NP_plur have devoured
        VP -> slept | devoured NP
    """, name="agreement")


def agreement_machine():
    """Hao et al. (2018) §4.5: a recogniser of the agreement language — the PDA of an equivalent
    grammar without left recursion (`agreement_right_recursive`). Nondeterministic: it guesses
    where each modifier attaches."""
    return agreement_right_recursive().to_pda(name="agreement")


def agreement_reference(string: Sequence) -> bool:
    """Membership in the paper's (left-recursive) grammar, by the chart parser."""
    s = tuple(string)
    if any(w not in AGREEMENT_WORDS for w in s):
        return False
    return _agreement_cfg().generates(s)


@functools.lru_cache(maxsize=1)
def _agreement_cfg() -> CFG:
    return agreement_grammar().cfg()


_register(Task("agreement", agreement_machine,
               lambda n, lengths, rng=None, **kw: _grammar_sampler(agreement_grammar(**kw), n,
                                                                  lengths, rng),
               agreement_reference, "Hao et al. (2018), §4.5",
               "Subject–auxiliary agreement sentences (PCFG; recognised by a PDA).", "recognise",
               agreement_grammar))


# ================================================================================================
# DuSell & Chiang (2021) and Suzgun et al. (2019): palindromes and Dyck languages
# ================================================================================================
def _marked_palindrome(syms: tuple, marker: str, phi: dict, name: str):
    """Real-time DPDA for { w marker phi(w^R) }: push w (the first symbol primed), then pop one
    symbol per matching phi-image; accept when the primed symbol is popped (or at once for w = ε)."""
    from pdanet.automata.pda import DPDA

    stack = syms + tuple(_primed(x) for x in syms)
    t: dict = {("start", marker, BOTTOM): ("done", (BOTTOM,))}
    for x in syms:
        t[("start", x, BOTTOM)] = ("push", (_primed(x), BOTTOM))
        for s in stack:
            t[("push", x, s)] = ("push", (x, s))
        t[("push", marker, x)] = ("pop", (x,))
        t[("push", marker, _primed(x))] = ("pop", (_primed(x),))
        t[("pop", phi[x], x)] = ("pop", ())
        t[("pop", phi[x], _primed(x))] = ("done", ())
    input_syms = syms + (marker,) + tuple(v for v in dict.fromkeys(phi.values()) if v not in syms)
    return DPDA(("start", "push", "pop", "done"), input_syms, stack, t, "start",
                accepting=("done",), name=name)


def marked_reversal_machine(alphabet: Any = "01", marker: str = BLANK):
    """DuSell & Chiang (2021) §4 "Marked reversal"; Suzgun et al. (2019) §6.2: { w # w^R }.
    Real-time DPDA."""
    syms = _check_alphabet(alphabet, (marker,))
    return _marked_palindrome(syms, marker, {x: x for x in syms}, "marked_reversal")


def marked_reversal_reference(string: Sequence, alphabet: Any = "01", marker: str = BLANK) -> bool:
    syms = set(_check_alphabet(alphabet, (marker,)))
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
    syms = _check_alphabet(alphabet, (marker,))
    p_end = Fraction(p_end)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", (marker,))] = p_end
    return PCFG(("S",), syms + (marker,), rules, "S", name="marked_reversal")


def _marked_sampler(n, lengths, rng=None, alphabet: Any = "01", marker: str = BLANK):
    return _grammar_sampler(marked_reversal_grammar(alphabet, marker), n, lengths, rng)


_register(Task("marked_reversal", marked_reversal_machine, _marked_sampler,
               marked_reversal_reference, "DuSell & Chiang (2021), §4",
               "The palindromes w # w^R over {0, 1} (DPDA).", "recognise",
               marked_reversal_grammar))


def w_wr_marked_machine(alphabet: Any = "abc", marker: str = BLANK):
    """Suzgun et al. (2019) §6.2: the palindrome language w # w^R (alias of marked_reversal with
    w over {a, b, c})."""
    return marked_reversal_machine(alphabet, marker)


_register(Task("w_wr_marked", w_wr_marked_machine,
               lambda n, lengths, rng=None, alphabet="abc", marker=BLANK:
               _marked_sampler(n, lengths, rng, alphabet, marker),
               functools.partial(marked_reversal_reference, alphabet="abc"),
               "Suzgun et al. (2019), §6.2",
               "w # w^R over {a, b, c}: alias of marked_reversal (DPDA).", "recognise",
               lambda alphabet="abc", marker=BLANK: marked_reversal_grammar(alphabet, marker)))

_PHI = {"a": "x", "b": "y", "c": "z"}


def w_phi_wr_machine():
    """Suzgun et al. (2019) §6.1: the homomorphic palindromes w # φ(w^R), w ∈ {a, b, c}*, φ maps
    a, b, c to x, y, z. Real-time DPDA."""
    return _marked_palindrome(tuple(_PHI), BLANK, _PHI, "w_phi_wr")


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


_register(Task("w_phi_wr", w_phi_wr_machine,
               lambda n, lengths, rng=None: _grammar_sampler(w_phi_wr_grammar(), n, lengths, rng),
               w_phi_wr_reference, "Suzgun et al. (2019), §6.1",
               "Homomorphic palindromes w # φ(w^R) (DPDA).", "recognise", w_phi_wr_grammar))


def unmarked_reversal_machine(alphabet: Any = "01"):
    """DuSell & Chiang (2021) §4 "Unmarked reversal": { w w^R }. Real-time PDA that guesses the
    middle: reading x with x on top it may pop instead of push."""
    from pdanet.automata.pda import PDA

    syms = _check_alphabet(alphabet)
    stack = syms + tuple(_primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = {("push", (_primed(x), BOTTOM))}
        for s in stack:
            t[("push", x, s)] = {("push", (x, s))}
        t[("push", x, x)].add(("pop", ()))
        t[("push", x, _primed(x))].add(("done", ()))
        t[("pop", x, x)] = {("pop", ())}
        t[("pop", x, _primed(x))] = {("done", ())}
    return PDA(("start", "push", "pop", "done"), syms, stack, t, "start",
               accepting=("start", "done"), name="unmarked_reversal")


def unmarked_reversal_reference(string: Sequence, alphabet: Any = "01") -> bool:
    syms = set(_check_alphabet(alphabet))
    s = tuple(string)
    h = len(s) // 2
    return (len(s) % 2 == 0 and all(x in syms for x in s)
            and s[h:] == tuple(reversed(s[:h])))


def unmarked_reversal_grammar(alphabet: Any = "01", p_end: Any = Fraction(1, 10)) -> PCFG:
    """S → x S x (equally likely) | ε (`p_end`, our choice)."""
    syms = _check_alphabet(alphabet)
    p_end = Fraction(p_end)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", ())] = p_end
    return PCFG(("S",), syms, rules, "S", name="unmarked_reversal")


_register(Task("unmarked_reversal", unmarked_reversal_machine,
               lambda n, lengths, rng=None, alphabet="01":
               _grammar_sampler(unmarked_reversal_grammar(alphabet), n, lengths, rng),
               unmarked_reversal_reference, "DuSell & Chiang (2021), §4",
               "Even palindromes w w^R (PDA + PCFG).", "recognise", unmarked_reversal_grammar))


def padded_reversal_machine(alphabet: Any = "01"):
    """DuSell & Chiang (2021) §4 "Padded reversal": { w a^p w^R : a a symbol, p ≥ 0 }. Real-time
    PDA that guesses the middle (pop instead of push) or the single middle symbol (skip it). As a
    set this is every palindrome; the padding shows in the PCFG's distribution."""
    from pdanet.automata.pda import PDA

    syms = _check_alphabet(alphabet)
    stack = syms + tuple(_primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = {("push", (_primed(x), BOTTOM)), ("done", (BOTTOM,))}
        for s in stack:
            t[("push", x, s)] = {("push", (x, s)), ("pop", (s,))}
        t[("push", x, x)].add(("pop", ()))
        t[("push", x, _primed(x))].add(("done", ()))
        t[("pop", x, x)] = {("pop", ())}
        t[("pop", x, _primed(x))] = {("done", ())}
    return PDA(("start", "push", "pop", "done"), syms, stack, t, "start",
               accepting=("start", "done"), name="padded_reversal")


def padded_reversal_reference(string: Sequence, alphabet: Any = "01") -> bool:
    """Literally: some split s = w a^p w^R."""
    syms = set(_check_alphabet(alphabet))
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
    syms = _check_alphabet(alphabet)
    p_end, p_pad = Fraction(p_end), Fraction(p_pad)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", ("P",))] = p_end
    pads = tuple(("pad", x) for x in syms)
    for x, a in zip(syms, pads):
        rules[("P", (a,))] = Fraction(1, len(syms))
        rules[(a, (x, a))] = p_pad
        rules[(a, ())] = 1 - p_pad
    return PCFG(("S", "P") + pads, syms, rules, "S", name="padded_reversal")


_register(Task("padded_reversal", padded_reversal_machine,
               lambda n, lengths, rng=None, alphabet="01":
               _grammar_sampler(padded_reversal_grammar(alphabet), n, lengths, rng),
               padded_reversal_reference, "DuSell & Chiang (2021), §4",
               "Palindromes w a^p w^R with a padding run in the middle (PDA + PCFG).",
               "recognise", padded_reversal_grammar))


def _brackets(k: int) -> tuple[tuple, tuple]:
    km = DyckKM(k, 1)
    return km.opens, km.closes


def dyck_machine(k: int = 2):
    """A real-time DPDA recognising Dyck-k (well-nested strings over k bracket pairs; the bracket
    symbols are those of `DyckKM`). The bracket pushed on an empty stack is primed, so popping it
    returns to the accepting state ``empty``."""
    from pdanet.automata.pda import DPDA

    opens, closes = _brackets(k)
    stack = opens + tuple(_primed(o) for o in opens)
    t: dict = {}
    for o, c in zip(opens, closes):
        t[("empty", o, BOTTOM)] = ("in", (_primed(o), BOTTOM))
        for s in stack:
            t[("in", o, s)] = ("in", (o, s))
        t[("in", c, o)] = ("in", ())
        t[("in", c, _primed(o))] = ("empty", ())
    return DPDA(("empty", "in"), opens + closes, stack, t, "empty", accepting=("empty",),
                name=f"dyck{k}")


def dyck_reference(string: Sequence, k: int = 2) -> bool:
    opens, closes = _brackets(k)
    partner = dict(zip(closes, opens))
    stack: list = []
    for x in string:
        if x in opens:
            stack.append(x)
        elif x in partner:
            if not stack or stack.pop() != partner[x]:
                return False
        else:
            return False
    return not stack


def dyck_grammar(k: int = 2, p: Any = Fraction(1, 2), q: Any = Fraction(1, 4)) -> PCFG:
    """Suzgun et al. (2019) §5: S → (_i S )_i with probability p/k each | S S with q | ε with
    1 - (p + q); the paper sets p = 1/2, q = 1/4. (Ambiguous: sample it with `sample`.)"""
    opens, closes = _brackets(k)
    p, q = Fraction(p), Fraction(q)
    rules = {("S", (o, "S", c)): p / k for o, c in zip(opens, closes)}
    rules[("S", ("S", "S"))] = q
    rules[("S", ())] = 1 - p - q
    return PCFG(("S",), opens + closes, rules, "S", name=f"dyck{k}")


def dyck_unambiguous_grammar(k: int = 2) -> CFG:
    """S → (_i S )_i S | ε: one derivation per Dyck word, so length-conditioned sampling from it
    is uniform over the Dyck-k words of that length."""
    opens, closes = _brackets(k)
    rules = [("S", (o, "S", c, "S")) for o, c in zip(opens, closes)] + [("S", ())]
    return CFG(("S",), opens + closes, rules, "S", name=f"dyck{k}")


def _dyck_sampler(n, lengths, rng=None, k: int = 2):
    """Uniform over the Dyck-k words of each length (lengths must be even), exactly.

    Every Dyck-k word of length L is a Dyck path with a label in [k] on each of its L/2 up-steps,
    so the words are uniform when the path is uniform and the labels are independent and uniform.
    The path is drawn left to right: from height d with r steps left, of the N(r, d) =
    (d+1)/(r+1)·C(r+1, (r−d)/2) completions (ballot numbers) a fraction
    N(r−1, d+1)/N(r, d) = (d+2)(r−d) / (2r(d+1)) starts with an up-step; that ratio is drawn
    exactly, with integers. Vectorised over the strings of one length: O(L) numpy steps."""
    rng = _check_rng(rng)
    ls = _lengths(n, lengths, rng)
    odd = sorted({L for L in ls if L % 2})
    if odd:
        raise InputError(f"Dyck-{k} has no string of length {odd[0]}; choose even lengths")
    opens, closes = _brackets(k)
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


for _k in range(1, 7):
    _register(Task(f"dyck{_k}", functools.partial(dyck_machine, _k),
                   functools.partial(_dyck_sampler, k=_k), functools.partial(dyck_reference, k=_k),
                   "Suzgun et al. (2019), §5" + ("; DuSell & Chiang (2021), §4" if _k == 2 else ""),
                   f"The Dyck language D_{_k} (DPDA recogniser; PCFG of Suzgun et al. §5).",
                   "recognise", functools.partial(dyck_grammar, _k)))

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


def _hardest_cfl_factory(realtime: bool = False):
    """The grammar's PDA (ε-moves), or with ``realtime=True`` the real-time weighted PDA of
    `pdanet.automata.weighted.hardest_cfl_realtime` (one symbol per step, as the NS-RNN)."""
    if realtime:
        from pdanet.automata.weighted import hardest_cfl_realtime
        return hardest_cfl_realtime()
    return hardest_cfl_machine()


_register(Task("hardest_cfl", _hardest_cfl_factory,
               lambda n, lengths, rng=None: _grammar_sampler(hardest_cfl_grammar(), n, lengths, rng),
               hardest_cfl_reference, "DuSell & Chiang (2021), §4; Greibach (1973)",
               "Greibach's hardest context-free language (PCFG; recognised by a PDA; "
               "realtime=True: a real-time weighted PDA whose runs are the ways to choose each "
               "block's y, for the NS-RNN).",
               "recognise", hardest_cfl_grammar))


# --- string reversal transduction (Suzgun et al. 2019 §7) ------------------------------------------
_register(Task("string_reversal", reversal_machine, reversal_sampler, reversal_reference,
               "Suzgun et al. (2019), §7",
               "w #^|w| -> #^|w| w^R (alias of reversal; real-time DPDT).", "transduce"))


# ================================================================================================
# Grefenstette et al. (2015) §4.1
# ================================================================================================
def sequence_copy_machine(vocab_size: int = 128, max_length: int | None = None,
                          store: str | None = None):
    """Grefenstette et al. (2015) §4.1 "Sequence Copying", in delayed-output form:
    w #^|w| -> #^|w| w. Copying needs a queue, which no pushdown machine has: with ``store``
    ("queue" or "deque") the machine is the store transducer `pdanet.automata.store.sequence_copy`;
    with `max_length` (and no ``store``) it is a Mealy DFA whose states hold the bounded queue
    (Σ_{i ≤ max_length} |V|^i states — small vocabularies only). With neither, the queue
    transducer (``store="queue"``), so ``get("sequence_copy")`` is always a machine."""
    if store is None and max_length is None:
        store = "queue"
    if store is not None:
        from pdanet.automata import store as _store

        return _store.sequence_copy(int(vocab_size), store)
    if max_length is None:
        return None
    vocab = _vocab(vocab_size)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0:
        raise InputError(f"max_length must be a non-negative integer, got {max_length!r}")
    if len(vocab) ** max_length > 100_000:
        raise InputError(f"a copy machine for |V| = {len(vocab)}, max_length = {max_length} has "
                         "too many states; lower them")
    queues = [()]
    frontier = [()]
    for _ in range(max_length):
        frontier = [q + (x,) for q in frontier for x in vocab]
        queues.extend(frontier)
    states = [("read", q) for q in queues] + [("write", q) for q in queues]
    trans, outs = {}, {}
    for q in queues:
        if len(q) < max_length:
            for x in vocab:
                trans[(("read", q), x)] = ("read", q + (x,))
                outs[(("read", q), x)] = BLANK
        if q:
            for phase in ("read", "write"):
                trans[((phase, q), BLANK)] = ("write", q[1:])
                outs[((phase, q), BLANK)] = q[0]
    return DFA(states, vocab + (BLANK,), trans, ("read", ()),
               accepting=(("read", ()), ("write", ())), outputs=outs,
               output_alphabet=vocab + (BLANK,), name="sequence_copy")


def _delayed_reference(string: Sequence, vocab_size: int, f: Callable[[tuple], tuple]):
    vocab = set(_vocab(vocab_size))
    s = tuple(string)
    if len(s) % 2:
        return None
    h = len(s) // 2
    w, pad = s[:h], s[h:]
    if any(x not in vocab for x in w) or any(x != BLANK for x in pad):
        return None
    return (BLANK,) * h + f(w)


def sequence_copy_reference(string: Sequence, vocab_size: int = 128, max_length: int | None = None,
                            store: str | None = None):
    if max_length is not None and len(tuple(string)) > 2 * max_length:
        return None
    return _delayed_reference(string, vocab_size, lambda w: w)


def _delayed_sampler(n, lengths, rng=None, vocab_size: int = 128, max_length: int | None = None,
                     store: str | None = None):
    """w #^|w| with w uniform over the vocabulary (lengths are total lengths, even)."""
    return reversal_sampler(n, lengths, rng, alphabet=_vocab(vocab_size))


_register(Task("sequence_copy", sequence_copy_machine, _delayed_sampler, sequence_copy_reference,
               "Grefenstette et al. (2015), §4.1",
               "w #^|w| -> #^|w| w. Needs a queue: the store transducer (store='queue', the "
               "default, or 'deque'); with max_length, a bounded Mealy DFA instead.",
               "transduce"))


def sequence_reversal_machine(vocab_size: int = 128, store: str | None = None):
    """Grefenstette et al. (2015) §4.1 "Sequence Reversal", in delayed-output form
    w #^|w| -> #^|w| w^R: the reversal DPDT over the vocabulary s0 … s{V-1}; with ``store``
    ("stack" or "deque") the store transducer `pdanet.automata.store.sequence_reversal`."""
    if store is not None:
        from pdanet.automata import store as _store

        return _store.sequence_reversal(int(vocab_size), store)
    return reversal_machine(_vocab(vocab_size), name="sequence_reversal")


_register(Task("sequence_reversal", sequence_reversal_machine, _delayed_sampler,
               lambda s, vocab_size=128, store=None: _delayed_reference(
                   s, vocab_size, lambda w: tuple(reversed(w))),
               "Grefenstette et al. (2015), §4.1",
               "w #^|w| -> #^|w| w^R over a vocabulary of V symbols (DPDT).", "transduce"))


def bigram_flip_machine(vocab_size: int = 128, store: str | None = None):
    """Grefenstette et al. (2015) §4.1 "Bigram flipping", in streaming form: w # -> # flip(w) for
    even |w|, where flip swaps the symbols at positions 2i-1 and 2i. Finite-state with a delay of
    one step: a Mealy DFA holding one pending symbol (2|V| + 2 states). In the delayed form
    w #^|w| -> #^|w| flip(w) the task needs a queue: ``store="queue"`` gives that form as the
    store transducer `pdanet.automata.store.bigram_flip` (sampler and reference follow)."""
    if store is not None:
        if store != "queue":
            raise InputError(f"bigram flip in delayed form needs a queue, not a {store!r}")
        from pdanet.automata import store as _store

        return _store.bigram_flip(int(vocab_size))
    vocab = _vocab(vocab_size)
    states = ["start", "done"] + [("hold", x) for x in vocab] + [("owe", x) for x in vocab]
    trans, outs = {}, {}
    trans[("start", BLANK)], outs[("start", BLANK)] = "done", BLANK
    for x in vocab:
        trans[("start", x)], outs[("start", x)] = ("hold", x), BLANK
        for y in vocab:
            trans[(("hold", x), y)], outs[(("hold", x), y)] = ("owe", x), y
            trans[(("owe", x), y)], outs[(("owe", x), y)] = ("hold", y), x
        trans[(("owe", x), BLANK)], outs[(("owe", x), BLANK)] = "done", x
    return DFA(states, vocab + (BLANK,), trans, "start", accepting=("done",), outputs=outs,
               output_alphabet=vocab + (BLANK,), name="bigram_flip")


def _flip(w: tuple) -> tuple:
    return tuple(w[i ^ 1] for i in range(len(w)))


def bigram_flip_reference(string: Sequence, vocab_size: int = 128, store: str | None = None):
    if store is not None:  # delayed form w #^|w| with |w| even
        s = tuple(string)
        if len(s) % 4:
            return None
        return _delayed_reference(s, vocab_size, _flip)
    vocab = set(_vocab(vocab_size))
    s = tuple(string)
    if not s or s[-1] != BLANK:
        return None
    w = s[:-1]
    if len(w) % 2 or any(x not in vocab for x in w):
        return None
    flipped: list = []
    for i in range(0, len(w), 2):
        flipped += [w[i + 1], w[i]]
    return (BLANK,) + tuple(flipped)


def bigram_flip_sampler(n, lengths, rng=None, vocab_size: int = 128, store: str | None = None):
    """w # with w uniform over the vocabulary; `lengths` are total lengths (odd: |w| even). With
    ``store``: the delayed form w #^|w| (total lengths divisible by 4)."""
    rng = _check_rng(rng)
    if store is not None:
        ls = _lengths(n, lengths, rng)
        if any(L % 4 for L in ls):
            raise InputError("strings w #^|w| with |w| even have lengths divisible by 4")
        return [s for L in ls for s in reversal_sampler(1, L, rng, alphabet=_vocab(vocab_size))]
    vocab = _vocab(vocab_size)
    out = []
    for L in _lengths(n, lengths, rng):
        if L % 2 == 0:
            raise InputError(f"strings w # with |w| even have odd length; {L} is even")
        out.append(tuple(vocab[i] for i in rng.integers(0, len(vocab), size=L - 1)) + (BLANK,))
    return out


_register(Task("bigram_flip", bigram_flip_machine, bigram_flip_sampler, bigram_flip_reference,
               "Grefenstette et al. (2015), §4.1",
               "w # -> # flip(w), swapping adjacent pairs (streaming Mealy DFA).", "transduce"))


# ================================================================================================
# Hewitt et al. (2020) and finite-state extras
# ================================================================================================
def dyck_km_reference(string: Sequence, k: int = 2, m: int = 3) -> bool:
    """Well-nested over k bracket types with depth never above m."""
    opens, closes = _brackets(k)
    partner = dict(zip(closes, opens))
    stack: list = []
    for x in string:
        if x in opens:
            stack.append(x)
            if len(stack) > m:
                return False
        elif x in partner:
            if not stack or stack.pop() != partner[x]:
                return False
        else:
            return False
    return not stack


def dyck_km_sampler(n, lengths, rng=None, k: int = 2, m: int = 3, busy: float = 0.5):
    """Complete Dyck-(k, m) words (`DyckKM.sample` with ``complete=True``); lengths even."""
    rng = _check_rng(rng)
    machine = _dyck_km(k, m)
    out = []
    for L in _lengths(n, lengths, rng):
        if L % 2:
            raise InputError(f"Dyck words have even length; {L} is odd")
        ids = machine.sample(1, L, rng, busy=busy, complete=True)[0]
        out.append(machine.alphabet.decode(ids))
    return out


_register(Task("dyck", lambda k=2, m=3: _dyck_km(k, m), dyck_km_sampler, dyck_km_reference,
               "Hewitt et al. (2020)",
               "Dyck-(k, m): k bracket types, depth at most m (generator of next-symbol sets).",
               "recognise"))


def parity_machine() -> DFA:
    """Accepts bit strings with an odd number of 1s."""
    return DFA((0, 1), "01", {(q, a): q ^ int(a) for q in (0, 1) for a in "01"}, 0,
               accepting=(1,), name="parity")


_register(Task("parity", parity_machine, _bits_sampler,  # uniform bit strings, both classes
               lambda s: sum(1 for a in s if a == "1") % 2 == 1, "standard finite-state example",
               "Bit strings with an odd number of 1s (DFA).", "recognise"))


def modular_counter_machine(modulus: int = 3, residue: int = 0) -> DFA:
    """Accepts bit strings whose number of 1s is ≡ `residue` (mod `modulus`): a cycle of
    `modulus` states."""
    n = modulus
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"the modulus must be a positive integer, got {n!r}")
    if not 0 <= residue < n:
        raise InputError(f"residue {residue!r} must lie in [0, {n})")
    return DFA(range(n), "01", {(q, a): (q + int(a)) % n for q in range(n) for a in "01"}, 0,
               accepting=(residue,), name=f"mod{n}")


_register(Task("modular_counter", modular_counter_machine,
               lambda n, lengths, rng=None, **kw: _bits_sampler(n, lengths, rng),  # both classes
               lambda s, modulus=3, residue=0: sum(1 for a in s if a == "1") % modulus == residue,
               "standard finite-state example",
               "Bit strings whose number of 1s is ≡ residue (mod modulus) (DFA).", "recognise"))


__all__ = [
    "dyck",
    "dataset",
    "BLANK",
    "Task",
    "agreement_grammar",
    "apply",
    "boolean_grammar",
    "dyck_grammar",
    "dyck_machine",
    "get",
    "grammar",
    "hardest_cfl_grammar",
    "names",
    "parenthesis_grammar",
    "reference",
    "reversal_machine",
    "sample",
    "task",
]
