"""Pushdown automata: deterministic (`DPDA`) and nondeterministic (`PDA`).

Transitions are written ``{(q, a, X): (q2, gamma)}``: in state ``q``, reading ``a`` (an input
symbol, or `EPSILON` for a move that reads nothing) with ``X`` on top of the stack (a stack symbol,
or `BOTTOM`), the machine pops ``X``, pushes ``gamma`` and goes to ``q2``. ``gamma = (X1, …, Xn)``
leaves ``X1`` on top; ``()`` pops. The stack starts as just `BOTTOM`, which is never removed: a
transition on `BOTTOM` must re-push it as the last symbol of ``gamma`` (and `BOTTOM` appears in no
other ``gamma``). So ``(q, a, X): (q2, (Y, X))`` pushes ``Y`` and
``(q, a, BOTTOM): (q2, (BOTTOM,))`` leaves the stack alone.

Configurations (`PDAConfig`) hold the state and the stack written bottom first, `BOTTOM` at index 0
and the top last: a `Stack`, which equals (and hashes as) the tuple of its symbols and shares its
cells with the configurations before it, so a move costs O(1) at any depth. ``depth`` counts the symbols above `BOTTOM`. A missing transition blocks the
machine: the dead configuration ``PDAConfig(None, ())`` (depth -1), which rejects every extension.

Deterministic semantics (`DPDA`). The configuration after a prefix is its ε-closure end: from the
initial configuration, and after each input move, ε-moves are taken while one applies; determinism
makes this chain unique, and the ε-loop check made at construction makes it finite. Acceptance is
judged at that closure end: ``final_state`` accepts when its state is accepting, ``empty_stack``
when only `BOTTOM` is left. (This equals the textbook "some configuration reachable by ε-moves after
the last symbol" whenever no ε-move leaves an accepting configuration.)

Nondeterministic semantics (`PDA`). The configuration after a prefix is the *set* of all
configurations reachable by the moves of that prefix followed by any ε-moves (the whole ε-closure,
found breadth first, with an explicit bound on its size); it accepts when any member does.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Self

import numpy as np

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import (
    BatchTrace,
    Machine,
    StateIndexed,
    Step,
    draw_allowed,
    index_states,
)
from pdanet.automata.dfa import DFA
from pdanet.errors import (
    AutomatonError,
    CompileError,
    DeterminismError,
    EpsilonLoopError,
    InputError,
    SearchBoundError,
)

ACCEPTANCE_MODES = ("final_state", "empty_stack")
STACK_OPS = ("noop", "push", "pop", "replace")


# --- persistent stacks ----------------------------------------------------------------------------
_MASK = (1 << 64) - 1
_XX1, _XX2, _XX5 = 11400714785074694791, 14029467366897019727, 2870177450012600261


def _xx_push(acc: int, item_hash: int) -> int:
    """One round of CPython's (3.8+, 64-bit) tuple hash over one more element."""
    acc = (acc + (item_hash & _MASK) * _XX2) & _MASK
    acc = ((acc << 31) | (acc >> 33)) & _MASK
    return (acc * _XX1) & _MASK


def _xx_finish(acc: int, n: int) -> int:
    acc = (acc + (n ^ (_XX5 ^ 3527539))) & _MASK
    if acc == _MASK:
        return 1546275796
    return acc - (1 << 64) if acc >> 63 else acc


class Stack(Sequence):
    """An immutable stack written bottom first (``s[0]`` the bottom, ``s[-1]`` the top), stored as
    a linked list of cells that share their tails: `push` and `pop` are O(1) and never copy, so a
    run of n steps costs O(n) however deep the stack gets.

    It is a value: it compares equal to any tuple (or Stack) with the same symbols bottom first,
    and hashes like that tuple (the hash is kept per cell, so hashing is O(1) too). Reading the top,
    the length and the hash is O(1); ``s[i]`` costs O(len(s) − i); iterating, slicing and
    ``tuple(s)`` cost O(len(s)).
    """

    __slots__ = ("__weakref__", "_acc", "_below", "_len", "_top")

    _below: Stack | None
    _top: Any
    _len: int
    _acc: int | None          # the tuple-hash accumulator, computed on first hash

    def __new__(cls, symbols: Iterable[Hashable] = ()) -> Self:
        if isinstance(symbols, Stack):
            return symbols
        out = _EMPTY_STACK
        for s in symbols:
            out = out.push(s)
        return out

    @classmethod
    def _cell(cls, below: Stack | None, top: Any, n: int, acc: int | None) -> Stack:
        cell = object.__new__(cls)
        cell._below, cell._top, cell._len, cell._acc = below, top, n, acc
        return cell

    # --- O(1) --------------------------------------------------------------------------------
    def push(self, *symbols: Hashable) -> Stack:
        """The stack with ``symbols`` pushed in order (the last one ends on top)."""
        out = self
        new = object.__new__
        for s in symbols:
            cell = new(Stack)
            cell._below, cell._top, cell._len, cell._acc = out, s, out._len + 1, None
            out = cell
        return out

    def _accumulator(self) -> int:
        """The tuple-hash accumulator of this cell, filling in those of the cells below it that
        lack one (each cell's is computed once, so hashing is amortised O(1) per push)."""
        if self._acc is not None:
            return self._acc
        pending = []
        cell = self
        while cell._acc is None:
            pending.append(cell)
            cell = cell._below
        acc = cell._acc
        for c in reversed(pending):
            acc = _xx_push(acc, hash(c._top))
            c._acc = acc
        return acc

    def pop(self) -> Stack:
        """The stack without its top; IndexError when empty."""
        if self._below is None:
            raise IndexError("pop from an empty stack")
        return self._below

    @property
    def top(self) -> Any:
        """The top symbol; IndexError when empty."""
        if self._below is None:
            raise IndexError("the stack is empty")
        return self._top

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __hash__(self) -> int:
        if _TUPLE_HASH:
            return _xx_finish(self._accumulator(), self._len)
        return hash(tuple(self))

    # --- O(len) ------------------------------------------------------------------------------
    def _cells_top_first(self) -> Iterator[Any]:
        cell = self
        while cell._below is not None:
            yield cell._top
            cell = cell._below

    def __iter__(self) -> Iterator[Any]:
        return reversed(list(self._cells_top_first()))

    def __reversed__(self) -> Iterator[Any]:
        return self._cells_top_first()

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return tuple(self)[i]
        n = self._len
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"stack indices must be integers or slices, not {type(i).__name__}")
        j = int(i) + n if i < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError("stack index out of range")
        cell = self
        for _ in range(n - 1 - j):
            cell = cell._below
        return cell._top

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Stack):
            a, b = self, other
            if a._len != b._len or (a._acc is not None and b._acc is not None
                                    and a._acc != b._acc):
                return False
            while a is not b:                  # stop where the two share their tail
                if a._top != b._top:
                    return False
                a, b = a._below, b._below
            return True
        if isinstance(other, tuple):
            return self._len == len(other) and tuple(self) == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __add__(self, other: Iterable[Hashable]) -> Stack:
        """Push the symbols of a tuple (or stack) in order, bottom first."""
        if not isinstance(other, (tuple, Stack)):
            return NotImplemented
        return self.push(*other)

    def __radd__(self, other: tuple) -> Stack:
        if not isinstance(other, tuple):
            return NotImplemented
        return Stack(other).push(*self)

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self):
        return (Stack, (tuple(self),))


_EMPTY_STACK = Stack._cell(None, None, 0, _XX5)


def _tuple_hash_matches() -> bool:
    """Whether this interpreter's tuple hash is the one `_xx_push` reproduces."""
    if sys.hash_info.width != 64:
        return False
    for sample in ((), (1,), ("a", BOTTOM, 3), tuple(range(40))):
        acc = _XX5
        for s in sample:
            acc = _xx_push(acc, hash(s))
        if _xx_finish(acc, len(sample)) != hash(sample):
            return False
    return True


_TUPLE_HASH = _tuple_hash_matches()


@dataclass(frozen=True)
class PDAConfig:
    """A pushdown configuration: ``state`` (None = dead/blocked) and ``stack``, a `Stack` written
    bottom first with `BOTTOM` at index 0 (empty for the dead configuration). A tuple given as
    ``stack`` is converted; the stack compares equal to the tuple of its symbols, so
    ``PDAConfig(q, (BOTTOM, "A")) == machine.run("a")`` reads as before. Configurations share
    stack cells with their predecessors, so a step costs O(1) whatever the depth."""

    state: Hashable | None
    stack: Stack = (BOTTOM,)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if not isinstance(self.stack, Stack):
            object.__setattr__(self, "stack", Stack(self.stack))

    @property
    def depth(self) -> int:
        """Symbols above `BOTTOM` (-1 for the dead configuration)."""
        return len(self.stack) - 1

    @property
    def top(self) -> Hashable | None:
        return self.stack.top if self.stack else None

    @property
    def dead(self) -> bool:
        return self.state is None


DEAD = PDAConfig(None, Stack())


@dataclass(frozen=True)
class AuxState:
    """A fresh intermediate state made by `normal_form` for the ``index``-th extra push of the
    transition ``origin`` = (q, a, X). It cannot collide with a user state."""

    origin: tuple
    index: int

    def __repr__(self) -> str:
        q, a, x = self.origin
        return f"⟨{q!r},{a},{x}⟩#{self.index}"


# --- helpers ------------------------------------------------------------------------------------
def stack_op(top: Hashable, gamma: tuple) -> tuple[str, Hashable | None]:
    """Classify replacing ``top`` by ``gamma`` as ("noop", None), ("push", Y) for ``(Y, top)``,
    ("pop", None) for ``()`` or ("replace", Y) for ``(Y,)`` with ``Y != top``; AutomatonError for a
    longer ``gamma`` (split it with `normal_form`)."""
    gamma = tuple(gamma)
    if len(gamma) == 0:
        return ("pop", None)
    if len(gamma) == 1:
        return ("noop", None) if gamma[0] == top else ("replace", gamma[0])
    if len(gamma) == 2 and gamma[1] == top:
        return ("push", gamma[0])
    raise AutomatonError(
        f"replacing {top!r} by {gamma!r} is not one of noop / push Y / pop / replace with Y; "
        "call `.normal_form()` to split it into single operations"
    )


def normalise_gamma(gamma: Any, stack_alphabet: Alphabet, where: str) -> tuple:
    """The pushed string as a tuple of stack symbols (X1 on top). Accepts a tuple or list, `EPSILON`
    or "" for the empty string, a single stack symbol (or `BOTTOM`), or a str of one-character stack
    symbols."""
    if gamma is EPSILON or gamma == "" or gamma is None:
        return ()
    if gamma is BOTTOM:
        return (BOTTOM,)
    if isinstance(gamma, (tuple, list)):
        out = tuple(gamma)
    elif gamma in stack_alphabet:
        out = (gamma,)
    elif isinstance(gamma, str) and stack_alphabet.single_char:
        out = tuple(gamma)
    else:
        raise AutomatonError(
            f"{where}: pushed string {gamma!r} is neither a tuple of stack symbols nor a stack "
            f"symbol of {stack_alphabet!r}"
        )
    for s in out:
        if s is EPSILON:
            raise AutomatonError(f"{where}: ε cannot be pushed; write () to pop")
        if s is not BOTTOM and s not in stack_alphabet:
            raise AutomatonError(
                f"{where}: pushes {s!r}, which is not in the stack alphabet {stack_alphabet!r}"
            )
    return out


@dataclass(frozen=True)
class _Spec:
    """Validated common parts of a pushdown machine."""

    states: tuple
    index: dict
    alphabet: Alphabet
    stack_alphabet: Alphabet
    start: Hashable
    accepting: frozenset


def _validate_common(states, input_alphabet, stack_alphabet, start, accepting) -> _Spec:
    states, index = index_states(states, none_is_dead=True)
    alphabet = Alphabet.of(input_alphabet)
    stack_alphabet = Alphabet.of(stack_alphabet)
    if start not in index:
        raise AutomatonError(
            f"start state {start!r} is not among the declared states; add it to `states`"
        )
    acc = frozenset(accepting)
    for q in acc:
        if q not in index:
            raise AutomatonError(f"accepting state {q!r} is not among the declared states")
    return _Spec(states, index, alphabet, stack_alphabet, start, acc)


def _check_key(key: Any, spec: _Spec) -> tuple:
    if not (isinstance(key, tuple) and len(key) == 3):
        raise AutomatonError(
            f"transition key {key!r} must be a triple (state, input symbol or EPSILON, stack top)"
        )
    q, a, x = key
    if q not in spec.index:
        raise AutomatonError(
            f"transition {key!r} leaves undeclared state {q!r}; add it to `states`"
        )
    if a is not EPSILON and a not in spec.alphabet:
        raise AutomatonError(
            f"transition {key!r} reads {a!r}, which is neither EPSILON nor in the input alphabet "
            f"{spec.alphabet!r}"
        )
    if x is not BOTTOM and x not in spec.stack_alphabet:
        raise AutomatonError(
            f"transition {key!r} expects top {x!r}, which is neither BOTTOM nor in the stack "
            f"alphabet {spec.stack_alphabet!r}"
        )
    return key


def _check_move(key: tuple, q2: Any, gamma: Any, spec: _Spec) -> tuple:
    """Validate the target state and pushed string of transition ``key``; returns (q2, gamma)."""
    where = f"transition {key!r}"
    if q2 not in spec.index:
        raise AutomatonError(f"{where} goes to undeclared state {q2!r}; add it to `states`")
    gamma = normalise_gamma(gamma, spec.stack_alphabet, where)
    x = key[2]
    if x is BOTTOM:
        if not gamma or gamma[-1] is not BOTTOM:
            raise AutomatonError(
                f"{where} reads BOTTOM but does not re-push it: end its pushed string with BOTTOM "
                f"(e.g. (Y, BOTTOM) to push Y, (BOTTOM,) to leave the stack alone)"
            )
        if any(s is BOTTOM for s in gamma[:-1]):
            raise AutomatonError(
                f"{where} pushes BOTTOM above other symbols; BOTTOM stays at the bottom"
            )
    elif any(s is BOTTOM for s in gamma):
        raise AutomatonError(
            f"{where} pushes BOTTOM but its top is {x!r}: BOTTOM may only be re-pushed by a "
            "transition that reads it"
        )
    return q2, gamma


def enterable_nodes(start: Hashable, moves: Iterable[tuple[tuple, Hashable, tuple]]) -> set:
    """An over-approximation of the (state, top) pairs that some run can reach, from
    ``moves`` = (key, q2, gamma) triples: start from (start, BOTTOM); a move from a reached
    (q, X) reaches (q2, Y1) when it pushes Y1…Yn, and (q2, Y) for every symbol Y pushed anywhere
    so far when it pops."""
    by_node: dict = {}
    for (q, _, x), q2, gamma in moves:
        by_node.setdefault((q, x), []).append((q2, gamma))
    nodes = {(start, BOTTOM)}
    pushed = {BOTTOM}
    popped_into: set = set()
    changed = True
    while changed:
        changed = False
        for node in list(nodes):  # noqa: PERF101 (the loop adds to nodes)
            for q2, gamma in by_node.get(node, ()):
                new_syms = set(gamma) - pushed
                if new_syms:
                    pushed |= new_syms
                    changed = True
                if gamma:
                    if (q2, gamma[0]) not in nodes:
                        nodes.add((q2, gamma[0]))
                        changed = True
                elif q2 not in popped_into:
                    popped_into.add(q2)
                    changed = True
        for q2 in popped_into:
            for y in pushed:
                if (q2, y) not in nodes:
                    nodes.add((q2, y))
                    changed = True
    return nodes


def find_epsilon_loops(
    eps_moves: Mapping[tuple, Iterable[tuple[Hashable, tuple]]],
    enterable: set | None = None,
) -> list[tuple]:
    """ε-cycles of a pushdown machine, as tuples of (state, top) nodes (one tuple per strongly
    connected component of the graph below that contains a cycle).

    ``eps_moves`` maps (q, X) to the (q2, gamma) of its ε-transitions. The graph has an edge
    (q, X) → (p, Y) when, from state q with X on top, ε-moves alone reach state p with Y on top
    without ever going below the height where X was: the first move pushes gamma = Y1…Yn, and the
    run is then at Yk after Y1…Y(k-1) have been popped by ε-runs (computed as a least fixpoint of
    "pop summaries": the states in which an ε-run from (q, [X]) first empties its relative stack).
    A cycle in this graph is an ε-run that repeats forever from any configuration with that state
    and top; conversely every infinite ε-run passes a node of a cycle (at the points where its
    height is the minimum of its future). Only components with a node in ``enterable`` (all, when
    None) are reported; `enterable_nodes` over-approximates the reachable (state, top) pairs, so the
    check is conservative (it may report a loop that no input reaches) but never misses one.
    """
    eps = {node: list(targets) for node, targets in eps_moves.items()}
    pops: dict = {}
    changed = True
    while changed:  # least fixpoint of the pop summaries
        changed = False
        for node, targets in eps.items():
            for q2, gamma in targets:
                cur = {q2}
                for y in gamma:
                    cur = set().union(*(pops.get((p, y), ()) for p in cur)) if cur else set()
                new = cur - pops.get(node, set())
                if new:
                    pops.setdefault(node, set()).update(new)
                    changed = True
    succ: dict = {}
    for node, targets in eps.items():
        for q2, gamma in targets:
            cur = {q2}
            for y in gamma:
                for p in cur:
                    succ.setdefault(node, set()).add((p, y))
                cur = set().union(*(pops.get((p, y), ()) for p in cur)) if cur else set()
    return [
        comp
        for comp in _cyclic_components(succ)
        if enterable is None or any(node in enterable for node in comp)
    ]


def _cyclic_components(succ: Mapping[Any, set]) -> list[tuple]:
    """Strongly connected components with at least one cycle (Tarjan, iterative)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    comps: list[tuple] = []
    counter = 0
    for root in list(succ):
        if root in index:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ.get(w, ()))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succ.get(v, ()):
                    comps.append(tuple(sorted(comp, key=repr)))
    return comps


# --- the deterministic core shared by DPDA and DPDT --------------------------------------------
class DeterministicPushdown(StateIndexed, Machine):
    """Validation, simulation and normal form shared by `DPDA` and `DPDT`.

    Internally a transition is ``(q, a, X) -> (q2, out, gamma)`` with ``out`` a tuple of output
    symbols (always () for a DPDA).
    """

    _trans: dict

    # --- construction ---------------------------------------------------------------------------
    def _setup(self, spec: _Spec, trans: dict, name: str | None) -> None:
        self.states = spec.states
        self._state_index = spec.index
        self.alphabet = spec.alphabet
        self.stack_alphabet = spec.stack_alphabet
        self.start = spec.start
        self.accepting = spec.accepting
        self.name = name
        self._spec = spec
        self._trans = trans
        by_node: dict = {}
        for key in trans:
            q, _, x = key
            by_node.setdefault((q, x), []).append(key)
        for (q, x), keys in by_node.items():
            eps = [k for k in keys if k[1] is EPSILON]
            reads = [k for k in keys if k[1] is not EPSILON]
            if eps and reads:
                raise DeterminismError(
                    f"transitions {eps[0]!r} and {reads[0]!r} can both fire in state {q!r} with "
                    f"top {x!r}: a deterministic machine may have an ε-transition on (state, top) "
                    "only when it has no input transition there; use PDA for nondeterminism"
                )
        loops = self.epsilon_loops()
        if loops:
            cyc = loops[0]
            shown = ", ".join(f"({q!r}, ε, {x!r}) → ({self._trans[(q, EPSILON, x)][0]!r}, "
                              f"{self._trans[(q, EPSILON, x)][2]!r})" for q, x in cyc[:6])
            raise EpsilonLoopError(
                f"the ε-transitions {shown}{' …' if len(cyc) > 6 else ''} form a cycle that never "
                "consumes input and never shrinks the stack below where it started; break the "
                "cycle (e.g. make one of them read an input symbol)"
            )

    def _parse_deterministic(self, spec: _Spec, transitions: Mapping, with_output) -> dict:
        trans: dict = {}
        for key, value in dict(transitions).items():
            key = _check_key(key, spec)
            if isinstance(value, (set, frozenset, list)):
                options = list(value)
                if len(options) != 1:
                    raise DeterminismError(
                        f"transition {key!r} has {len(options)} targets {value!r}: a deterministic "
                        "machine has one; use PDA for a nondeterministic machine"
                    )
                value = options[0]
            trans[key] = with_output(key, value)
        return trans

    # --- identity -------------------------------------------------------------------------------
    @property
    def file_kind(self) -> str:  # type: ignore[override]
        """Its kind in machine files: "dpda" for a recogniser, "dpdt" for a transducer (a machine
        with an output alphabet)."""
        return "dpda" if self.output_alphabet is None else "dpdt"

    def _key_extra(self) -> tuple:
        return ()

    @cached_property
    def _key(self) -> tuple:
        return (
            type(self).__name__,
            self.states,
            self.alphabet,
            self.stack_alphabet,
            frozenset(self._trans.items()),
            self.start,
            self.accepting,
        ) + self._key_extra()

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return (f"<{type(self).__name__}{label}: {len(self.states)} states, {len(self.alphabet)} "
                f"input symbols, {len(self.stack_alphabet)} stack symbols, "
                f"{len(self._trans)} transitions>")

    # --- structure ------------------------------------------------------------------------------
    @property
    def input_alphabet(self) -> Alphabet:
        return self.alphabet

    @property
    def is_realtime(self) -> bool:
        """True when no transition is an ε-move (one input symbol per move)."""
        return all(key[1] is not EPSILON for key in self._trans)

    @property
    def is_normal(self) -> bool:
        """True when every transition is noop, push Y, pop or replace with Y."""
        try:
            for key in self._trans:
                self.op(key)
        except AutomatonError:
            return False
        return True

    def op(self, transition: tuple) -> tuple[str, Hashable | None]:
        """The stack operation of a transition (given by its key (q, a, X), or a (key, value) pair):
        ("noop", None), ("push", Y), ("pop", None) or ("replace", Y); AutomatonError when its
        pushed string is longer (see `normal_form`)."""
        key = transition
        if (isinstance(transition, tuple) and len(transition) == 2
                and isinstance(transition[0], tuple) and len(transition[0]) == 3):
            key = transition[0]
        if key not in self._trans:
            raise AutomatonError(f"{key!r} is not a transition of {self!r}")
        return stack_op(key[2], self._trans[key][2])

    @cached_property
    def pushable(self) -> frozenset:
        """Stack symbols pushed by some transition."""
        return frozenset(s for (_, _, g) in self._trans.values() for s in g if s is not BOTTOM)

    def epsilon_loops(self) -> list[tuple]:
        """ε-cycles that can be entered (see `find_epsilon_loops`); empty for every machine that
        constructed successfully, since construction raises EpsilonLoopError otherwise."""
        eps: dict = {}
        for (q, a, x), (q2, _, g) in self._trans.items():
            if a is EPSILON:
                eps.setdefault((q, x), []).append((q2, g))
        moves = ((k, q2, g) for k, (q2, _, g) in self._trans.items())
        enterable = enterable_nodes(self.start, moves)
        return find_epsilon_loops(eps, enterable)

    # --- the protocol ---------------------------------------------------------------------------
    def _make_config(self, state, stack, emitted: tuple) -> PDAConfig:
        return PDAConfig(state, stack)

    def dead_config(self) -> PDAConfig:
        return self._make_config(None, Stack(), ())

    def _move(self, state, stack: Stack, a) -> tuple | None:
        """(state, stack, emitted) after the move reading ``a`` (EPSILON for an ε-move), or None
        when none applies; O(1) plus the symbols pushed."""
        reads, eps = self._moves
        x = stack.top
        move = eps.get((state, x)) if a is EPSILON else reads.get((state, a, x))
        if move is None:
            return None
        q2, out, keep, pushed = move
        return q2, (stack if keep else stack.pop()).push(*pushed), out

    def _closure(self, state, stack: Stack, out: tuple) -> tuple:
        """Follow ε-moves while one applies (finite: ε-loops are rejected at construction)."""
        if not self._moves[1]:                      # no ε-moves at all
            return state, stack, out
        while True:
            nxt = self._move(state, stack, EPSILON)
            if nxt is None:
                return state, stack, out
            state, stack, more = nxt
            out = out + more

    def initial(self) -> PDAConfig:
        state, stack, out = self._closure(self.start, Stack((BOTTOM,)), ())
        return self._make_config(state, stack, out)

    def step(self, config: PDAConfig, symbol: Hashable) -> PDAConfig:
        """Read one symbol, then follow ε-moves to the closure end; dead when no move applies."""
        if symbol not in self.alphabet:
            self.alphabet.index(symbol)  # InputError naming the symbol
        if config.state is None:
            return self.dead_config()
        nxt = self._move(config.state, config.stack, symbol)
        if nxt is None:
            return self.dead_config()
        return self._make_config(*self._closure(*nxt))

    def is_dead(self, config: PDAConfig) -> bool:
        return config.state is None

    @cached_property
    def _moves(self) -> tuple[dict, dict]:
        """The transitions as stack edits: {(q, a, X): (q2, out, keep, pushed)} for the input
        moves and {(q, X): …} for the ε-moves, where ``keep`` says that γ ends with X (the cell
        of X stays: a noop or a push) and ``pushed`` lists the symbols then pushed, bottom first."""
        reads, eps = {}, {}
        for (q, a, x), (q2, out, gamma) in self._trans.items():
            keep = bool(gamma) and gamma[-1] == x
            edit = (q2, out, keep, tuple(reversed(gamma[:-1] if keep else gamma)))
            if a is EPSILON:
                eps[(q, x)] = edit
            else:
                reads[(q, a, x)] = edit
        return reads, eps

    def _walk(self, symbols: Sequence[Hashable]) -> Iterator[tuple]:
        """(state, stack, emitted) after the initial closure and after each symbol (validated
        symbols); state None once dead. O(1) per move: the stack is a shared-tail `Stack`."""
        state, stack, out = self._closure(self.start, Stack((BOTTOM,)), ())
        yield state, stack, out
        dead = (None, Stack(), ())
        for a in symbols:
            nxt = None if state is None else self._move(state, stack, a)
            if nxt is None:
                state = None
                yield dead
                continue
            state, stack, out = self._closure(*nxt)
            yield state, stack, out

    def run(self, string: str | Sequence[Hashable]) -> PDAConfig:
        """The configuration after reading the whole string (O(1) per move)."""
        last = None
        for last in self._walk(self.alphabet.split(string)):
            pass
        return self._make_config(*last)

    def iter_trace(self, string: str | Sequence[Hashable]) -> Iterator[Step]:
        symbols = self.alphabet.split(string)
        make, output = self._make_config, self.output
        for i, (state, stack, out) in enumerate(self._walk(symbols)):
            config = make(state, stack, out)
            yield Step(symbols[i - 1] if i else None, config, output(config))

    def depth_profile(self, string: str | Sequence[Hashable]) -> list[int | None]:
        """Stack depth (symbols above BOTTOM) after each prefix, the empty one first; None once
        dead."""
        return [None if s.config.state is None else s.config.depth for s in self.iter_trace(string)]

    # --- normal form ----------------------------------------------------------------------------
    def _rebuild(self, states: tuple, trans: dict) -> DeterministicPushdown:
        raise NotImplementedError

    def normal_form(self) -> DeterministicPushdown:
        """An equivalent machine whose every transition is noop, push Y (gamma = (Y, X)), pop
        (gamma = ()) or replace with Y (gamma = (Y,)).

        A longer gamma = Y1…Yn replacing X is split: the original move does push Y(n-1) when
        Yn = X (else replace X with Yn) and goes to a fresh `AuxState`; a chain of ε-moves through
        fresh states pushes the remaining symbols bottom-up, ending in the original target. The
        output (for a transducer) stays on the first move. Moves with n ≤ 1, or n = 2 with
        Y2 = X, are kept, so a machine that only pushes one symbol at a time stays real-time; any
        split adds ε-moves and makes the machine non-real-time. Fresh states are not accepting and
        never end an ε-closure, so the configurations after each prefix (and the language, and the
        output per step) are unchanged apart from the new states.
        """
        states = list(self.states)
        trans: dict = {}
        for key, (q2, out, gamma) in self._trans.items():
            x = key[2]
            n = len(gamma)
            if n <= 1 or (n == 2 and gamma[1] == x):
                trans[key] = (q2, out, gamma)
                continue
            if gamma[-1] == x:
                first, top, rest = (gamma[-2], x), gamma[-2], gamma[:-2]
            else:
                first, top, rest = (gamma[-1],), gamma[-1], gamma[:-1]
            aux = [AuxState(key, i) for i in range(len(rest))]
            states.extend(aux)
            trans[key] = (aux[0], out, first)
            for i, y in enumerate(reversed(rest)):
                target = aux[i + 1] if i + 1 < len(aux) else q2
                trans[(aux[i], EPSILON, top)] = (target, (), (y, top))
                top = y
        return self._rebuild(tuple(states), trans)

    # --- batched simulation ---------------------------------------------------------------------
    @property
    def bottom_code(self) -> int:
        """The code of BOTTOM in the ``stack``/``top`` fields: len(stack_alphabet)."""
        return len(self.stack_alphabet)

    def stack_code(self, symbol: Hashable) -> int:
        return self.bottom_code if symbol is BOTTOM else self.stack_alphabet.index(symbol)

    @cached_property
    def _tables(self) -> dict:
        """Dense lookup tables indexed by (state, input symbol or ε = |Σ|, top code)."""
        n, k, g = len(self.states), len(self.alphabet), len(self.stack_alphabet) + 1
        L = max((len(v[2]) for v in self._trans.values()), default=0)
        W = max((len(v[1]) for v in self._trans.values()), default=0)
        nxt = np.full((n, k + 1, g), -1, dtype=np.int64)
        glen = np.zeros((n, k + 1, g), dtype=np.int64)
        gsym = np.full((n, k + 1, g, max(L, 1)), -1, dtype=np.int64)
        olen = np.zeros((n, k + 1, g), dtype=np.int64)
        osym = np.full((n, k + 1, g, max(W, 1)), -1, dtype=np.int64)
        out_alpha = getattr(self, "output_alphabet", None)
        for (q, a, x), (q2, out, gamma) in self._trans.items():
            i = (self._state_index[q], k if a is EPSILON else self.alphabet.index(a),
                 self.stack_code(x))
            nxt[i] = self._state_index[q2]
            glen[i] = len(gamma)
            gsym[i][: len(gamma)] = [self.stack_code(s) for s in gamma[::-1]]  # bottom first
            olen[i] = len(out)
            if out:
                osym[i][: len(out)] = [out_alpha.index(y) for y in out]
        for arr in (nxt, glen, gsym, olen, osym):
            arr.setflags(write=False)
        return {"next": nxt, "glen": glen, "gsym": gsym, "olen": olen, "osym": osym, "L": L,
                "W": W, "eps": k}

    def _simulate(self, ids: np.ndarray, lengths: np.ndarray, window: int | None = None,
                  walk: np.random.Generator | None = None, walk_depth: int | None = None
                  ) -> dict:
        """Vectorised over the batch: the stack is an int array (B, capacity) with a top-index
        pointer per row; the loop runs over time and, within a time step, over ε-closure rounds
        (each round moves every row that still has an ε-move); a move costs O(1) per row.
        Returns per-time arrays. With ``window`` = w, the whole stack is not kept per step:
        ``stack_top`` (B, T+1, w) holds the codes of the top w cells, top first (-1 below the
        bottom and once dead), so memory is O(B·T·w) however deep the stacks get.

        With ``walk`` (real-time machines only), the symbols are not read from ``ids`` but drawn:
        at step t each active row picks uniformly among the symbols with a move from its (state,
        top), writing it into ``ids`` (filled in place); a row with none ends there (its
        ``lengths`` entry, changed in place, becomes t). The draws are those of
        `pdanet.verify.strings.random_walks`, one ``walk.random((rows, |Σ|))`` per step. With
        ``walk_depth`` = m, a move that would leave more than m symbols above BOTTOM is not
        allowed (the walk of ``self.bounded(m)``)."""
        tab = self._tables
        nxt, glen, gsym = tab["next"], tab["glen"], tab["gsym"]
        olen, osym = tab["olen"], tab["osym"]
        B, T = ids.shape
        Lmax = max(tab["L"], 1)
        Wmax = max(tab["W"], 1)
        cap = 4
        stack = np.full((B, cap), -1, dtype=np.int64)
        stack[:, 0] = self.bottom_code
        h = np.zeros(B, dtype=np.int64)  # index of the top cell (= depth); -1 dead
        q = np.full(B, self._state_index[self.start], dtype=np.int64)
        ecap = 1
        emit = np.full((B, ecap), -1, dtype=np.int64)
        ecount = np.zeros(B, dtype=np.int64)
        rows_all = np.arange(B)
        cols_push = np.arange(Lmax)
        cols_out = np.arange(Wmax)
        # a generous safety bound on ε-rounds per step (ε-loops are excluded at construction)
        round_cap_base = 4 * (len(self.states) + 1) * (len(self.stack_alphabet) + 2) ** 2

        def apply(rows: np.ndarray, sym: np.ndarray) -> None:
            nonlocal stack, cap, emit, ecap
            top = stack[rows, h[rows]]
            idx = (q[rows], sym, top)
            q2 = nxt[idx]
            blocked = rows[q2 < 0]
            if blocked.size:
                q[blocked] = -1
                h[blocked] = -1
                stack[blocked] = -1
            ok = q2 >= 0
            r = rows[ok]
            if r.size == 0:
                return
            idx = tuple(a[ok] for a in idx)
            n_push = glen[idx]
            old_h = h[r]
            new_h = old_h - 1 + n_push
            need = int(new_h.max(initial=0)) + 1
            if need > cap:
                grow = max(need, 2 * cap) - cap
                stack = np.concatenate([stack, np.full((B, grow), -1, dtype=np.int64)], axis=1)
                cap += grow
            pos = old_h[:, None] + cols_push[None, :]
            valid = cols_push[None, :] < n_push[:, None]
            rr = np.broadcast_to(r[:, None], pos.shape)
            stack[rr[valid], pos[valid]] = gsym[idx][valid]
            # clear the popped cell (a move pops one cell and writes from there up, so only a
            # move that pushes nothing leaves a cell above the new top): O(1) per row
            popped = n_push == 0
            stack[r[popped], old_h[popped]] = -1
            h[r] = new_h
            q[r] = q2[ok]
            n_out = olen[idx]
            if n_out.any():
                need_e = int((ecount[r] + n_out).max())
                if need_e > ecap:
                    grow = max(need_e, 2 * ecap) - ecap
                    emit = np.concatenate([emit, np.full((B, grow), -1, dtype=np.int64)], axis=1)
                    ecap += grow
                epos = ecount[r][:, None] + cols_out[None, :]
                evalid = cols_out[None, :] < n_out[:, None]
                er = np.broadcast_to(r[:, None], epos.shape)
                emit[er[evalid], epos[evalid]] = osym[idx][evalid]
                ecount[r] += n_out

        realtime = self.is_realtime

        def closure(active: np.ndarray) -> None:
            if realtime:                         # no ε-moves at all
                return
            rounds = 0
            limit = round_cap_base * (int(h.max(initial=0)) + 2)
            while True:
                live = active & (q >= 0)
                r = rows_all[live]
                if r.size == 0:
                    return
                has_eps = nxt[q[r], tab["eps"], stack[r, h[r]]] >= 0
                r = r[has_eps]
                if r.size == 0:
                    return
                rounds += 1
                if rounds > limit:
                    raise EpsilonLoopError(
                        f"ε-closure of batch row {int(r[0])} did not end after {limit} moves"
                    )
                apply(r, np.full(r.size, tab["eps"], dtype=np.int64))

        hist_stack, hist_q, hist_h, hist_emit, hist_ecount = [], [], [], [], []

        offsets = np.arange(window if window else 0)

        def record() -> None:
            if window:
                pos = h[:, None] - offsets[None, :]
                hist_stack.append(np.where(pos >= 0, stack[rows_all[:, None],
                                                           np.maximum(pos, 0)], -1))
            else:
                hist_stack.append(stack.copy())
            hist_q.append(q.copy())
            hist_h.append(h.copy())
            hist_emit.append(emit.copy())
            hist_ecount.append(ecount.copy())

        closure(np.ones(B, dtype=bool))
        record()
        for t in range(T):
            active = (t < lengths) & (q >= 0)
            emit[active] = -1
            ecount[active] = 0
            r = rows_all[active]
            if walk is not None and r.size:
                r = self._draw(walk, r, t, q, stack[r, h[r]], ids, lengths,
                               None if walk_depth is None else (h[r], walk_depth))
            if r.size:
                apply(r, ids[r, t])
            closure(active)
            record()
        if window:
            state = np.stack(hist_q, axis=1)
            depth = np.stack(hist_h, axis=1)
            stack_top = np.stack(hist_stack, axis=1)
            return {"state": state, "stack_top": stack_top, "depth": depth,
                    "top": stack_top[..., 0], "emitted": self._stack_emitted(
                        B, T, hist_emit, hist_ecount),
                    "emitted_count": np.stack(hist_ecount, axis=1)}
        D = max(int(max((hh.max(initial=0) for hh in hist_h), default=0)) + 1, 1)
        stacks = np.full((B, T + 1, D), -1, dtype=np.int64)
        for t, s in enumerate(hist_stack):
            w = min(D, s.shape[1])
            stacks[:, t, :w] = s[:, :w]
        emits = self._stack_emitted(B, T, hist_emit, hist_ecount)
        state = np.stack(hist_q, axis=1)
        depth = np.stack(hist_h, axis=1)
        top = np.where(depth >= 0, np.take_along_axis(
            stacks, np.maximum(depth, 0)[..., None], axis=2)[..., 0], -1)
        return {"state": state, "stack": stacks, "depth": depth, "top": top, "emitted": emits,
                "emitted_count": np.stack(hist_ecount, axis=1)}

    def _draw(self, rng: np.random.Generator, rows: np.ndarray, t: int, q: np.ndarray,
              top: np.ndarray, ids: np.ndarray, lengths: np.ndarray,
              cap: tuple[np.ndarray, int] | None = None) -> np.ndarray:
        """One step of `_simulate`'s walk: each row's symbol drawn uniformly among those with a
        move (written into ``ids[:, t]``); rows with none end at length t. With ``cap`` = (the
        rows' depths, m), only moves that leave at most m symbols above BOTTOM count. The rows
        moving."""
        k = len(self.alphabet)
        tab = self._tables
        key = (q[rows][:, None], np.arange(k)[None, :], top[:, None])
        alive = tab["next"][key] >= 0
        if cap is not None:        # a real-time move pops the top cell and writes γ from there
            depth, m = cap
            alive &= depth[:, None] - 1 + tab["glen"][key] <= m
        choice, stuck = draw_allowed(alive, rng)
        lengths[rows[stuck]] = t
        moved = ~stuck
        ids[rows[moved], t] = choice[moved]
        return rows[moved]

    def random_walks(self, n: int, length: int, rng: np.random.Generator,
                     max_depth: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """n random walks of `length` symbols, each symbol uniform among those with a move from
        the current configuration (the rule and the random draws of
        `pdanet.verify.strings.random_walks`, so the same strings), in O(n·|Σ|) per step;
        None for a machine with ε-moves (a move may die in its ε-closure: use the generic
        walk). With ``max_depth`` = m, a move to a configuration with more than m symbols above
        BOTTOM does not count (the live moves of ``self.bounded(m)``). Returns (ids (n, length)
        padded with -1, lengths)."""
        if not self.is_realtime:
            return None
        ids = np.full((n, length), -1, dtype=np.int64)
        lengths = np.full(n, length, dtype=np.int64)
        self._simulate(ids, lengths, window=1, walk=rng, walk_depth=max_depth)
        return ids, lengths

    @staticmethod
    def _stack_emitted(B: int, T: int, hist_emit: list, hist_ecount: list) -> np.ndarray:
        W = max(int(max((e.max(initial=0) for e in hist_ecount), default=0)), 1)
        emits = np.full((B, T + 1, W), -1, dtype=np.int64)
        for t, e in enumerate(hist_emit):
            w = min(W, e.shape[1])
            emits[:, t, :w] = e[:, :w]
        return emits

    def output_field(self, sim: dict) -> np.ndarray:
        """The ``output`` field of `run_batch` from the simulation's arrays: accepted (bool) for a
        recogniser; the emitted output index (-1 none) for a "symbol" transducer, the emitted
        indices (…, W) otherwise."""
        if self.output_alphabet is None:
            return self.accept_array(sim["state"], sim["depth"])
        emitted = sim["emitted"]
        return emitted[..., 0] if self.output_kind == "symbol" else emitted

    def run_batch_window(self, ids: np.ndarray, lengths: np.ndarray | None = None,
                         cells: int = 3) -> BatchTrace:
        """`run_batch` without whole stacks: ``state``, ``depth``, ``top``, ``output`` and
        ``stack_top`` (B, T+1, cells), the codes of the top ``cells`` cells, top first (-1 below
        BOTTOM and once dead). Memory O(B·T·cells), however deep the stacks get: the form in
        which `pdanet.verify` compares very long strings incrementally."""
        ids, lengths = self.check_ids(ids, lengths)
        sim = self._simulate(ids, lengths, window=max(int(cells), 1))
        fields = {k: sim[k] for k in ("state", "stack_top", "depth", "top")}
        fields["output"] = self.output_field(sim)
        return BatchTrace(lengths, fields)

    # --- depth bounds ---------------------------------------------------------------------------
    def bounded(self, m: int) -> BoundedPDA:
        """The machine restricted to stack depth ≤ m (a finite-state `BoundedPDA`)."""
        return BoundedPDA(self, m)


class DPDA(DeterministicPushdown):
    """A deterministic pushdown automaton (immutable, validated; see the module docstring).

    Determinism: for each (state, top) there is either one ε-transition and no input transition, or
    at most one transition per input symbol (DeterminismError names the clash). Undeclared states
    or symbols and a missing start state raise AutomatonError; an ε-cycle that can be entered raises
    EpsilonLoopError (see `find_epsilon_loops`). ``acceptance`` is "final_state" (the closure-end
    state is in ``accepting``) or "empty_stack" (only BOTTOM is left; ``accepting`` must be empty).
    """

    output_kind = "accept"
    output_alphabet = None

    def __init__(
        self,
        states: Iterable[Hashable],
        input_alphabet: Alphabet | Iterable[Hashable] | str,
        stack_alphabet: Alphabet | Iterable[Hashable] | str,
        transitions: Mapping[tuple, Any],
        start: Hashable,
        accepting: Iterable[Hashable] = (),
        acceptance: str = "final_state",
        name: str | None = None,
    ):
        spec = _validate_common(states, input_alphabet, stack_alphabet, start, accepting)
        if acceptance not in ACCEPTANCE_MODES:
            raise AutomatonError(
                f"acceptance {acceptance!r} is not one of {ACCEPTANCE_MODES}"
            )
        if acceptance == "empty_stack" and spec.accepting:
            raise AutomatonError(
                "accepting states are meaningless under acceptance='empty_stack'; drop "
                "`accepting` or use acceptance='final_state'"
            )
        self.acceptance = acceptance

        def parse(key, value):
            if not (isinstance(value, tuple) and len(value) == 2):
                raise AutomatonError(
                    f"transition {key!r} must map to a pair (next state, pushed string), "
                    f"got {value!r}"
                )
            q2, gamma = _check_move(key, value[0], value[1], spec)
            return (q2, (), gamma)

        trans = self._parse_deterministic(spec, transitions, parse)
        self._setup(spec, trans, name)

    def _key_extra(self) -> tuple:
        return (self.acceptance,)

    @property
    def transitions(self) -> dict:
        """{(q, a, X): (q2, gamma)} with gamma normalised to a tuple."""
        return {k: (q2, g) for k, (q2, _, g) in self._trans.items()}

    def _rebuild(self, states: tuple, trans: dict) -> DPDA:
        return DPDA(states, self.alphabet, self.stack_alphabet,
                    {k: (q2, g) for k, (q2, _, g) in trans.items()}, self.start, self.accepting,
                    self.acceptance, self.name)

    def output(self, config: PDAConfig) -> bool:
        if config.state is None:
            return False
        if self.acceptance == "final_state":
            return config.state in self.accepting
        return config.stack == (BOTTOM,)

    @cached_property
    def accepting_mask(self) -> np.ndarray:
        mask = np.zeros(len(self.states), dtype=bool)
        for q in self.accepting:
            mask[self._state_index[q]] = True
        return mask

    def accept_array(self, state: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """The ``output`` field from ``state`` and ``depth`` arrays."""
        if self.acceptance == "final_state":
            return (state >= 0) & self.accepting_mask[np.maximum(state, 0)]
        return (state >= 0) & (depth == 0)

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """Vectorised simulation. Fields (B, T+1, …): ``state`` (index into ``states``, -1 dead),
        ``stack`` (B, T+1, Dmax): codes bottom first — index into ``stack_alphabet``, BOTTOM =
        len(stack_alphabet) at position 0 — with -1 above the top and everywhere once dead;
        ``depth`` (symbols above BOTTOM, -1 dead), ``top`` (code of the top, -1 dead) and
        ``output`` (bool, accepted)."""
        ids, lengths = self.check_ids(ids, lengths)
        sim = self._simulate(ids, lengths)
        fields = {k: sim[k] for k in ("state", "stack", "depth", "top")}
        fields["output"] = self.accept_array(sim["state"], sim["depth"])
        return BatchTrace(lengths, fields)


# --- nondeterministic PDA -------------------------------------------------------------------------
class PDA(Machine):
    """A nondeterministic pushdown automaton, simulated breadth first over configuration sets.

    ``transitions`` maps (q, a or EPSILON, X) to a set or list of (q2, gamma) moves (a tuple is one
    move). The configuration after a prefix is a frozenset of `PDAConfig` (the whole ε-closure, see
    the module docstring); ``run`` returns it and ``accepts`` asks whether any member accepts. Each
    ε-closure is explored breadth first and may hold at most ``max_configs`` configurations: going
    past it raises SearchBoundError (an ε-cycle that pushes makes the closure infinite).
    """

    output_kind = "accept"
    output_alphabet = None
    file_kind = "pda"

    def __init__(
        self,
        states: Iterable[Hashable],
        input_alphabet: Alphabet | Iterable[Hashable] | str,
        stack_alphabet: Alphabet | Iterable[Hashable] | str,
        transitions: Mapping[tuple, Any],
        start: Hashable,
        accepting: Iterable[Hashable] = (),
        acceptance: str = "final_state",
        name: str | None = None,
        max_configs: int = 100_000,
    ):
        spec = _validate_common(states, input_alphabet, stack_alphabet, start, accepting)
        if acceptance not in ACCEPTANCE_MODES:
            raise AutomatonError(f"acceptance {acceptance!r} is not one of {ACCEPTANCE_MODES}")
        if acceptance == "empty_stack" and spec.accepting:
            raise AutomatonError(
                "accepting states are meaningless under acceptance='empty_stack'; drop "
                "`accepting` or use acceptance='final_state'"
            )
        if not isinstance(max_configs, (int, np.integer)) or isinstance(max_configs, bool) \
                or max_configs < 1:
            raise InputError(f"max_configs must be a positive integer, got {max_configs!r}")
        trans: dict = {}
        for key, value in dict(transitions).items():
            key = _check_key(key, spec)
            options = list(value) if isinstance(value, (set, frozenset, list)) else [value]
            moves = set()
            for opt in options:
                if not (isinstance(opt, tuple) and len(opt) == 2):
                    raise AutomatonError(
                        f"transition {key!r}: each move must be a pair (next state, pushed "
                        f"string), got {opt!r}"
                    )
                moves.add(_check_move(key, opt[0], opt[1], spec))
            if moves:
                trans[key] = frozenset(moves)
        self.states = spec.states
        self._state_index = spec.index
        self.alphabet = spec.alphabet
        self.stack_alphabet = spec.stack_alphabet
        self.start = spec.start
        self.accepting = spec.accepting
        self.acceptance = acceptance
        self.name = name
        self.max_configs = int(max_configs)
        self.transitions = trans

    @property
    def input_alphabet(self) -> Alphabet:
        return self.alphabet

    @cached_property
    def _key(self) -> tuple:
        return ("PDA", self.states, self.alphabet, self.stack_alphabet,
                frozenset(self.transitions.items()), self.start, self.accepting, self.acceptance)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return (f"<PDA{label}: {len(self.states)} states, {len(self.alphabet)} input symbols, "
                f"{len(self.stack_alphabet)} stack symbols>")

    @property
    def is_realtime(self) -> bool:
        return all(key[1] is not EPSILON for key in self.transitions)

    @property
    def is_deterministic(self) -> bool:
        """True when the moves satisfy the DPDA determinism condition."""
        nodes: dict = {}
        for (q, a, x), moves in self.transitions.items():
            if len(moves) > 1:
                return False
            nodes.setdefault((q, x), set()).add(a is EPSILON)
        return all(len(kinds) == 1 for kinds in nodes.values())

    def _moves(self, config: PDAConfig, a) -> Iterable[PDAConfig]:
        stack = config.stack
        for q2, gamma in self.transitions.get((config.state, a, stack.top), ()):
            yield PDAConfig(q2, stack.pop().push(*gamma[::-1]))

    def _closure(self, configs: Iterable[PDAConfig], where: str) -> frozenset:
        seen = set(configs)
        frontier = deque(seen)
        while frontier:
            c = frontier.popleft()
            for c2 in self._moves(c, EPSILON):
                if c2 not in seen:
                    seen.add(c2)
                    if len(seen) > self.max_configs:
                        raise SearchBoundError(
                            f"{where}: more than max_configs={self.max_configs} configurations "
                            "(an ε-cycle that pushes makes this infinite); raise `max_configs` or "
                            "remove the cycle"
                        )
                    frontier.append(c2)
        return frozenset(seen)

    def initial(self) -> frozenset:
        return self._closure([PDAConfig(self.start, Stack((BOTTOM,)))], "the initial ε-closure")

    def step(self, config: frozenset, symbol: Hashable) -> frozenset:
        """All configurations reached by one move reading `symbol`, then their ε-closure."""
        if symbol not in self.alphabet:
            self.alphabet.index(symbol)
        moved = {c2 for c in config for c2 in self._moves(c, symbol)}
        if len(moved) > self.max_configs:
            raise SearchBoundError(
                f"reading {symbol!r}: more than max_configs={self.max_configs} configurations; "
                "raise `max_configs`"
            )
        return self._closure(moved, f"the ε-closure after reading {symbol!r}")

    def config_accepts(self, config: PDAConfig) -> bool:
        if self.acceptance == "final_state":
            return config.state in self.accepting
        return config.stack == (BOTTOM,)

    def output(self, config: frozenset) -> bool:
        return any(self.config_accepts(c) for c in config)

    def is_dead(self, config: frozenset) -> bool:
        return not config

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """Fields ``output`` (bool, accepted) and ``num_configs`` (size of the configuration set).
        The nondeterministic simulation works string by string (configuration sets do not fit a
        fixed-width array)."""
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        out = np.zeros((B, T + 1), dtype=bool)
        count = np.zeros((B, T + 1), dtype=np.int64)
        for b in range(B):
            c = self.initial()
            out[b, 0], count[b, 0] = self.output(c), len(c)
            for t in range(T):
                if t < lengths[b]:
                    c = self.step(c, self.alphabet.symbols[ids[b, t]])
                out[b, t + 1], count[b, t + 1] = self.output(c), len(c)
        return BatchTrace(lengths, {"output": out, "num_configs": count})

    def bounded(self, m: int):
        raise CompileError(
            f"{self!r} is nondeterministic: a depth bound does not make it one finite-state "
            "machine. Compile it to the nondeterministic stack target (DuSell & Chiang's NS-RNN), "
            "or give an equivalent DPDA"
        )


# --- depth-bounded deterministic machines ---------------------------------------------------------
class BoundedPDA(Machine):
    """A `DPDA` or `DPDT` restricted to stack depth ≤ m: a finite-state machine.

    It behaves exactly like the underlying machine (same configurations, outputs and batch fields)
    on every prefix whose closure-end configurations all have depth ≤ m (depth = symbols above
    BOTTOM, as in `depth_profile`; ε-moves inside a step may go deeper in between). The first
    configuration deeper than m is replaced by the dead one, which rejects every extension.

    The explicit automaton is built only by `to_dfa` (breadth-first search over the reachable
    live configurations, which become the DFA's states); construction costs nothing.
    """

    def __init__(self, machine: Machine, m: int):
        if isinstance(machine, PDA):
            raise CompileError(
                f"{machine!r} is nondeterministic: `bounded` needs a DPDA or DPDT. Compile the "
                "PDA to the nondeterministic stack target (DuSell & Chiang's NS-RNN) instead, or "
                "give an equivalent deterministic machine"
            )
        if not isinstance(machine, DeterministicPushdown):
            raise InputError(f"bounded() takes a DPDA or DPDT, got {type(machine).__name__}")
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise InputError(f"the depth bound must be an integer m ≥ 1, got m={m!r}")
        self.machine = machine
        self.m = int(m)
        self.alphabet = machine.alphabet
        self.output_alphabet = machine.output_alphabet
        self.output_kind = machine.output_kind
        self.name = f"{machine.name or type(machine).__name__.lower()}[depth≤{self.m}]"
        self._dfa: Any = None

    # identity ----------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"<BoundedPDA m={self.m} of {self.machine!r}>"

    @property
    def _key(self) -> tuple:
        return (self.machine, self.m)

    # protocol ----------------------------------------------------------------------------------
    def _clip(self, config: Any) -> Any:
        if config.state is not None and config.depth > self.m:
            return self.machine.dead_config()
        return config

    def initial(self) -> Any:
        return self._clip(self.machine.initial())

    def step(self, config: Any, symbol: Hashable) -> Any:
        return self._clip(self.machine.step(config, symbol))

    def output(self, config: Any) -> Any:
        return self.machine.output(config)

    def is_dead(self, config: Any) -> bool:
        return config.state is None

    def is_accepting(self, config: Any) -> bool:
        return self.machine.is_accepting(config)

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """The underlying machine's fields, with every row dead (state, depth, top, stack -1;
        output False / -1) from the first time its depth exceeds m. ``stack`` has width m + 1
        (BOTTOM and at most m symbols) and holds the codes as int16 (int64 only when
        |Γ| ≥ 32766); the other fields are int64 (``output``: as the underlying machine's).

        Memory: the ``stack`` field, B·(T+1)·(m+1) codes of 2 bytes, is allocated once. A
        real-time DPDA, or a real-time DPDT emitting at most one symbol a step, is simulated here
        with one (B, m+1) stack, copied into that field each step (O(B·m) a step, nothing deeper
        than m kept); otherwise the underlying machine runs on groups of rows whose whole-stack
        traces take at most `RUN_CHUNK_BYTES` (at least one row), each group's stacks cut to
        width m + 1 into it. The fields are those of one run over the whole batch (a "string"
        transducer's ``output`` is padded with -1 to the widest group's width, which is the
        whole batch's)."""
        ids, lengths = self.check_ids(ids, lengths)
        if self.machine.is_realtime and (self.output_alphabet is None
                                         or self.output_kind == "symbol"):
            return BatchTrace(lengths, self._run_realtime(ids, lengths))
        return BatchTrace(lengths, self._run_grouped(ids, lengths))

    def _run_grouped(self, ids: np.ndarray, lengths: np.ndarray,
                     chunk_bytes: int | None = None) -> dict[str, np.ndarray]:
        """`run_batch`'s fields from the underlying machine's runs on groups of rows, each of at
        most ``chunk_bytes`` (default `RUN_CHUNK_BYTES`) of whole-stack trace (at least one)."""
        B, T = ids.shape
        width = self.m + 1
        per_row = 8 * (T + 1) * width                     # the underlying run's int64 stacks
        budget = self.RUN_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        group = max(1, budget // max(per_row, 1))
        if group >= B:
            return self._cut(dict(self.machine.run_batch(ids, lengths).fields), None)
        stack = np.full((B, T + 1, width), -1, dtype=self._stack_dtype())
        parts: list[dict] = []
        for lo in range(0, B, group):
            hi = min(B, lo + group)
            part = dict(self.machine.run_batch(ids[lo:hi], lengths[lo:hi]).fields)
            parts.append(self._cut(part, stack[lo:hi]))
        fields = {}
        for name in parts[0]:
            if name == "stack":
                fields[name] = stack
                continue
            arrays = [p[name] for p in parts]
            if arrays[0].ndim == 3:       # per-step output of a "string" transducer: pad to one W
                W = max(a.shape[2] for a in arrays)
                fill = False if arrays[0].dtype == bool else -1
                arrays = [np.pad(a, ((0, 0), (0, 0), (0, W - a.shape[2])), constant_values=fill)
                          for a in arrays]
            fields[name] = np.concatenate(arrays, axis=0)
        return fields

    def _run_realtime(self, ids: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
        """`run_batch`'s fields for a real-time underlying machine, simulated with the depth
        bound: a row whose move would leave more than m symbols above BOTTOM dies there. As in
        `DeterministicPushdown._simulate`, positions past a row's length hold its last values."""
        pda = self.machine
        tab = pda._tables
        nxt, glen, gsym, olen, osym = (tab[k] for k in ("next", "glen", "gsym", "olen", "osym"))
        B, T = ids.shape
        m, width = self.m, self.m + 1
        cols = np.arange(max(tab["L"], 1))
        cur = np.full((B, width), -1, dtype=np.int64)       # bottom first, -1 above the top
        cur[:, 0] = pda.bottom_code
        h = np.zeros(B, dtype=np.int64)                     # depth; -1 dead
        q = np.full(B, pda.state_index(pda.start), dtype=np.int64)
        emit = np.full(B, -1, dtype=np.int64)               # what the last step emitted
        stack = np.full((B, T + 1, width), -1, dtype=self._stack_dtype())
        state = np.empty((B, T + 1), dtype=np.int64)
        depth = np.empty((B, T + 1), dtype=np.int64)
        emitted = np.empty((B, T + 1), dtype=np.int64) if self.output_alphabet else None

        def record(t: int) -> None:
            stack[:, t] = cur
            state[:, t], depth[:, t] = q, h
            if emitted is not None:
                emitted[:, t] = emit

        record(0)
        for t in range(T):
            r = np.flatnonzero((t < lengths) & (q >= 0))
            emit[r] = -1
            if r.size:
                idx = (q[r], ids[r, t], cur[r, h[r]])
                q2 = nxt[idx]
                n_push = glen[idx]
                new_h = h[r] - 1 + n_push
                die = (q2 < 0) | (new_h > m)               # no move, or deeper than m
                if die.any():
                    gone = r[die]
                    q[gone], h[gone], cur[gone] = -1, -1, -1
                ok = ~die
                rr, idx = r[ok], tuple(a[ok] for a in idx)
                n_push, old_h = n_push[ok], h[rr]
                pos = old_h[:, None] + cols[None, :]
                valid = cols[None, :] < n_push[:, None]
                rows2 = np.broadcast_to(rr[:, None], pos.shape)
                cur[rows2[valid], pos[valid]] = gsym[idx][valid]
                popped = n_push == 0                        # the old top cell is left over
                cur[rr[popped], old_h[popped]] = -1
                h[rr] = new_h[ok]
                q[rr] = q2[ok]
                if emitted is not None:
                    emit[rr] = np.where(olen[idx] > 0, osym[idx][:, 0], -1)
            record(t + 1)
        top = np.where(depth >= 0, np.take_along_axis(
            stack, np.maximum(depth, 0)[..., None], axis=2)[..., 0].astype(np.int64), -1)
        out = emitted if emitted is not None else pda.accept_array(state, depth)
        return {"state": state, "stack": stack, "depth": depth, "top": top, "output": out}

    def _stack_dtype(self) -> type:
        """The ``stack`` field's dtype: int16 when every code (-1 … BOTTOM = |Γ|) fits, else
        int64."""
        return np.int16 if self.machine.bottom_code < 2**15 - 1 else np.int64

    # whole-stack bytes of the underlying machine's run per group of rows (`run_batch`)
    RUN_CHUNK_BYTES = 64 << 20

    def _cut(self, fields: dict, into: np.ndarray | None) -> dict:
        """The underlying machine's fields of some rows made the bounded machine's, in place of
        ``fields``: dead from the first depth over m, ``stack`` cut or padded to width m + 1
        (written into ``into``, already -1, when given)."""
        over = np.maximum.accumulate(fields["depth"] > self.m, axis=1)
        for name in ("state", "depth", "top"):
            fields[name] = np.where(over, -1, fields[name])
        stack = fields["stack"]
        width = self.m + 1
        w = min(width, stack.shape[2])
        if into is None:
            into = np.full(stack.shape[:2] + (width,), -1, dtype=self._stack_dtype())
        into[:, :, :w] = stack[:, :, :w]
        into[over] = -1
        fields["stack"] = into
        out = fields["output"]
        mask = over.reshape(over.shape + (1,) * (out.ndim - 2))
        fields["output"] = np.where(mask, False if out.dtype == bool else -1, out)
        return fields

    def random_walks(self, n: int, length: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray] | None:
        """n random live walks of `length` symbols, drawn inside the underlying machine's batched
        simulation (`DeterministicPushdown.random_walks` with ``max_depth=m``): each symbol
        uniform among those whose step keeps the configuration live (a move exists and leaves at
        most m symbols above BOTTOM), one `draw_allowed` per step — the rule and the draws of
        `pdanet.verify.strings.random_walks`, so the same strings as stepping configurations.
        None when the underlying machine has ε-moves (use the generic walk). InputError for a
        count or length that is not an integer ≥ 0."""
        for name, v in (("n", n), ("length", length)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                raise InputError(f"random_walks needs an integer {name} ≥ 0, got {v!r}")
        return self.machine.random_walks(int(n), int(length), rng, max_depth=self.m)

    # the explicit automaton --------------------------------------------------------------------
    def _canonical(self, config: Any) -> Any:
        """The configuration as a DFA state: a transducer's last emission is dropped (a Mealy
        machine puts outputs on transitions)."""
        return replace(config, emitted=()) if hasattr(config, "emitted") else config

    def reachable_configs(self, max_states: int = 1_000_000) -> tuple[list, dict]:
        """Breadth-first search: the reachable live configurations (initial first) and the
        transitions {(config, symbol): (next config, last emission or None)} between them."""
        start = self._canonical(self.initial())
        order = [start]
        seen = {start}
        edges: dict = {}
        if start.state is None:
            return order, edges
        queue = deque([start])
        while queue:
            c = queue.popleft()
            for sym in self.alphabet:
                c2 = self.step(c, sym)
                if c2.state is None:
                    continue
                key = self._canonical(c2)
                edges[(c, sym)] = (key, getattr(c2, "emitted", None))
                if key not in seen:
                    seen.add(key)
                    order.append(key)
                    queue.append(key)
                    if len(order) > max_states:
                        raise SearchBoundError(
                            f"{self!r} has more than max_states={max_states} reachable "
                            "configurations; raise `max_states` or lower the depth bound"
                        )
        return order, edges

    def to_dfa(self, max_states: int = 1_000_000) -> DFA:
        """The explicit automaton (built once, on first call). States are the reachable live
        configurations (`PDAConfig` / `PDTConfig` with ``emitted=()``), in BFS order from the
        initial one; a missing transition is the dead state. For a DPDA: a recogniser with the same
        accepting configurations. For a DPDT: a Mealy machine. Its outputs are the DPDT's output
        symbols when every reachable step emits exactly one symbol and the initial ε-closure emits
        nothing (so it agrees with the DPDT's `output` symbol for symbol); otherwise each
        transition emits the *tuple* of symbols of the step, and the output alphabet is the set of
        those tuples (in order of discovery)."""
        if self._dfa is not None:
            return self._dfa
        order, edges = self.reachable_configs(max_states)
        trans = {k: v[0] for k, v in edges.items()}
        if self.machine.output_alphabet is None:  # a DPDA
            accepting = [c for c in order if self.machine.output(c)]
            dfa = DFA(order, self.alphabet, trans, order[0], accepting, name=self.name)
        else:
            emitted = [v[1] for v in edges.values()]
            initial_emits = self.initial().emitted if order[0].state is not None else ()
            if self.output_kind == "symbol" and all(len(e) == 1 for e in emitted) \
                    and not initial_emits:
                outputs = {k: v[1][0] for k, v in edges.items()}
                out_alpha: Any = self.machine.output_alphabet
            else:
                outputs = {k: tuple(v[1]) for k, v in edges.items()}
                out_alpha = list(dict.fromkeys(outputs.values())) or [()]
            accepting = [c for c in order if self.machine.is_accepting(c)]
            dfa = DFA(order, self.alphabet, trans, order[0], accepting, outputs=outputs,
                      output_alphabet=out_alpha, name=self.name)
        return self._cache("_dfa", dfa)

    @property
    def num_configs(self) -> int:
        """Number of reachable live configurations (the DFA's states; builds it)."""
        return self.to_dfa().num_states


__all__ = [
    "ACCEPTANCE_MODES",
    "DEAD",
    "DPDA",
    "PDA",
    "STACK_OPS",
    "AuxState",
    "BoundedPDA",
    "DeterministicPushdown",
    "PDAConfig",
    "Stack",
    "enterable_nodes",
    "find_epsilon_loops",
    "normalise_gamma",
    "stack_op",
]
