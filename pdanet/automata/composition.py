"""Composition of a deterministic pushdown transducer with a finite-state transducer.

A pushdown transduction followed by a rational one, or a rational one followed by a pushdown one,
is again a pushdown transduction (Berstel, *Transductions and Context-Free Languages*, 1979,
ch. V): the finite control of the FST is carried in the states of the pushdown machine.
`compose(first, second)` builds that machine for the order given — ``first`` is applied first:

- ``compose(dpdt, fst)``: the relation {(x, z) : z ∈ fst.translate(dpdt.transduce(x))}.
  When the FST is *sequential* (after trimming, see below), the result is a `DPDT` whose states
  are pairs (q, p) of a DPDT state and an FST state: each DPDT transition emitting y becomes one
  that emits the FST's output on y (possibly several symbols, or none). Otherwise it is a
  `PushdownRelation`, the set-valued relation with ``translate(x, max_length=None)``.
- ``compose(fst, dpdt)``: the relation {(x, dpdt.transduce(y)) : y ∈ fst.translate(x)}. Only for
  a sequential FST (the result is then a `DPDT`); a nondeterministic FST raises
  `DeterminismError`, since the outputs y to feed to the DPDT are not bounded by the length of
  the result and no finite enumeration is possible in general.

An FST is *sequential* when, after dropping the states that lie on no path from a start state to
an accepting state, it has one start state, no move reading ε, and at most one move per
(state, input symbol); its moves may emit any number of symbols. Such an FST is a partial function
and composes with a deterministic machine without losing determinism.

In the DPDT built by ``compose(fst, dpdt)`` a state is a triple (q, p, r): q the DPDT's state, p
the FST's, and r the FST output still to feed to the DPDT. A step reads one input symbol a with
the FST, which emits y: when y is empty the DPDT waits (a stack no-op); otherwise the move is
fused with the DPDT's move reading y's first symbol and the rest of y goes into r, fed to the
DPDT one symbol at a time by ε-moves, with the DPDT's own ε-moves followed in between, exactly as
`DPDT` semantics follow ε-closures. So the result is real-time when the DPDT is and every useful
FST move emits at most one symbol, and then it compiles as the DPDT does.

A result reading a string outside the composed domain blocks or ends outside its accepting states
(`DPDT.transduce` raises InputError; ``translate`` gives the empty set).
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import cached_property
from typing import Any

from pdanet import limits
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.base import Frozen
from pdanet.automata.fst import FST
from pdanet.automata.pdt import DPDT
from pdanet.errors import DeterminismError, InputError

#: the non-accepting sink of a composed DPDT: reached by an ε-move of the DPDT whose output the
#: FST cannot read (the run has no translation, whatever follows); a str, so it never equals a
#: composed state (always a tuple)
BLOCKED = "blocked"
#: an unreachable accepting state, added when no composed state is accepting (a DPDT without
#: accepting states would accept everything)
NEVER = "never"


def sequential_form(fst: FST) -> tuple[Hashable | None, dict, frozenset] | str:
    """The FST as a sequential function, or a str saying why it is not one.

    Returns ``(start, moves, accepting)`` with ``moves[(p, a)] = (p2, output)`` over the *useful*
    states (reachable from a start state and co-reachable to an accepting one); ``start`` is None
    when no state is useful (the relation is empty)."""
    succ: dict = {}
    pred: dict = {}
    for (p, _), moves in fst.transitions.items():
        for r, _ in moves:
            succ.setdefault(p, set()).add(r)
            pred.setdefault(r, set()).add(p)

    def closure(seeds: Any, edges: dict) -> set:
        seen = set(seeds)
        todo = list(seen)
        while todo:
            for r in edges.get(todo.pop(), ()):
                if r not in seen:
                    seen.add(r)
                    todo.append(r)
        return seen

    useful = closure(fst.starts, succ) & closure(fst.accepting, pred)
    starts = [q for q in fst.starts if q in useful]
    if not starts:
        return None, {}, frozenset()
    if len(starts) > 1:
        return f"it has {len(starts)} useful start states {sorted(starts, key=repr)!r}"
    moves: dict = {}
    for (p, a), options in fst.transitions.items():
        if p not in useful:
            continue
        kept = sorted((m for m in options if m[0] in useful), key=repr)
        if not kept:
            continue
        if a is EPSILON:
            return f"state {p!r} has a move reading ε (to {kept[0][0]!r})"
        if len(kept) > 1:
            return f"state {p!r} has {len(kept)} moves reading {a!r}: {kept!r}"
        moves[(p, a)] = kept[0]
    return starts[0], moves, frozenset(q for q in fst.accepting if q in useful)


def _empty(alphabet: Any, output_alphabet: Any, stack_alphabet: Any, name: str | None) -> DPDT:
    """A DPDT whose domain is empty."""
    return DPDT((BLOCKED, NEVER), alphabet, output_alphabet, stack_alphabet, {}, BLOCKED,
                accepting=(NEVER,), name=name)


def _finish(states: list, dpdt: DPDT, alphabet: Any, output_alphabet: Any, trans: dict,
            start: Hashable, accepting: list, name: str | None) -> DPDT:
    states = list(states)
    if any(target[0] == BLOCKED for target in trans.values()):
        states.append(BLOCKED)
    if not accepting:
        states.append(NEVER)
        accepting = [NEVER]
    return DPDT(states, alphabet, output_alphabet, dpdt.stack_alphabet, trans, start,
                accepting=accepting, name=name)


def _grow(order: list, seen: set, target: Hashable, what: str) -> None:
    if target not in seen and target != BLOCKED:
        if len(order) >= limits.current().max_states:
            limits.check(what, len(order) + 1, "max_states")
        seen.add(target)
        order.append(target)


class PushdownRelation(Frozen):
    """The relation of a DPDT followed by a nondeterministic FST (from `compose`): x is related to
    every z that the FST relates to the DPDT's output on x. Immutable; not a `Machine` (it has no
    single configuration per prefix) and not compilable.

    ``translate(x, max_length=None)``: the set of outputs (tuples of symbols), empty when x is
    outside the DPDT's domain; it is the FST's ``translate`` of the DPDT's output, so
    ``max_length`` and the EpsilonLoopError for infinitely many outputs are as for `FST`."""

    output_kind = "relation"
    #: appended by `pdanet.compile` to its error message when one is given to it
    compile_hint = (" A PushdownRelation is a nondeterministic transduction and has no network "
                    "construction; compose with a sequential FST to get a DPDT.")

    def __init__(self, first: DPDT, second: FST, name: str | None = None):
        if not isinstance(first, DPDT) or not isinstance(second, FST):
            raise InputError(f"a PushdownRelation is a DPDT followed by an FST, got "
                             f"{type(first).__name__} and {type(second).__name__}")
        self.first = first
        self.second = second
        self.name = name
        self.alphabet = first.alphabet
        self.output_alphabet = second.output_alphabet

    @cached_property
    def _key(self) -> tuple:
        return (self.first, self.second)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<PushdownRelation{label}: {self.first!r} then {self.second!r}>"

    def _middle(self, string: Any) -> tuple | None:
        """The DPDT's output on `string`, or None when it has none the FST can read."""
        symbols = self.alphabet.split(string)
        if not self.first.accepts(symbols):
            return None
        y = self.first.transduce(symbols)
        return y if all(b in self.second.alphabet for b in y) else None

    def translate(self, string: Any, max_length: int | None = None) -> frozenset:
        """The outputs related to `string` (see the class docstring)."""
        y = self._middle(string)
        if y is None:
            if max_length is not None:  # the same argument check as FST.translate
                self.second.translate((), max_length=max_length)
            return frozenset()
        return self.second.translate(y, max_length=max_length)

    def accepts(self, string: Any) -> bool:
        """True when `string` is related to some output."""
        y = self._middle(string)
        return y is not None and self.second.accepts(y)


def _dpdt_then_fst(dpdt: DPDT, fst: FST, name: str | None) -> DPDT | PushdownRelation:
    form = sequential_form(fst)
    if isinstance(form, str):
        return PushdownRelation(dpdt, fst, name=name)
    p0, moves, fst_acc = form
    if p0 is None:
        return _empty(dpdt.alphabet, fst.output_alphabet, dpdt.stack_alphabet, name)

    def run(p: Hashable, y: tuple) -> tuple | None:
        out: tuple = ()
        for b in y:
            move = moves.get((p, b))
            if move is None:
                return None
            p, out = move[0], out + move[1]
        return p, out

    leaving: dict = {}
    for key, value in dpdt.transitions.items():
        leaving.setdefault(key[0], []).append((key, value))
    start = (dpdt.start, p0)
    order, seen = [start], {start}
    trans: dict = {}
    what = f"composing {dpdt!r} with {fst!r}"
    for q, p in order:  # grows while iterating: breadth first
        for (_, a, s), (q2, y, gamma) in leaving.get(q, ()):
            fed = run(p, y)
            if fed is None:
                if a is EPSILON:  # the DPDT moves on regardless: the run has no translation
                    trans[((q, p), a, s)] = (BLOCKED, (), gamma)
                continue
            target = (q2, fed[0])
            trans[((q, p), a, s)] = (target, fed[1], gamma)
            _grow(order, seen, target, what)
    accepting = [(q, p) for q, p in order
                 if p in fst_acc and (not dpdt.accepting or q in dpdt.accepting)]
    return _finish(order, dpdt, dpdt.alphabet, fst.output_alphabet, trans, start, accepting,
                   name)


def _fst_then_dpdt(fst: FST, dpdt: DPDT, name: str | None) -> DPDT:
    form = sequential_form(fst)
    if isinstance(form, str):
        raise DeterminismError(
            f"compose({fst!r}, {dpdt!r}) keeps determinism only for a sequential FST (one useful "
            f"start state, no ε-input moves, at most one move per state and symbol), but {form}; "
            "determinise the FST, or apply the DPDT to each output of fst.translate(x) yourself")
    p0, moves, fst_acc = form
    if p0 is None:
        return _empty(fst.alphabet, dpdt.output_alphabet, dpdt.stack_alphabet, name)
    by_state: dict = {}
    for (p, a), move in moves.items():
        if all(b in dpdt.alphabet for b in move[1]):  # else the DPDT would block on it
            by_state.setdefault(p, []).append((a, move))
    eps: dict = {}
    reads: dict = {}
    for (q, b, s), value in dpdt.transitions.items():
        if b is EPSILON:
            eps.setdefault(q, []).append((s, value))
        else:
            reads.setdefault((q, b), []).append((s, value))
    tops = (*dpdt.stack_alphabet, BOTTOM)
    start = (dpdt.start, p0, ())
    order, seen = [start], {start}
    trans: dict = {}
    what = f"composing {fst!r} with {dpdt!r}"
    for q, p, r in order:  # grows while iterating: breadth first
        targets = []
        for s, (q2, z, gamma) in eps.get(q, ()):  # the DPDT's ε-closure
            targets.append((((q, p, r), EPSILON, s), ((q2, p, r), z, gamma)))
        if r:  # feed the next pending symbol
            for s, (q2, z, gamma) in reads.get((q, r[0]), ()):
                targets.append((((q, p, r), EPSILON, s), ((q2, p, r[1:]), z, gamma)))
        else:  # read the next input symbol with the FST (where the DPDT has no ε-move)
            closed = {s for s, _ in eps.get(q, ())}
            for a, (p2, y) in by_state.get(p, ()):
                if not y:  # the DPDT waits: a stack no-op
                    targets.extend((((q, p, r), a, s), ((q, p2, ()), (), (s,)))
                                   for s in tops if s not in closed)
                    continue
                for s, (q2, z, gamma) in reads.get((q, y[0]), ()):  # fused with y's first symbol
                    targets.append((((q, p, r), a, s), ((q2, p2, y[1:]), z, gamma)))
        for key, value in targets:
            trans[key] = value
            _grow(order, seen, value[0], what)
    accepting = [(q, p, r) for q, p, r in order if not r and p in fst_acc
                 and (not dpdt.accepting or q in dpdt.accepting)]
    return _finish(order, dpdt, fst.alphabet, dpdt.output_alphabet, trans, start, accepting,
                   name)


def compose(first: DPDT | FST, second: FST | DPDT, name: str | None = None
            ) -> DPDT | PushdownRelation:
    """The transduction that applies `first`, then `second` to its output (see the module
    docstring): ``compose(dpdt, fst)`` is a `DPDT` when the FST is sequential and a
    `PushdownRelation` otherwise; ``compose(fst, dpdt)`` is a `DPDT` for a sequential FST and
    raises DeterminismError otherwise. Output symbols of `first` that `second` cannot read block.
    Other pairs raise InputError (two FSTs: ``FST.compose``; two DPDTs: their composition is not
    a pushdown transduction in general)."""
    if isinstance(first, DPDT) and isinstance(second, FST):
        return _dpdt_then_fst(first, second, name)
    if isinstance(first, FST) and isinstance(second, DPDT):
        return _fst_then_dpdt(first, second, name)
    if isinstance(first, FST) and isinstance(second, FST):
        raise InputError("compose takes a DPDT and an FST; for two FSTs use first.compose(second)")
    raise InputError(
        f"compose takes a DPDT and an FST (in either order), got {type(first).__name__} and "
        f"{type(second).__name__}; two pushdown transductions do not compose into one in general "
        "(their composition can need two stacks)")


__all__ = ["BLOCKED", "NEVER", "PushdownRelation", "compose", "sequential_form"]
