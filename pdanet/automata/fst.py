"""Nondeterministic finite-state transducers with ε-moves, and their rational operations.

An `FST` maps a pair ``(state, a)`` — a an input symbol or `EPSILON` (the move reads nothing) — to
a set of *moves* ``(target, output)``, the output a tuple of output symbols (``()``, `EPSILON` or
None for none; one output symbol stands for the tuple holding it). It may have several start
states. It denotes the relation R ⊆ Σ* × Δ* of pairs (x, y) such that some path from a start
state to an accepting state reads x and emits y (the concatenation of its outputs);
``translate(x)`` is the set {y : (x, y) ∈ R}. A path may take ε-moves anywhere, so a cycle of
ε-moves that emits something and lies on an accepting path for x makes that set infinite.

The operations are the classical closure properties of rational relations (Berstel,
*Transductions and Context-Free Languages*, 1979; Mohri, *Weighted automata algorithms*, 2009):
union, concatenation and Kleene star by Thompson-style ε-moves, inversion, and composition
(``T1.compose(T2)`` relates x to z when T1 relates x to some y and T2 relates y to z).

An FST is not a `Machine` (it has no single configuration per prefix) and cannot be compiled.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pdanet import limits
from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import Frozen, index_states, short_name
from pdanet.automata.dfa import DFA
from pdanet.automata.nfa import NFA, state_set
from pdanet.errors import AutomatonError, EpsilonLoopError, InputError

_COLLECTIONS = (set, frozenset, list)


@dataclass(frozen=True)
class _Mid:
    """An intermediate state that spells out a multi-symbol output one symbol per move: the
    ``k``-th state on the move ``source --symbol--> target`` emitting ``output``. It compares
    unequal to every user state."""

    source: Any
    symbol: Any
    target: Any
    output: tuple
    k: int

    def __repr__(self) -> str:
        return f"⟨{self.source!r}·{self.symbol!r}·{self.target!r}·{self.k}⟩"


def _merged(a: Alphabet, b: Alphabet) -> Alphabet:
    """a's symbols, then b's symbols that a lacks (both in order)."""
    return a if all(s in a for s in b) else Alphabet(list(a) + [s for s in b if s not in a])


class FST(Frozen):
    """A nondeterministic finite-state transducer with ε-moves (immutable, validated).

    ``transitions`` maps ``(q, a)``, a an input symbol or `EPSILON`, to a collection (set,
    frozenset or list) of moves ``(target, output)``; a single move may be given as a tuple
    ``(target, output)``. ``output`` is a tuple or list of output symbols, one output symbol, or
    `EPSILON` / None / ``()`` for the empty output. ``start`` is a declared state or a collection
    of them; ``accepting`` the states where a path may end. See the module docstring for the
    relation an FST denotes.
    """

    output_kind = "relation"
    #: appended by `pdanet.compile` to its error message when an FST is given to it
    compile_hint = (" An FST is a nondeterministic transducer and has no network construction; "
                    "compile a deterministic machine (DFA, DPDT) instead.")

    def __init__(
        self,
        states: Iterable[Hashable],
        input_alphabet: Alphabet | Iterable[Hashable] | str,
        output_alphabet: Alphabet | Iterable[Hashable] | str,
        transitions: Mapping[tuple[Hashable, Hashable], Any],
        start: Hashable | Iterable[Hashable],
        accepting: Iterable[Hashable] = (),
        name: str | None = None,
    ):
        self.states, index = index_states(states)
        self._state_index = index
        self.alphabet = Alphabet.of(input_alphabet)
        self.output_alphabet = Alphabet.of(output_alphabet)
        self.name = name
        self.starts = self._state_set(start, "start state")
        if not self.starts:
            raise AutomatonError("an FST needs at least one start state; give `start`")
        try:
            acc = frozenset(accepting)
        except TypeError as exc:
            raise AutomatonError(f"accepting states must be a collection of declared states, "
                                 f"got {accepting!r}") from exc
        for q in acc:
            if q not in index:
                raise AutomatonError(f"accepting state {q!r} is not among the declared states")
        self.accepting = acc
        if not isinstance(transitions, Mapping):
            raise AutomatonError(f"transitions must be a mapping {{(state, symbol): moves}}, got "
                                 f"{type(transitions).__name__}")
        trans: dict = {}
        for key, moves in transitions.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise AutomatonError(f"transition key {key!r} must be a pair (state, symbol)")
            q, a = key
            if q not in index:
                raise AutomatonError(f"transition {key!r} leaves undeclared state {q!r}")
            if a is not EPSILON and a not in self.alphabet:
                raise AutomatonError(f"transition {key!r} reads symbol {a!r}, which is neither "
                                     "in the input alphabet nor EPSILON")
            if isinstance(moves, tuple):
                moves = [moves]
            elif not isinstance(moves, _COLLECTIONS):
                raise AutomatonError(
                    f"transition {key!r} must map to a set or list of moves (target, output), or "
                    f"one move as a tuple, got {moves!r}")
            parsed = frozenset(self._move(key, m) for m in moves)
            if parsed:
                trans[(q, a)] = parsed
        self.transitions = trans

    def _state_set(self, value: object, what: str) -> frozenset:
        return state_set(value, self._state_index, what)

    def _move(self, key: tuple, move: Any) -> tuple:
        if not (isinstance(move, tuple) and len(move) == 2):
            raise AutomatonError(f"transition {key!r}: move {move!r} must be a pair "
                                 "(target state, output)")
        target, y = move
        if target not in self._state_index:
            raise AutomatonError(f"transition {key!r} goes to undeclared state {target!r}")
        if y is EPSILON or y is None:
            out: tuple = ()
        elif y in self.output_alphabet:
            out = (y,)
        elif isinstance(y, (tuple, list)):
            out = tuple(y)
        else:
            out = (y,)
        for s in out:
            if s is EPSILON or s is BOTTOM or s not in self.output_alphabet:
                raise AutomatonError(f"transition {key!r} emits {s!r}, which is not in the "
                                     f"output alphabet {self.output_alphabet!r}")
        return (target, out)

    # --- identity -----------------------------------------------------------------------------
    @cached_property
    def _key(self) -> tuple:
        return (self.states, self.alphabet, self.output_alphabet,
                frozenset(self.transitions.items()), self.starts, self.accepting)

    def __repr__(self) -> str:
        label = f" {short_name(self.name)!r}" if self.name else ""
        return (f"<FST{label}: {len(self.states)} states, {len(self.alphabet)} input symbols, "
                f"{len(self.output_alphabet)} output symbols>")

    @property
    def num_states(self) -> int:
        return len(self.states)

    def _moves(self, q: Hashable, a: Hashable) -> frozenset:
        return self.transitions.get((q, a), frozenset())

    # --- semantics ----------------------------------------------------------------------------
    def translate(self, string: Any, max_length: int | None = None) -> frozenset:
        """The set of outputs (tuples of output symbols) the FST relates to `string`.

        With ``max_length`` only the outputs of at most that many symbols are returned (always a
        finite set). Without it, EpsilonLoopError naming the cycle when a cycle of ε-moves that
        emits something lies on an accepting path for `string` (the set is then infinite); give
        ``max_length`` in that case. The search is over (state, position, output) triples of
        such paths, guarded by ``pdanet.limits`` (``max_configs``).
        """
        if max_length is not None and (isinstance(max_length, bool)
                                       or not isinstance(max_length, int) or max_length < 0):
            raise InputError(f"max_length must be a non-negative integer or None, got "
                             f"{max_length!r}")
        x = self.alphabet.split(string)
        n = len(x)
        useful = self._useful_nodes(x)
        if max_length is None:
            cycle = self._productive_cycle(useful)
            if cycle is not None:
                i, path = cycle
                shown = " ".join(f"{p!r} --ε:{self.output_alphabet.format(y) or 'ε'}--> {r!r}"
                                 for p, y, r in path)
                raise EpsilonLoopError(
                    f"{self!r} has infinitely many translations of {string!r}: at input position "
                    f"{i} the ε-moves {shown} form a cycle that emits output and lies on an "
                    "accepting path; pass max_length=N to get the translations of at most N "
                    "symbols")
        lim = limits.current()
        seen: set = set()
        todo = [(q, 0, ()) for q in self.starts if (q, 0) in useful]
        results: set = set()
        while todo:
            conf = todo.pop()
            if conf in seen:
                continue
            seen.add(conf)
            if len(seen) > lim.max_configs:
                limits.check(f"translating {string!r} with {self!r}", len(seen), "max_configs",
                             hint="pass a smaller max_length")
            q, i, out = conf
            if i == n and q in self.accepting:
                results.add(out)
            steps = [(EPSILON, i)] + ([(x[i], i + 1)] if i < n else [])
            for a, j in steps:
                for r, y in self._moves(q, a):
                    if (r, j) not in useful:
                        continue
                    out2 = out + y
                    if max_length is None or len(out2) <= max_length:
                        todo.append((r, j, out2))
        return frozenset(results)

    def _useful_nodes(self, x: tuple) -> frozenset:
        """The (state, position) pairs on some accepting path reading `x`."""
        n = len(x)
        preds: dict = {}
        fwd = {(q, 0) for q in self.starts}
        todo = list(fwd)
        while todo:
            q, i = todo.pop()
            steps = [(EPSILON, i)] + ([(x[i], i + 1)] if i < n else [])
            for a, j in steps:
                for r, _ in self._moves(q, a):
                    preds.setdefault((r, j), set()).add((q, i))
                    if (r, j) not in fwd:
                        fwd.add((r, j))
                        todo.append((r, j))
        back = {(q, n) for q in self.accepting if (q, n) in fwd}
        todo = list(back)
        while todo:
            node = todo.pop()
            for p in preds.get(node, ()):
                if p not in back:
                    back.add(p)
                    todo.append(p)
        return frozenset(back)

    def _productive_cycle(self, useful: frozenset) -> tuple | None:
        """(position, [(p, output, r), …]) for a cycle of ε-moves among `useful` nodes that emits
        something, or None when there is none."""
        for q, i in sorted(useful, key=lambda node: (node[1], repr(node[0]))):
            for r, y in sorted(self._moves(q, EPSILON), key=repr):
                if not y or (r, i) not in useful:
                    continue
                # a path of useful ε-moves from r back to q closes the cycle
                parent: dict = {r: None}
                queue = deque([r])
                while queue and q not in parent:
                    p = queue.popleft()
                    for s, z in self._moves(p, EPSILON):
                        if s not in parent and (s, i) in useful:
                            parent[s] = (p, z)
                            queue.append(s)
                if q in parent:
                    path = []
                    node = q
                    while parent[node] is not None:
                        p, z = parent[node]
                        path.append((p, z, node))
                        node = p
                    return i, [(q, y, r)] + path[::-1]
        return None

    def accepts(self, string: Any) -> bool:
        """True when `string` is in the domain (some accepting path reads it)."""
        x = self.alphabet.split(string)
        return any((q, 0) in self._useful_nodes(x) for q in self.starts)

    # --- derived machines ---------------------------------------------------------------------
    def domain(self, name: str | None = None) -> NFA:
        """The NFA of the inputs the FST relates to some output (outputs dropped)."""
        trans: dict = {}
        for (q, a), moves in self.transitions.items():
            trans[(q, a)] = frozenset(r for r, _ in moves)
        return NFA(self.states, self.alphabet, trans, self.starts, self.accepting,
                   name=name if name is not None else self.name)

    @classmethod
    def from_dfa(cls, dfa: DFA | NFA, name: str | None = None) -> FST:
        """The identity transducer on the language of a DFA recogniser (or an NFA): it relates
        each accepted string to itself and nothing else."""
        if isinstance(dfa, DFA):
            if dfa.is_mealy:
                raise InputError("a Mealy machine has outputs; from_dfa takes a recogniser")
            trans = {(q, a): [(r, (a,))] for (q, a), r in dfa.transitions.items()}
            starts: Any = [dfa.start]
        elif isinstance(dfa, NFA):
            trans = {(q, a): [(r, () if a is EPSILON else (a,)) for r in rs]
                     for (q, a), rs in dfa.transitions.items()}
            starts = list(dfa.starts)
        else:
            raise InputError(f"from_dfa takes a DFA or an NFA, got {type(dfa).__name__}")
        return cls(dfa.states, dfa.alphabet, dfa.alphabet, trans, starts, dfa.accepting,
                   name=name if name is not None else dfa.name)

    def _tagged(self, tag: int) -> tuple[list, dict, list, list]:
        """States, transitions, starts and accepting states with every state q renamed (tag, q)."""
        states = [(tag, q) for q in self.states]
        trans = {((tag, q), a): [((tag, r), y) for r, y in moves]
                 for (q, a), moves in self.transitions.items()}
        return (states, trans, [(tag, q) for q in self.starts],
                [(tag, q) for q in self.accepting])

    def _check_other(self, other: Any, op: str) -> None:
        if not isinstance(other, FST):
            raise InputError(f"{op} takes an FST, got {type(other).__name__}")

    def union(self, other: FST, name: str | None = None) -> FST:
        """The FST of R₁ ∪ R₂: the disjoint union, with the start states of both (states become
        (0, q) for this FST's and (1, q) for the other's; alphabets are merged)."""
        self._check_other(other, "union")
        s1, t1, st1, a1 = self._tagged(0)
        s2, t2, st2, a2 = other._tagged(1)
        return FST(s1 + s2, _merged(self.alphabet, other.alphabet),
                   _merged(self.output_alphabet, other.output_alphabet), {**t1, **t2},
                   st1 + st2, a1 + a2, name=name)

    def concatenate(self, other: FST, name: str | None = None) -> FST:
        """The FST of R₁·R₂ = {(x₁x₂, y₁y₂) : (x₁, y₁) ∈ R₁, (x₂, y₂) ∈ R₂}: ε-moves emitting
        nothing from this FST's accepting states to the other's start states (Thompson)."""
        self._check_other(other, "concatenate")
        s1, t1, st1, a1 = self._tagged(0)
        s2, t2, st2, a2 = other._tagged(1)
        trans = {**t1, **t2}
        for f in a1:
            trans[(f, EPSILON)] = trans.get((f, EPSILON), []) + [(s, ()) for s in st2]
        return FST(s1 + s2, _merged(self.alphabet, other.alphabet),
                   _merged(self.output_alphabet, other.output_alphabet), trans, st1, a2,
                   name=name)

    def star(self, name: str | None = None) -> FST:
        """The FST of R* = ⋃ₖ Rᵏ (R⁰ = {(ε, ε)}), Thompson-style: a new accepting start state
        (1, "start") with ε-moves to the old start states, and ε-moves from the old accepting
        states back to it (old states become (0, q)); every move added emits nothing."""
        s1, trans, st1, a1 = self._tagged(0)
        hub = (1, "start")
        trans[(hub, EPSILON)] = [(s, ()) for s in st1]
        for f in a1:
            trans[(f, EPSILON)] = trans.get((f, EPSILON), []) + [(hub, ())]
        return FST(s1 + [hub], self.alphabet, self.output_alphabet, trans, hub, [hub], name=name)

    def _unit_outputs(self) -> FST:
        """The same relation with every move emitting at most one symbol: a move emitting
        y₁…yₖ (k > 1) becomes a chain through k - 1 `_Mid` states whose extra moves are ε-moves
        emitting y₂, …, yₖ."""
        if all(len(y) <= 1 for moves in self.transitions.values() for _, y in moves):
            return self
        states = list(self.states)
        trans: dict = {}
        for (q, a), moves in self.transitions.items():
            for r, y in moves:
                if len(y) <= 1:
                    trans.setdefault((q, a), []).append((r, y))
                    continue
                mids = [_Mid(q, a, r, y, k) for k in range(1, len(y))]
                states.extend(mids)
                chain = [q, *mids, r]
                trans.setdefault((q, a), []).append((chain[1], y[:1]))
                for k in range(1, len(y)):
                    trans[(chain[k], EPSILON)] = [(chain[k + 1], y[k:k + 1])]
        return FST(states, self.alphabet, self.output_alphabet, trans, self.starts,
                   self.accepting, name=self.name)

    def invert(self, name: str | None = None) -> FST:
        """The FST of R⁻¹ = {(y, x) : (x, y) ∈ R}: inputs and outputs swapped, after spelling
        multi-symbol outputs out one symbol per move (a move emitting nothing becomes an ε-move).
        Input and output alphabets swap."""
        unit = self._unit_outputs()
        trans: dict = {}
        for (q, a), moves in unit.transitions.items():
            for r, y in moves:
                key = (q, y[0] if y else EPSILON)
                trans.setdefault(key, []).append((r, () if a is EPSILON else (a,)))
        return FST(unit.states, self.output_alphabet, self.alphabet, trans, unit.starts,
                   unit.accepting, name=name if name is not None else self.name)

    def compose(self, other: FST, name: str | None = None) -> FST:
        """The FST of R₂ ∘ R₁ = {(x, z) : ∃y (x, y) ∈ R₁ = this FST, (y, z) ∈ R₂ = `other`}.

        Both machines are first normalised so that every move emits at most one symbol; a state
        of the result is a pair (p, q) of their states (``_Mid`` states included) and its moves
        are: this FST's moves that emit nothing (the other waits), pairs of a move of this FST
        emitting b and a move of the other reading b, and the other's ε-input moves (this FST
        waits). Only pairs reachable from the start pairs are kept. The redundant interleavings
        of ε-moves that the ε-filter of Mohri, Pereira & Riley (1996) removes do not change the
        relation, so none is needed for these unweighted transducers. Input alphabet: this FST's;
        output alphabet: the other's; a symbol emitted here that the other cannot read blocks.
        """
        self._check_other(other, "compose")
        t1, t2 = self._unit_outputs(), other._unit_outputs()
        starts = [(p, q) for p in t1.starts for q in t2.starts]
        order = list(starts)
        seen = set(order)
        trans: dict = {}
        lim = limits.current()
        leaving: dict = {}
        for (p, a), m1 in t1.transitions.items():
            leaving.setdefault(p, []).append((a, m1))
        for p, q in order:  # grows while iterating: breadth-first
            moves: list = []
            for a, m1 in leaving.get(p, ()):
                for p2, b in m1:
                    if not b:
                        moves.append((a, (p2, q), ()))
                        continue
                    if b[0] not in t2.alphabet:
                        continue
                    for q2, c in t2._moves(q, b[0]):
                        moves.append((a, (p2, q2), c))
            for q2, c in t2._moves(q, EPSILON):
                moves.append((EPSILON, (p, q2), c))
            for a, target, c in moves:
                trans.setdefault(((p, q), a), []).append((target, c))
                if target not in seen:
                    if len(order) >= lim.max_states:
                        limits.check(f"composing {self!r} with {other!r}", len(order) + 1,
                                     "max_states")
                    seen.add(target)
                    order.append(target)
        accepting = [s for s in order if s[0] in t1.accepting and s[1] in t2.accepting]
        return FST(order, self.alphabet, other.output_alphabet, trans, starts, accepting,
                   name=name)


__all__ = ["FST"]
