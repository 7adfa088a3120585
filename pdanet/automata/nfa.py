"""Nondeterministic finite automata with ε-moves, and their determinisation.

An `NFA` maps a pair ``(state, symbol)`` or ``(state, EPSILON)`` to a set of target states (a
single declared state stands for the set containing it) and may have several start states. It
accepts a string when some run reading it ends in an accepting state; ε-moves read nothing.

An NFA is not a `Machine` and cannot be compiled: turn it into a `DFA` with `NFA.determinise`
(the subset construction) first.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from functools import cached_property

from pdanet import limits
from pdanet.automata.alphabet import EPSILON, Alphabet
from pdanet.automata.base import Frozen, index_states, short_name
from pdanet.automata.dfa import DFA
from pdanet.errors import AutomatonError, InputError

_COLLECTIONS = (set, frozenset, list, tuple)


def state_set(value: object, states: Mapping, what: str) -> frozenset:
    """A declared state (a key of ``states``) as a one-element set, or a collection of declared
    states as a set; AutomatonError naming ``what`` otherwise."""
    try:
        if value in states:
            return frozenset([value])
    except TypeError:
        pass
    if isinstance(value, _COLLECTIONS):
        members = frozenset(value)
        for q in members:
            if q not in states:
                raise AutomatonError(f"{what}: {q!r} is not among the declared states")
        return members
    raise AutomatonError(f"{what} {value!r} is not among the declared states; add it to `states`")


class NFA(Frozen):
    """A nondeterministic finite automaton with ε-moves (immutable, validated)."""

    output_kind = "accept"
    #: appended by `pdanet.compile` to its error message when an NFA is given to it
    compile_hint = (" An NFA is nondeterministic: call `.determinise()` to get a DFA, and "
                    "compile that.")

    def __init__(
        self,
        states: Iterable[Hashable],
        alphabet: Alphabet | Iterable[Hashable] | str,
        transitions: Mapping[tuple[Hashable, Hashable], Hashable | Iterable[Hashable]],
        start: Hashable | Iterable[Hashable],
        accepting: Iterable[Hashable] = (),
        name: str | None = None,
    ):
        self.states, index = index_states(states)
        self.alphabet = Alphabet.of(alphabet)
        self.name = name
        self._state_index = index
        self.starts = self._state_set(start, "start state")
        if not self.starts:
            raise AutomatonError("an NFA needs at least one start state; give `start`")
        acc = frozenset(accepting)
        for q in acc:
            if q not in index:
                raise AutomatonError(f"accepting state {q!r} is not among the declared states")
        self.accepting = acc
        trans: dict = {}
        for key, targets in dict(transitions).items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise AutomatonError(f"transition key {key!r} must be a pair (state, symbol)")
            q, a = key
            if q not in index:
                raise AutomatonError(f"transition {key!r} leaves undeclared state {q!r}")
            if a is not EPSILON and a not in self.alphabet:
                raise AutomatonError(
                    f"transition {key!r} reads symbol {a!r}, which is neither in the alphabet "
                    "nor EPSILON"
                )
            trans[(q, a)] = self._state_set(targets, f"target of transition {key!r}")
        self.transitions = trans

    def _state_set(self, value: object, what: str) -> frozenset:
        return state_set(value, self._state_index, what)

    # --- identity -----------------------------------------------------------------------------
    @cached_property
    def _key(self) -> tuple:
        return (self.states, self.alphabet, frozenset(self.transitions.items()), self.starts,
                self.accepting)

    def __repr__(self) -> str:
        label = f" {short_name(self.name)!r}" if self.name else ""
        return f"<NFA{label}: {len(self.states)} states, {len(self.alphabet)} symbols>"

    @property
    def num_states(self) -> int:
        return len(self.states)

    # --- semantics ----------------------------------------------------------------------------
    @cached_property
    def _closures(self) -> dict:
        """The ε-closure of every single state."""
        closures = {}
        for q in self.states:
            seen = {q}
            todo = [q]
            while todo:
                p = todo.pop()
                for r in self.transitions.get((p, EPSILON), ()):
                    if r not in seen:
                        seen.add(r)
                        todo.append(r)
            closures[q] = frozenset(seen)
        return closures

    def epsilon_closure(self, states: Hashable | Iterable[Hashable]) -> frozenset:
        """The states reachable from `states` (a state or a collection of states) by ε-moves."""
        members = self._state_set(states, "epsilon_closure argument")
        out: set = set()
        for q in members:
            out |= self._closures[q]
        return frozenset(out)

    def initial(self) -> frozenset:
        """The ε-closure of the start states."""
        return self.epsilon_closure(self.starts)

    def step(self, config: frozenset, symbol: Hashable) -> frozenset:
        """The ε-closure of the states reached from `config` by one `symbol` move."""
        self.alphabet.index(symbol)  # InputError naming an unknown symbol
        out: set = set()
        for q in config:
            for r in self.transitions.get((q, symbol), ()):
                out |= self._closures[r]
        return frozenset(out)

    def output(self, config: frozenset) -> bool:
        return not self.accepting.isdisjoint(config)

    def run(self, string: str | Sequence[Hashable]) -> frozenset:
        """The set of states some run can be in after reading the whole string."""
        config = self.initial()
        for sym in self.alphabet.split(string):
            config = self.step(config, sym)
        return config

    def accepts(self, string: str | Sequence[Hashable]) -> bool:
        """True when some run on the string ends in an accepting state."""
        return self.output(self.run(string))

    def determinise(self, name: str | None = None) -> DFA:
        """The subset construction, restricted to subsets reachable from the start.

        DFA states are frozensets of NFA states (ε-closed), numbered in breadth-first order with
        symbols in alphabet order; the empty subset is left implicit (the DFA's dead state).

        Guarded by ``pdanet.limits`` as subsets are created: more than ``max_states`` DFA states,
        or more than ``max_configs`` (NFA state, symbol) moves examined in all, raises
        ResourceError naming this NFA (the subset construction can be exponential).
        """
        index = self._state_index
        bit_closure = [0] * len(self.states)
        for q, closure in self._closures.items():
            mask = 0
            for r in closure:
                mask |= 1 << index[r]
            bit_closure[index[q]] = mask
        syms = self.alphabet.symbols
        # moves[i][c]: the closed set reached from state i by symbol c, as a bitmask
        moves = [[0] * len(syms) for _ in self.states]
        for (q, a), targets in self.transitions.items():
            if a is EPSILON:
                continue
            mask = 0
            for r in targets:
                mask |= bit_closure[index[r]]
            moves[index[q]][self.alphabet.index(a)] = mask
        start = 0
        for q in self.starts:
            start |= bit_closure[index[q]]
        number = {start: 0}
        order = [start]
        table: list[list[int]] = []
        lim = limits.current()
        what = f"determinising {self!r} (subset construction)"
        hint = ("simplify the machine or pattern: its DFA can be exponentially larger than the "
                "NFA")
        work = 0
        for subset in order:  # grows while iterating: breadth-first
            members = [i for i in range(subset.bit_length()) if subset >> i & 1]
            work += len(members) * len(syms)
            if work > lim.max_configs:
                limits.check(what, work, "max_configs", hint=hint)
            row = []
            for c in range(len(syms)):
                target = 0
                for i in members:
                    target |= moves[i][c]
                if target == 0:
                    row.append(-1)
                    continue
                if target not in number:
                    if len(order) >= lim.max_states:
                        limits.check(what, len(order) + 1, "max_states", hint=hint)
                    number[target] = len(order)
                    order.append(target)
                row.append(number[target])
            table.append(row)
        acc_mask = 0
        for q in self.accepting:
            acc_mask |= 1 << index[q]
        names = [frozenset(self.states[i] for i in range(s.bit_length()) if s >> i & 1)
                 for s in order]
        transitions = {(names[d], syms[c]): names[t]
                       for d, row in enumerate(table) for c, t in enumerate(row) if t >= 0}
        accepting = [names[d] for d, s in enumerate(order) if s & acc_mask]
        return DFA(names, self.alphabet, transitions, names[0], accepting,
                   name=name if name is not None else self.name)

    determinize = determinise

    @classmethod
    def from_dfa(cls, dfa: DFA) -> NFA:
        """The NFA with the same states, transitions and language as a DFA recogniser."""
        if dfa.is_mealy:
            raise InputError("a Mealy machine has outputs and cannot be read as an NFA")
        return cls(dfa.states, dfa.alphabet, dfa.transitions, dfa.start, dfa.accepting, dfa.name)


__all__ = ["NFA"]
