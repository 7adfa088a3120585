"""Conversions between pushdown automata and context-free grammars.

- `to_final_state(pda)`: an empty-stack `PDA` as an equivalent final-state one.
- `to_empty_stack(pda)`: a final-state `PDA` as an equivalent empty-stack one.
- `pda_to_cfg(pda)`: the context-free grammar of a `PDA` (either mode) by the triple construction.

(`CFG.to_pda` goes the other way, in both acceptance modes.)

Semantics are those of `pdanet.automata.pda.PDA`: the stack starts as just `BOTTOM` (⊥), which is
never removed; a move ``(q, a, X) → (q2, (Y1, …, Yn))`` reads ``a`` (or nothing, for `EPSILON`),
pops ``X`` and leaves ``Y1`` on top. Acceptance is judged on every configuration reached after the
whole input (ε-moves included): ``final_state`` accepts in an accepting state, ``empty_stack`` when
only ⊥ is left. The initial configuration has only ⊥, so **every empty-stack PDA accepts the empty
string**: a final-state PDA whose language lacks ε has no empty-stack equivalent, and
`to_empty_stack` says so with an AutomatonError (it decides ε-membership exactly, by pushdown
reachability, not by simulation).

New states and stack symbols are `Fresh` values, numbered so that they never collide with the
machine's own (converting a converted machine again is safe).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from itertools import product
from typing import Any

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.grammar import CFG, GrammarError
from pdanet.automata.pda import PDA
from pdanet.errors import AutomatonError, InputError


@dataclass(frozen=True)
class Fresh:
    """A state or stack symbol made by a conversion (``role`` says which: "start", "drain",
    "accept", "bottom"); ``index`` keeps it distinct from every symbol already in the machine."""

    role: str
    index: int = 0

    def __repr__(self) -> str:
        return f"⟨{self.role}{self.index or ''}⟩"

    __str__ = __repr__


@dataclass(frozen=True)
class Triple:
    """The nonterminal [p X q] of the triple construction: it derives exactly the strings ``w``
    such that the machine, in state ``p`` with ``X`` on top, can read ``w`` and end in state ``q``
    with ``X`` popped and the stack below it untouched (Hopcroft–Motwani–Ullman Thm 6.14)."""

    p: Hashable
    X: Hashable
    q: Hashable

    def __repr__(self) -> str:
        return f"[{self.p!r} {self.X!r} {self.q!r}]"

    def __str__(self) -> str:
        return f"[{self.p} {self.X} {self.q}]"


def _fresh(role: str, taken: Iterable[Hashable]) -> Fresh:
    taken = set(taken)
    i = 0
    while Fresh(role, i) in taken:
        i += 1
    return Fresh(role, i)


def _check_pda(pda: Any, where: str) -> PDA:
    if not isinstance(pda, PDA):
        raise InputError(f"{where} takes a nondeterministic `PDA`, got {type(pda).__name__}; "
                         "build a PDA from a DPDA's transitions to convert it")
    return pda


def _moves(pda: PDA) -> list[tuple[Hashable, Any, Hashable, Hashable, tuple]]:
    """The transitions as (q, a, X, q2, gamma) rows, in a reproducible order."""
    rows = [(q, a, x, q2, g) for (q, a, x), moves in pda.transitions.items() for q2, g in moves]
    return sorted(rows, key=repr)


# --- acceptance modes -----------------------------------------------------------------------------
def to_final_state(pda: PDA, name: str | None = None) -> PDA:
    """An equivalent final-state PDA of an empty-stack `pda` (a final-state one is returned as is).

    Hopcroft–Motwani–Ullman Thm 6.9, simplified by pdanet's permanent ⊥: since a move on ⊥ fires
    exactly when only ⊥ is left, one fresh accepting state ``f`` and the moves
    ``(q, ε, ⊥) → (f, ⊥)`` for every state ``q`` suffice (no new bottom marker is needed); ``f``
    has no moves. A configuration with only ⊥ is reached after ``w`` iff ``f`` is, so the language
    is the same, ε included."""
    pda = _check_pda(pda, "to_final_state")
    if pda.acceptance == "final_state":
        return pda
    f = _fresh("accept", pda.states)
    trans: dict = {k: set(v) for k, v in pda.transitions.items()}
    for q in pda.states:
        trans.setdefault((q, EPSILON, BOTTOM), set()).add((f, (BOTTOM,)))
    return PDA(pda.states + (f,), pda.alphabet, pda.stack_alphabet, trans, pda.start,
               accepting=(f,), acceptance="final_state", name=name or pda.name,
               max_configs=pda.max_configs)


def _marked(pda: PDA, name: str | None = None) -> tuple[PDA, Fresh, Fresh, Fresh]:
    """The empty-stack machine of HMU Thm 6.11 for any `pda`: a fresh start ``s`` pushes a fresh
    bottom marker ``Z`` (``(s, ε, ⊥) → (q0, Z ⊥)``); the moves of `pda` on ⊥ act on ``Z`` instead.
    ``Z`` is popped only in a fresh drain state ``d``, so the stack is just ⊥ exactly in ``s``
    (the initial configuration) and in ``d`` once ``Z`` is gone. Final state: from an accepting
    state ε-move to ``d``, which pops everything. Empty stack: any state may pop ``Z`` into ``d``
    (the original stack was just ⊥ there). Returns (machine, s, Z, d); for a nonempty ``w``,
    the machine accepts ``w`` iff `pda` does, and `pda` accepts ε iff (q0, Z⊥) ⊢*_ε (d, ⊥)."""
    s = _fresh("start", pda.states)
    d = _fresh("drain", pda.states + (s,))
    z = _fresh("bottom", pda.stack_alphabet.symbols)
    trans: dict = {(s, EPSILON, BOTTOM): {(pda.start, (z, BOTTOM))}}
    for q, a, x, q2, g in _moves(pda):
        if x is BOTTOM:
            x, g = z, g[:-1] + (z,)
        trans.setdefault((q, a, x), set()).add((q2, g))
    tops = pda.stack_alphabet.symbols + (z,)
    if pda.acceptance == "final_state":
        for f in sorted(pda.accepting, key=repr):
            for x in tops:
                trans.setdefault((f, EPSILON, x), set()).add((d, ()))
        for x in tops:
            trans.setdefault((d, EPSILON, x), set()).add((d, ()))
    else:
        for q in pda.states:
            trans.setdefault((q, EPSILON, z), set()).add((d, ()))
    machine = PDA(pda.states + (s, d), pda.alphabet, tops, trans, s, acceptance="empty_stack",
                  name=name or pda.name, max_configs=pda.max_configs)
    return machine, s, z, d


def _pop_summaries(pda: PDA, epsilon_only: bool) -> set[tuple]:
    """The triples (p, X, q) with (p, X·α) ⊢* (q, α) (by ε-moves only when `epsilon_only`):
    a least fixpoint over the transitions (pushdown reachability, no simulation)."""
    rows = [r for r in _moves(pda) if not epsilon_only or r[1] is EPSILON]
    done: set = set()
    changed = True
    while changed:
        changed = False
        for p, _a, x, q2, g in rows:
            ends = {q2}
            for y in g:
                ends = {q for (p1, y1, q) in done if y1 == y and p1 in ends}
                if not ends:
                    break
            for q in ends:
                if (p, x, q) not in done:
                    done.add((p, x, q))
                    changed = True
    return done


def accepts_empty(pda: PDA) -> bool:
    """Whether `pda` accepts ε, decided exactly by pushdown reachability (this terminates even
    when an ε-cycle that pushes makes simulation raise SearchBoundError)."""
    pda = _check_pda(pda, "accepts_empty")
    if pda.acceptance == "empty_stack":
        return True
    machine, _s, z, d = _marked(pda)
    return (pda.start, z, d) in _pop_summaries(machine, epsilon_only=True)


def to_empty_stack(pda: PDA, name: str | None = None) -> PDA:
    """An equivalent empty-stack PDA of a final-state `pda` (an empty-stack one is returned as is).

    Hopcroft–Motwani–Ullman Thm 6.11: a fresh start state pushes a fresh bottom marker ``Z`` above
    ⊥ and enters the old start; the old moves on ⊥ act on ``Z``; from each accepting state an
    ε-move enters a fresh drain state that pops every symbol, ``Z`` included. Only ⊥ is left
    exactly when the drain has popped ``Z`` — or in the initial configuration, which is why the
    result always accepts ε (see the module docstring).

    Raises AutomatonError when `pda` does not accept ε: pdanet's empty-stack mode cannot express
    such a language. `accepts_empty` decides this beforehand."""
    pda = _check_pda(pda, "to_empty_stack")
    if pda.acceptance == "empty_stack":
        return pda
    if not accepts_empty(pda):
        raise AutomatonError(
            f"{pda!r} does not accept the empty string, but every empty-stack PDA does (its initial "
            "configuration has only ⊥ on the stack), so no empty-stack PDA has its language; keep "
            "it final-state, or take the union of its language with {ε}"
        )
    return _marked(pda, name)[0]


# --- PDA → CFG ------------------------------------------------------------------------------------
def pda_to_cfg(pda: PDA, name: str | None = None, max_rules: int = 100_000) -> CFG:
    """A context-free grammar generating exactly the language of `pda` (either acceptance mode).

    Hopcroft–Motwani–Ullman Thm 6.14 (the triple construction), applied to the marked
    empty-stack machine of Thm 6.11 (see `to_empty_stack`; starting the grammar at the old start
    state above the marker ``Z`` leaves out the ε that the marked machine's initial configuration
    always accepts, so ε is generated only when `pda` accepts it): for each move ``(p, a, X) → (r0, (Y1, …, Yk))`` and states ``r1, …, rk`` there is
    the rule ``[p X rk] → a [r0 Y1 r1] … [r(k−1) Yk rk]`` (``a`` omitted for ε; ``[p X r0] → a``
    when k = 0), and the start symbol ``S → [q0 Z d]`` for the fresh bottom marker ``Z`` and drain
    ``d``. Nonterminals are `Triple` values, built top-down from the start; useless ones (that
    derive no string, or cannot be reached) are dropped. The terminals are the PDA's input
    alphabet. The empty language is the single rule ``S → a S`` (``S → S`` over an empty
    alphabet). A move pushing k symbols gives |Q|^(k−1) rules per needed triple: more than
    `max_rules` rules raises GrammarError (split long pushes with fewer states first)."""
    pda = _check_pda(pda, "pda_to_cfg")
    if isinstance(max_rules, bool) or not isinstance(max_rules, int) or max_rules < 1:
        raise InputError(f"max_rules must be a positive integer, got {max_rules!r}")
    machine, _s, z, d = _marked(pda)
    by_top: dict = {}
    for p, a, x, r0, g in _moves(machine):
        if p != machine.start:
            by_top.setdefault((p, x), []).append((a, r0, g))
    states = [q for q in machine.states if q != machine.start]
    root = Triple(pda.start, z, d)
    rules: dict = {}
    todo = [root]
    seen = {root}
    count = 0
    while todo:
        t = todo.pop()
        out = rules.setdefault(t, [])
        for a, r0, g in by_top.get((t.p, t.X), ()):
            head = () if a is EPSILON else (a,)
            if not g:
                if r0 == t.q:
                    out.append(head)
                continue
            for mids in product(states, repeat=len(g) - 1):
                ends = (r0,) + mids + (t.q,)
                body = head + tuple(Triple(ends[i], y, ends[i + 1]) for i, y in enumerate(g))
                out.append(body)
                count += 1
                if count > max_rules:
                    raise GrammarError(
                        f"the triple construction for {pda!r} needs more than max_rules="
                        f"{max_rules} rules; raise `max_rules` or use a PDA with fewer states "
                        "or shorter pushes")
                for u in body[len(head):]:
                    if u not in seen:
                        seen.add(u)
                        todo.append(u)
    useful = _trim(rules, root)
    terms = pda.alphabet.symbols
    start: Hashable = "S"
    while start in terms:
        start = start + "'"
    label = name or (f"cfg({pda.name})" if pda.name else None)
    if root not in useful:
        body = (terms[0], start) if terms else (start,)
        return CFG([start], terms, [(start, body)], start, name=label)
    nts = [start] + sorted(useful, key=repr)
    pairs = [(start, (root,))]
    for t in nts[1:]:
        pairs.extend((t, b) for b in dict.fromkeys(rules[t])
                     if all(u in useful for u in b if isinstance(u, Triple)))
    return CFG(nts, terms, pairs, start, name=label)


def _trim(rules: dict, root: Triple) -> set:
    """The nonterminals that derive some string and are reachable from `root` through rules
    whose nonterminals all derive some string."""
    productive: set = set()
    changed = True
    while changed:
        changed = False
        for t, bodies in rules.items():
            if t not in productive and any(
                    all(u in productive for u in b if isinstance(u, Triple)) for b in bodies):
                productive.add(t)
                changed = True
    if root not in productive:
        return set()
    reach = {root}
    todo = [root]
    while todo:
        t = todo.pop()
        for b in rules[t]:
            inner = [u for u in b if isinstance(u, Triple)]
            if all(u in productive for u in inner):
                for u in inner:
                    if u not in reach:
                        reach.add(u)
                        todo.append(u)
    return reach


__all__ = ["Fresh", "Triple", "accepts_empty", "pda_to_cfg", "to_empty_stack", "to_final_state"]
