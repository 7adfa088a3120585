"""The intersection of a context-free language with a regular one: the product construction.

`intersect` runs a pushdown machine (`PDA` or `DPDA`) and a finite automaton (`DFA`, `NFA`, or a
regular expression) side by side (Hopcroft, Motwani & Ullman, *Introduction to Automata Theory*,
Thm. 7.27): the product's finite control is a pair ``(p, r)`` of a pushdown state and a regular
state, its stack is the pushdown machine's. A move of the pushdown machine reading ``a`` is paired
with every move of the finite automaton reading ``a``; an ε-move of the pushdown machine keeps the
finite component fixed. The result accepts exactly L(P) ∩ L(R).

The intersection of two context-free languages need not be context-free (``aⁿbⁿcᵐ`` ∩ ``aᵐbⁿcⁿ``
= ``aⁿbⁿcⁿ``), and whether it is empty is undecidable, so two pushdown machines are refused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.dfa import DFA
from pdanet.automata.nfa import NFA
from pdanet.automata.pda import DPDA, PDA, DeterministicPushdown
from pdanet.automata.regex import regex_to_dfa
from pdanet.errors import InputError


@dataclass(frozen=True)
class ProductStart:
    """The fresh start state of a product with an NFA of several (ε-closed) start states: its only
    moves are ε-moves on `BOTTOM` to each pair (pushdown start, NFA start). It cannot collide with a
    product state, which is a tuple."""

    def __repr__(self) -> str:
        return "⟨start⟩"


def _is_pushdown(m: Any) -> bool:
    return isinstance(m, (PDA, DeterministicPushdown))


def _is_regular(m: Any) -> bool:
    return isinstance(m, (DFA, NFA, str))


def _refuse_two_pushdowns(a: Any, b: Any) -> InputError:
    return InputError(
        f"cannot intersect {a!r} with {b!r}: both are pushdown machines. The intersection of two "
        "context-free languages need not be context-free (aⁿbⁿcᵐ ∩ aᵐbⁿcⁿ = aⁿbⁿcⁿ), and "
        "whether it is empty is undecidable, so no pushdown machine accepts it in general. "
        "Intersect a pushdown machine with a regular language (DFA, NFA or regex) instead"
    )


class _Regular:
    """A finite automaton as (ε-closed) start states, moves and acceptance."""

    def __init__(self, machine: DFA | NFA):
        self.machine = machine
        if isinstance(machine, DFA):
            self.starts: tuple = (machine.start,)
            trans = machine.transitions
            self.moves = lambda r, a: (trans[(r, a)],) if (r, a) in trans else ()
        else:
            # ε-moves folded into the closures: r --a--> every state of ε-closure(δ(r, a))
            self.starts = tuple(sorted(machine.initial(), key=machine._state_index.__getitem__))
            cache: dict = {}

            def moves(r: Hashable, a: Hashable) -> tuple:
                if (r, a) not in cache:
                    if a not in machine.alphabet:
                        cache[(r, a)] = ()
                    else:
                        reached = machine.step(frozenset([r]), a)
                        cache[(r, a)] = tuple(sorted(reached,
                                                     key=machine._state_index.__getitem__))
                return cache[(r, a)]

            self.moves = moves
        self.accepting = machine.accepting


def _as_regular(regular: Any, pushdown: Any) -> _Regular:
    if isinstance(regular, str):
        return _Regular(regex_to_dfa(regular, pushdown.alphabet))
    if isinstance(regular, DFA):
        if regular.is_mealy:
            raise InputError(
                f"{regular!r} is a Mealy machine (a transducer); intersect with a recogniser: a "
                "DFA without outputs, an NFA or a regular expression"
            )
        return _Regular(regular)
    if isinstance(regular, NFA):
        if isinstance(pushdown, DPDA):  # keep the product deterministic
            return _Regular(regular.determinise())
        return _Regular(regular)
    raise InputError(
        f"intersect takes a regular language as a DFA, an NFA or a regular expression (str), got "
        f"{type(regular).__name__}"
    )


def intersect(pushdown: PDA | DPDA, regular: DFA | NFA | str, name: str | None = None
              ) -> PDA | DPDA:
    """A pushdown machine accepting exactly L(pushdown) ∩ L(regular) (the product construction,
    Hopcroft–Motwani–Ullman Thm. 7.27).

    ``pushdown`` is a `PDA` or a `DPDA` (either acceptance mode); ``regular`` is a `DFA` (a
    recogniser; missing transitions go to its dead state), an `NFA` (with ε-moves), or a regular
    expression over the pushdown machine's alphabet (`pdanet.automata.regex` syntax). The operands
    may be given in either order. Strings with symbols outside the finite automaton's alphabet are
    rejected; the product reads the pushdown machine's alphabet.

    The product's states are pairs ``(p, r)``; its stack, stack moves and push orientation are the
    pushdown machine's. A move of the pushdown machine on ``(p, a, X)`` is paired with each move
    ``r --a--> r2`` of the finite automaton; an ε-move of the pushdown machine leaves ``r`` fixed.
    An NFA's ε-moves are folded in (``r --a--> r2`` for every ``r2`` in the ε-closure of δ(r, a),
    starting from the ε-closure of its start states; several start states get a fresh
    `ProductStart` with ε-moves on `BOTTOM` to each pair). Only pairs reachable in the finite
    control are built.

    Acceptance of the product is always "final_state":

    - a final-state ``pushdown``: ``(p, r)`` accepts when both ``p`` and ``r`` accept;
    - an empty-stack ``pushdown`` (only `BOTTOM` left): states are ``(p, r, z)`` where ``z`` says
      that only `BOTTOM` is on the stack, and stack symbols ``(X, d)`` where ``d`` says that ``X``
      lies directly on `BOTTOM` (so a pop knows whether it empties the stack), both flags written
      1 (yes) or 0 (no); ``(p, r, 1)`` accepts when ``r`` accepts. When every stack symbol is a
      str, ``(X, d)`` is written ``X + "₀"`` or ``X + "₁"`` so that the product can be saved.

    The acceptance is judged where the pushdown machine's own is: for a `DPDA` at the end of each
    ε-closure (see `pdanet.automata.pda`), for a `PDA` at any configuration of the ε-closure.

    Returns a `DPDA` when ``pushdown`` is a DPDA (an NFA is determinised first, by the subset
    construction), otherwise a `PDA` (its ``max_configs`` is the pushdown machine's, times the
    NFA's number of states for an NFA: each configuration pairs with a set of them). Two pushdown
    machines raise InputError: the intersection of two context-free languages need not be
    context-free and its emptiness is undecidable. Two finite automata are intersected with
    `DFA.intersection` (NFAs determinised first).
    """
    if _is_regular(pushdown) and _is_pushdown(regular):
        pushdown, regular = regular, pushdown
    if _is_pushdown(pushdown) and _is_pushdown(regular):
        raise _refuse_two_pushdowns(pushdown, regular)
    if isinstance(pushdown, (DFA, NFA)) and isinstance(regular, (DFA, NFA)):
        a = pushdown.determinise() if isinstance(pushdown, NFA) else pushdown
        b = regular.determinise() if isinstance(regular, NFA) else regular
        return a.intersection(b)
    if not isinstance(pushdown, (PDA, DPDA)):
        if _is_pushdown(pushdown):
            raise InputError(
                f"{pushdown!r} is a transducer; intersect takes a recogniser (a PDA or a DPDA)"
            )
        raise InputError(
            f"intersect takes a pushdown machine (PDA or DPDA) and a regular language (DFA, NFA "
            f"or regular expression), got {type(pushdown).__name__} and {type(regular).__name__}"
        )
    if name is not None and not isinstance(name, str):
        raise InputError(f"name must be a str or None, got {type(name).__name__}")
    reg = _as_regular(regular, pushdown)
    return _product(pushdown, reg, name)


def _moves_of(pushdown: PDA | DPDA) -> dict:
    """{p: [(a, X, ((q2, gamma), …)), …]}: the transitions leaving each state."""
    out: dict = {}
    for (p, a, x), value in pushdown.transitions.items():
        moves = tuple(value) if isinstance(value, frozenset) else (value,)
        out.setdefault(p, []).append((a, x, moves))
    return out


def _annotate(x: Hashable, below_is_bottom: int | None, gamma: tuple) -> tuple[tuple, int]:
    """The pushed string with each non-BOTTOM symbol paired with "lies directly on BOTTOM" (1 or
    0), for a move replacing top ``x`` (whose own mark is ``below_is_bottom``); and whether only
    BOTTOM is left after the move (1 or 0)."""
    if x is BOTTOM:  # gamma = Y1 … Yk BOTTOM: Yk lies on BOTTOM
        ys = gamma[:-1]
        marked = tuple((y, int(i == len(ys) - 1)) for i, y in enumerate(ys))
        return marked + (BOTTOM,), int(not ys)
    n = len(gamma)
    marked = tuple((y, int(bool(below_is_bottom) and i == n - 1)) for i, y in enumerate(gamma))
    return marked, int(n == 0 and bool(below_is_bottom))


def _marker(stack_alphabet: Iterable[Hashable]) -> dict:
    """{(X, d): the product's stack symbol}: ``X + "₀"`` / ``X + "₁"`` when every symbol is a str
    (one-character suffixes, so distinct pairs get distinct names), else the pair itself."""
    symbols = list(stack_alphabet)
    if all(isinstance(x, str) for x in symbols):
        return {(x, d): x + "₀₁"[d] for x in symbols for d in (0, 1)}
    return {(x, d): (x, d) for x in symbols for d in (0, 1)}


def _product(pushdown: PDA | DPDA, reg: _Regular, name: str | None) -> PDA | DPDA:
    deterministic = isinstance(pushdown, DPDA)
    empty_stack = pushdown.acceptance == "empty_stack"
    by_state = _moves_of(pushdown)
    p0 = pushdown.start

    if empty_stack:
        mark = _marker(pushdown.stack_alphabet)
        stack_alphabet: Iterable = [mark[(x, d)] for x in pushdown.stack_alphabet for d in (0, 1)]
        starts = [(p0, r, 1) for r in reg.starts]
    else:
        stack_alphabet = pushdown.stack_alphabet
        starts = [(p0, r) for r in reg.starts]

    trans: dict = {}

    def add(key: tuple, target: tuple) -> None:
        trans.setdefault(key, set()).add(target)

    seen = set(starts)
    order = list(starts)
    queue = deque(starts)
    while queue:
        state = queue.popleft()
        p, r = state[0], state[1]
        for a, x, moves in by_state.get(p, ()):
            r2s = (r,) if a is EPSILON else reg.moves(r, a)
            if not r2s:
                continue
            if empty_stack:
                z = state[2]
                tops = [(BOTTOM, None)] if x is BOTTOM else [(mark[(x, d)], d) for d in (0, 1)]
                if bool(z) != (x is BOTTOM):
                    continue  # z records whether the top is BOTTOM
            else:
                tops = [(x, None)]
            for top, d in tops:
                for q2, gamma in moves:
                    if empty_stack:
                        pushed, z2 = _annotate(x, d, gamma)
                        pushed = tuple(y if y is BOTTOM else mark[y] for y in pushed)
                    else:
                        pushed, z2 = gamma, None
                    for r2 in r2s:
                        target = (q2, r2, z2) if empty_stack else (q2, r2)
                        add((state, a, top), (target, pushed))
                        if target not in seen:
                            seen.add(target)
                            order.append(target)
                            queue.append(target)

    if empty_stack:
        accepting = [s for s in order if s[2] and s[1] in reg.accepting]
    else:
        accepting = [s for s in order
                     if s[0] in pushdown.accepting and s[1] in reg.accepting]
    if len(starts) == 1:
        start: Hashable = starts[0]
    else:  # several NFA start states (only for a PDA: a DPDA's NFA was determinised)
        start = ProductStart()
        order.insert(0, start)
        trans[(start, EPSILON, BOTTOM)] = {(s, (BOTTOM,)) for s in starts}
    rname = reg.machine.name if reg.machine.name else type(reg.machine).__name__
    label = name if name is not None else (
        f"{pushdown.name or type(pushdown).__name__} ∩ {rname}")
    if deterministic:
        det = {k: next(iter(v)) for k, v in trans.items()}
        return DPDA(order, pushdown.alphabet, stack_alphabet, det, start, accepting,
                    name=label)
    # a DFA pairs each pushdown configuration with one state; an NFA with at most all of its own
    width = 1 if isinstance(reg.machine, DFA) else len(reg.machine.states)
    return PDA(order, pushdown.alphabet, stack_alphabet, trans, start, accepting, name=label,
               max_configs=pushdown.max_configs * width)


__all__ = ["ProductStart", "intersect"]
