"""Deterministic finite automata and Mealy machines.

A `DFA` may be complete or partial: a missing transition goes to an implicit dead state, which is
non-accepting and absorbing (its configuration has ``state=None``). With ``outputs`` it is a Mealy
machine: every defined transition emits one output symbol, and the configuration carries the
symbol emitted by the last step (``output_kind == "symbol"``). Without outputs it is a recogniser
(``"accept"``) or, with ``output_kind="next_set"``, a generator whose output is the set of symbols
that can be read next without entering the dead state (or a state from which no accepting state is
reachable), plus the end marker ``END`` when the current state is accepting.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Hashable, Iterable, Mapping

import numpy as np

from pdanet.automata.alphabet import Alphabet
from pdanet.automata.base import BatchTrace, Machine, hold_after_length
from pdanet.errors import AutomatonError, DeterminismError

END = "$"


@dataclass(frozen=True)
class DFAConfig:
    """A DFA configuration: the current state (None = dead) and the last emitted output."""

    state: Hashable | None
    last_output: Hashable | None = None


class DFA(Machine):
    """A deterministic finite automaton, optionally a Mealy transducer (immutable, validated)."""

    def __init__(
        self,
        states: Iterable[Hashable],
        alphabet: Alphabet | Iterable[Hashable] | str,
        transitions: Mapping[tuple[Hashable, Hashable], Hashable],
        start: Hashable,
        accepting: Iterable[Hashable] = (),
        outputs: Mapping[tuple[Hashable, Hashable], Hashable] | None = None,
        output_alphabet: Alphabet | Iterable[Hashable] | str | None = None,
        output_kind: str | None = None,
        name: str | None = None,
    ):
        self.states = tuple(states)
        self.alphabet = Alphabet.of(alphabet)
        self.name = name
        index = {}
        for i, q in enumerate(self.states):
            if q in index:
                raise AutomatonError(f"state {q!r} is declared twice")
            index[q] = i
        self._state_index = index
        if start not in index:
            raise AutomatonError(
                f"start state {start!r} is not among the declared states; add it to `states`"
            )
        self.start = start
        acc = frozenset(accepting)
        for q in acc:
            if q not in index:
                raise AutomatonError(f"accepting state {q!r} is not among the declared states")
        self.accepting = acc
        n, k = len(self.states), len(self.alphabet)
        table = np.full((n, k), -1, dtype=np.int64)
        trans: dict = {}
        for key, target in dict(transitions).items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise AutomatonError(f"transition key {key!r} must be a pair (state, symbol)")
            q, a = key
            if q not in index:
                raise AutomatonError(f"transition {key!r} leaves undeclared state {q!r}")
            if a not in self.alphabet:
                raise AutomatonError(f"transition {key!r} reads symbol {a!r}, not in the alphabet")
            if isinstance(target, (set, frozenset, list)):
                raise DeterminismError(
                    f"transition {key!r} has several targets {target!r}: this is an NFA; "
                    "determinise it with `pdanet.automata.dfa.determinise` (subset construction)"
                )
            if target not in index:
                raise AutomatonError(f"transition {key!r} goes to undeclared state {target!r}")
            trans[(q, a)] = target
            table[index[q], self.alphabet.index(a)] = index[target]
        self.transitions = trans
        self.table = table
        self.table.setflags(write=False)

        if outputs is not None:
            outs = dict(outputs)
            if output_alphabet is None:
                output_alphabet = sorted({o for o in outs.values()}, key=repr)
            self.output_alphabet = Alphabet.of(output_alphabet)
            out_table = np.full((n, k), -1, dtype=np.int64)
            for key in trans:
                if key not in outs:
                    raise AutomatonError(
                        f"Mealy machine: transition {key!r} has no output; give every transition "
                        "an output symbol"
                    )
            for key, y in outs.items():
                if key not in trans:
                    raise AutomatonError(f"output given for undefined transition {key!r}")
                if y not in self.output_alphabet:
                    raise AutomatonError(
                        f"output {y!r} of transition {key!r} is not in the output alphabet"
                    )
                q, a = key
                out_table[index[q], self.alphabet.index(a)] = self.output_alphabet.index(y)
            self.outputs_map = outs
            self.out_table = out_table
            self.out_table.setflags(write=False)
            self.output_kind = output_kind or "symbol"
            if self.output_kind != "symbol":
                raise AutomatonError("a Mealy machine (with outputs) has output_kind 'symbol'")
        else:
            if output_alphabet is not None:
                raise AutomatonError(
                    "an output alphabet was given but no outputs: give `outputs` for every "
                    "transition, or drop `output_alphabet`"
                )
            self.outputs_map = None
            self.out_table = None
            self.output_kind = output_kind or "accept"
            if self.output_kind == "next_set":
                self.output_alphabet = Alphabet(tuple(self.alphabet) + (END,)) if END not in self.alphabet else Alphabet(tuple(self.alphabet) + ("<END>",))
            elif self.output_kind == "accept":
                self.output_alphabet = None
            else:
                raise AutomatonError(
                    f"output_kind {self.output_kind!r} needs `outputs`; use 'accept' or 'next_set'"
                )

    # --- construction helpers -----------------------------------------------------------------
    @classmethod
    def from_table(
        cls,
        table: np.ndarray,
        alphabet: Alphabet | Iterable[Hashable] | str,
        start: int = 0,
        accepting: Iterable[int] = (),
        out_table: np.ndarray | None = None,
        output_alphabet: Alphabet | Iterable[Hashable] | str | None = None,
        output_kind: str | None = None,
        name: str | None = None,
    ) -> "DFA":
        """A DFA with states 0..n-1 from an (n, |Σ|) table of targets (-1 = missing)."""
        alphabet = Alphabet.of(alphabet)
        table = np.asarray(table, dtype=np.int64)
        n = table.shape[0]
        qs, cs = np.nonzero(table >= 0)
        trans = {(int(q), alphabet.symbols[c]): int(table[q, c]) for q, c in zip(qs, cs)}
        outputs = None
        if out_table is not None:
            output_alphabet = Alphabet.of(output_alphabet)
            outputs = {
                (int(q), alphabet.symbols[c]): output_alphabet.symbols[int(out_table[q, c])]
                for q, c in zip(qs, cs)
                if out_table[q, c] >= 0
            }
        return cls(range(n), alphabet, trans, start, accepting, outputs, output_alphabet,
                   output_kind, name)

    def with_output_kind(self, output_kind: str) -> "DFA":
        """The same automaton read as a recogniser ("accept") or a generator ("next_set")."""
        return DFA(self.states, self.alphabet, self.transitions, self.start, self.accepting,
                   self.outputs_map, self.output_alphabet if self.outputs_map else None,
                   output_kind, self.name)

    # --- identity -----------------------------------------------------------------------------
    @cached_property
    def _key(self) -> tuple:
        return (
            self.states,
            self.alphabet,
            frozenset(self.transitions.items()),
            self.start,
            self.accepting,
            frozenset(self.outputs_map.items()) if self.outputs_map else None,
            self.output_alphabet,
            self.output_kind,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DFA) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        kind = "Mealy" if self.outputs_map else "DFA"
        label = f" {self.name!r}" if self.name else ""
        return f"<{kind}{label}: {len(self.states)} states, {len(self.alphabet)} symbols>"

    # --- properties ---------------------------------------------------------------------------
    @property
    def num_states(self) -> int:
        return len(self.states)

    def state_index(self, q: Hashable) -> int:
        try:
            return self._state_index[q]
        except KeyError:
            raise AutomatonError(f"{q!r} is not a state of {self!r}") from None

    @property
    def is_complete(self) -> bool:
        return bool((self.table >= 0).all())

    @property
    def is_mealy(self) -> bool:
        return self.outputs_map is not None

    @cached_property
    def accepting_mask(self) -> np.ndarray:
        mask = np.zeros(len(self.states), dtype=bool)
        for q in self.accepting:
            mask[self._state_index[q]] = True
        return mask

    @cached_property
    def live_mask(self) -> np.ndarray:
        """States from which some accepting state is reachable (co-reachable states)."""
        n = len(self.states)
        live = self.accepting_mask.copy()
        if self.is_mealy:  # a transducer never 'dies' while transitions exist
            live[:] = True
            return live
        while True:
            succ_live = np.zeros(n, dtype=bool)
            valid = self.table >= 0
            succ_live = (valid & live[np.where(valid, self.table, 0)]).any(axis=1)
            new = live | succ_live
            if (new == live).all():
                return live
            live = new

    @cached_property
    def next_set_table(self) -> np.ndarray:
        """(n + 1, |Out|) bool: allowed next symbols per state (last row: the dead state)."""
        n, k = self.table.shape
        out = np.zeros((n + 1, k + 1), dtype=bool)
        valid = self.table >= 0
        out[:n, :k] = valid & self.live_mask[np.where(valid, self.table, 0)]
        out[:n, k] = self.accepting_mask
        return out

    # --- the protocol -------------------------------------------------------------------------
    def initial(self) -> DFAConfig:
        return DFAConfig(self.start, None)

    def step(self, config: DFAConfig, symbol: Hashable) -> DFAConfig:
        if config.state is None:
            return DFAConfig(None, None)
        key = (config.state, symbol)
        if symbol not in self.alphabet:
            self.alphabet.index(symbol)  # raises InputError naming the symbol
        target = self.transitions.get(key)
        if target is None:
            return DFAConfig(None, None)
        out = self.outputs_map[key] if self.outputs_map is not None else None
        return DFAConfig(target, out)

    def output(self, config: DFAConfig) -> Any:
        if self.output_kind == "accept":
            return config.state is not None and config.state in self.accepting
        if self.output_kind == "symbol":
            return config.last_output
        if config.state is None:
            return frozenset()
        row = self.next_set_table[self._state_index[config.state]]
        return frozenset(self.output_alphabet.symbols[i] for i in np.nonzero(row)[0])

    def is_dead(self, config: DFAConfig) -> bool:
        return config.state is None or not self.live_mask[self._state_index[config.state]]

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """Vectorised simulation; fields ``state`` (index, -1 dead) and ``output``."""
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        states = np.empty((B, T + 1), dtype=np.int64)
        outs = np.full((B, T + 1), -1, dtype=np.int64)
        cur = np.full(B, self._state_index[self.start], dtype=np.int64)
        states[:, 0] = cur
        table = self.table
        for t in range(T):
            sym = ids[:, t]
            active = (t < lengths) & (cur >= 0)
            safe_q = np.where(active, cur, 0)
            safe_a = np.where(active, sym, 0)
            nxt = np.where(active, table[safe_q, safe_a], cur)
            if self.out_table is not None:
                outs[:, t + 1] = np.where(active, self.out_table[safe_q, safe_a], -1)
            cur = np.where(t < lengths, nxt, cur)
            states[:, t + 1] = cur
        states = hold_after_length(states, lengths)
        fields = {"state": states}
        if self.output_kind == "accept":
            fields["output"] = np.where(states >= 0, self.accepting_mask[np.maximum(states, 0)], False)
        elif self.output_kind == "symbol":
            fields["output"] = hold_after_length(outs, lengths)
        else:
            fields["output"] = self.next_set_table[np.where(states >= 0, states, len(self.states))]
        return BatchTrace(lengths, fields)


__all__ = ["DFA", "DFAConfig", "END"]
