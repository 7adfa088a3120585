"""Deterministic finite automata and Mealy machines.

A `DFA` may be complete or partial: a missing transition goes to an implicit dead state, which is
non-accepting and absorbing (its configuration has ``state=None``). With ``outputs`` it is a Mealy
machine: every defined transition emits one output symbol, and the configuration carries the
symbol emitted by the last step (``output_kind == "symbol"``). Without outputs it is a recogniser
(``"accept"``) or, with ``output_kind="next_set"``, a generator whose output is the set of symbols
that can be read next without entering the dead state (or a state from which no accepting state is
reachable), plus the end marker ``END`` when the current state is accepting.

Operations (`complete`, `reachable`, `coreachable`, `trim`, `relabel`, `minimize`, `product`,
`complement`, `counterexample`/`equivalent`, `language`) return new DFAs and work on the numpy
``table`` (state index × symbol index → target index, -1 = missing), vectorised over states and
symbols, so they stay fast for tens of thousands of states. Every operation accepts partial DFAs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from pdanet import limits
from pdanet.automata.alphabet import Alphabet
from pdanet.automata.base import (
    BatchTrace,
    Machine,
    StateIndexed,
    hold_after_length,
    index_states,
    short_name,
)
from pdanet.errors import AutomatonError, DeterminismError, InputError

END = "$"


@dataclass(frozen=True)
class DFAConfig:
    """A DFA configuration: the current state (None = dead) and the last emitted output."""

    state: Hashable | None
    last_output: Hashable | None = None


class DFA(StateIndexed, Machine):
    """A deterministic finite automaton, optionally a Mealy transducer (immutable, validated)."""

    fixed_width_fields = True                       # one state per step

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
        self.states, index = index_states(states)
        self.alphabet = Alphabet.of(alphabet)
        self.name = name
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
            if isinstance(target, (set, list)) or (isinstance(target, frozenset)
                                                   and target not in index):
                raise DeterminismError(
                    f"transition {key!r} has several targets {target!r}: this is an NFA; build it "
                    "with `pdanet.automata.nfa.NFA(...)` and call `.determinise()` to get a DFA "
                    "(subset construction)"
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
                end = END if END not in self.alphabet else "<END>"
                self.output_alphabet = Alphabet(tuple(self.alphabet) + (end,))
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
    ) -> DFA:
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

    def with_output_kind(self, output_kind: str) -> DFA:
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

    def __repr__(self) -> str:
        kind = "Mealy" if self.outputs_map else "DFA"
        label = f" {short_name(self.name)!r}" if self.name else ""
        return f"<{kind}{label}: {len(self.states)} states, {len(self.alphabet)} symbols>"

    # --- properties ---------------------------------------------------------------------------
    @property
    def is_complete(self) -> bool:
        return bool((self.table >= 0).all())

    @property
    def is_mealy(self) -> bool:
        return self.outputs_map is not None

    @property
    def file_kind(self) -> str:  # type: ignore[override]
        """"mealy" for a Mealy machine, else "dfa" (its kind in machine files)."""
        return "mealy" if self.is_mealy else "dfa"

    @cached_property
    def accepting_mask(self) -> np.ndarray:
        mask = np.zeros(len(self.states), dtype=bool)
        for q in self.accepting:
            mask[self._state_index[q]] = True
        return mask

    @cached_property
    def live_mask(self) -> np.ndarray:
        """States from which some accepting state is reachable (co-reachable states); every state
        of a Mealy machine counts as live (a transducer never 'dies' while transitions exist)."""
        if self.is_mealy:
            return np.ones(len(self.states), dtype=bool)
        return _coreach(self.table, self.accepting_mask)

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
            fields["output"] = np.where(states >= 0, self.accepting_mask[np.maximum(states, 0)],
                                        False)
        elif self.output_kind == "symbol":
            fields["output"] = hold_after_length(outs, lengths)
        else:
            fields["output"] = self.next_set_table[np.where(states >= 0, states, len(self.states))]
        return BatchTrace(lengths, fields)

    def is_accepting(self, config: DFAConfig) -> bool:
        """True when the configuration is in an accepting state. This holds for every output kind:
        a generator accepts where it may emit the end marker, and a Mealy machine accepts when it
        ends in one of its accepting states."""
        return config.state is not None and config.state in self.accepting

    # --- operations: each returns a new, immutable DFA ----------------------------------------
    def _rebuild(self, states: Iterable[Hashable], table: np.ndarray, start_index: int,
                 accepting_mask: np.ndarray, out_table: np.ndarray | None = None,
                 output_alphabet: Alphabet | None = None, name: str | None = None,
                 output_kind: str | None = None) -> DFA:
        """A DFA over this alphabet (and output alphabet) from arrays indexed like `states`."""
        states = tuple(states)
        syms = self.alphabet.symbols
        qs, cs = np.nonzero(table >= 0)
        ql, cl = qs.tolist(), cs.tolist()
        trans = {(states[q], syms[c]): states[t]
                 for q, c, t in zip(ql, cl, table[qs, cs].tolist())}
        outputs = None
        if self.is_mealy:
            out_alpha = output_alphabet or self.output_alphabet
            osyms = out_alpha.symbols
            outputs = {(states[q], syms[c]): osyms[o]
                       for q, c, o in zip(ql, cl, out_table[qs, cs].tolist())}
        accepting = [states[i] for i in np.flatnonzero(accepting_mask).tolist()]
        return DFA(states, self.alphabet, trans, states[start_index], accepting, outputs,
                   (output_alphabet or self.output_alphabet) if self.is_mealy else None,
                   output_kind or self.output_kind, name)

    @property
    def _start_index(self) -> int:
        return self._state_index[self.start]

    def _subset(self, keep: np.ndarray) -> DFA:
        """The sub-automaton on the states in `keep` (declared order and names kept); transitions
        into dropped states become missing (they go to the implicit dead state)."""
        keep = keep.copy()
        keep[self._start_index] = True
        if keep.all():
            return self
        new_index = np.full(len(self.states), -1, dtype=np.int64)
        kept = np.flatnonzero(keep)
        new_index[kept] = np.arange(len(kept))
        sub = self.table[kept]
        sub = np.where(sub >= 0, new_index[np.maximum(sub, 0)], -1)
        out = None if self.out_table is None else np.where(sub >= 0, self.out_table[kept], -1)
        return self._rebuild([self.states[i] for i in kept.tolist()], sub,
                             int(new_index[self._start_index]), self.accepting_mask[kept], out,
                             name=self.name)

    def reachable(self) -> DFA:
        """Only the states reachable from the start state."""
        return self._subset(_reach(self.table, self._start_index))

    def coreachable(self) -> DFA:
        """Only the co-reachable states (an accepting state is reachable from them), and the start
        state. Every state of a Mealy machine counts as co-reachable (dropping one would drop the
        outputs of the transitions into it), so a Mealy machine is returned unchanged."""
        return self._subset(self.live_mask)

    def trim(self) -> DFA:
        """Only the states that are both reachable and co-reachable (plus the start state)."""
        return self.reachable().coreachable()

    def relabel(self) -> DFA:
        """The same automaton with states renamed 0..n-1 in declared order."""
        if self.states == tuple(range(len(self.states))):
            return self
        return self._rebuild(range(len(self.states)), self.table, self._start_index,
                             self.accepting_mask, self.out_table, name=self.name)

    def complete(self, output: Hashable | None = None) -> DFA:
        """An equivalent complete DFA: when transitions are missing, a fresh non-accepting sink
        state is added and every missing transition goes there (the sink loops on every symbol).
        A complete DFA is returned unchanged. The sink is named ``n`` when the states are the ints
        0..n-1 (any ints: one more than the largest), otherwise ``"dead"`` (with a number appended
        if taken). A Mealy machine needs ``output``, the symbol the new transitions emit (added to
        the output alphabet when missing); its behaviour then differs from the original, whose
        missing transitions emit nothing."""
        if self.is_complete:
            return self
        n, k = self.table.shape
        out_alpha = self.output_alphabet
        out = None
        if self.is_mealy:
            if output is None:
                raise AutomatonError(
                    "a Mealy machine's missing transitions have no output symbol: call "
                    "`complete(output=y)` with the symbol the new transitions should emit"
                )
            if output not in out_alpha:
                out_alpha = Alphabet(tuple(out_alpha) + (output,))
            y = out_alpha.index(output)
            out = np.vstack([np.where(self.table >= 0, self.out_table, y),
                             np.full((1, k), y, dtype=np.int64)])
        table = np.vstack([np.where(self.table >= 0, self.table, n),
                           np.full((1, k), n, dtype=np.int64)])
        acc = np.append(self.accepting_mask, False)
        return self._rebuild(self.states + (_fresh_state(self.states),), table, self._start_index,
                             acc, out, out_alpha, name=self.name)

    def minimize(self) -> DFA:
        """The minimal equivalent DFA (Hopcroft's partition refinement), with states 0..n-1
        numbered in breadth-first order from the start (symbols in alphabet order), so equivalent
        DFAs over the same alphabet minimise to equal DFAs.

        The result is trim: states equivalent to the dead state are dropped and their incoming
        transitions become missing (``.minimize().complete()`` is the minimal complete DFA). An
        empty language gives one non-accepting state without transitions. A Mealy machine is
        minimised by refining (accepting, output row) classes: two states merge when every
        string emits the same outputs and reaches the same acceptance from both; its states are
        never merged with the implicit dead state.
        """
        keep = _reach(self.table, self._start_index)
        kept = np.flatnonzero(keep)
        m, k = len(kept), self.table.shape[1]
        new_index = np.full(len(self.states), -1, dtype=np.int64)
        new_index[kept] = np.arange(m)
        sub = self.table[kept]
        sub = np.where(sub >= 0, new_index[np.maximum(sub, 0)], -1)
        tc = np.vstack([np.where(sub >= 0, sub, m), np.full((1, k), m, dtype=np.int64)])
        acc = np.append(self.accepting_mask[kept], False)
        if self.is_mealy:
            oc = np.vstack([np.where(sub >= 0, self.out_table[kept], -1),
                            np.full((1, k), -1, dtype=np.int64)])
            marks = acc.astype(np.int64)
            marks[m] = 2  # the dead state is its own class: never merged with a real state
            rows = np.column_stack([marks, oc])
        else:
            oc = None
            rows = acc.astype(np.int64)[:, None]
        labels = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
        block = _hopcroft(tc, labels)
        reps = np.unique(block, return_index=True)[1]  # one representative per block
        dead = block[m]
        qt = block[tc[reps]]
        qt = np.where(qt == dead, -1, qt)
        start = int(block[new_index[self._start_index]])
        order = _bfs_order(qt, start)
        number = np.full(len(reps), -1, dtype=np.int64)
        number[order] = np.arange(len(order))
        table = qt[order]
        table = np.where(table >= 0, number[np.maximum(table, 0)], -1)
        out = None if oc is None else np.where(table >= 0, oc[reps][order], -1)
        return self._rebuild(range(len(order)), table, 0, acc[reps][order], out, name=self.name)

    minimise = minimize

    # --- comparisons and boolean operations ---------------------------------------------------
    def _aligned(self, other: DFA) -> tuple:
        """Completed arrays of both machines over this alphabet's symbol order:
        (t1, acc1, out1, t2, acc2, out2); row n of each is its explicit dead state, and Mealy
        outputs are indices into one common output list (-1 = none)."""
        if not isinstance(other, DFA):
            raise InputError(f"expected a DFA to compare with, got {type(other).__name__}")
        if set(self.alphabet.symbols) != set(other.alphabet.symbols):
            raise InputError(
                f"the alphabets differ: {self.alphabet!r} vs {other.alphabet!r}; both machines "
                "must read the same symbols"
            )
        if self.is_mealy != other.is_mealy:
            raise InputError("cannot compare a Mealy machine with a recogniser")
        perm = np.array([other.alphabet.index(s) for s in self.alphabet.symbols], dtype=np.int64)
        t1, a1, o1 = _completed(self.table, self.accepting_mask, self.out_table)
        t2, a2, o2 = _completed(other.table[:, perm], other.accepting_mask,
                                None if other.out_table is None else other.out_table[:, perm])
        if self.is_mealy:
            common = list(self.output_alphabet.symbols)
            seen = set(common)
            for y in other.output_alphabet.symbols:
                if y not in seen:
                    common.append(y)
                    seen.add(y)
            lookup = {y: i for i, y in enumerate(common)}
            mapping = np.array([lookup[y] for y in other.output_alphabet.symbols] + [-1],
                               dtype=np.int64)
            o2 = mapping[o2]  # index -1 picks the trailing -1
        return t1, a1, o1, t2, a2, o2

    def counterexample(self, other: DFA) -> tuple | None:
        """A shortest string (a tuple of symbols) on which the two machines differ, or None when
        they are equivalent. Recognisers differ on a string one accepts and the other rejects;
        Mealy machines also differ where the last step emits different outputs (or one has no
        transition). Breadth-first search over the product of the completed machines."""
        t1, a1, o1, t2, a2, o2 = self._aligned(other)
        syms = self.alphabet.symbols
        levels: list[tuple[np.ndarray, np.ndarray]] = []  # (parent index, symbol) per level

        def path(level: int, i: int) -> tuple:
            word = []
            for lv in range(level, 0, -1):
                parent, sym = levels[lv]
                word.append(syms[int(sym[i])])
                i = int(parent[i])
            return tuple(reversed(word))

        for level, (p, q, parent, sym) in enumerate(
                _product_levels(t1, t2, self._start_index, other._start_index)):
            levels.append((parent, sym))
            bad = np.flatnonzero(a1[p] != a2[q])
            if bad.size:
                return path(level, int(bad[0]))
            if o1 is not None:
                bad = np.argwhere(o1[p] != o2[q])  # row-major: parent first, then symbol
                if bad.size:
                    i, a = map(int, bad[0])
                    return path(level, i) + (syms[a],)
        return None

    def equivalent(self, other: DFA) -> bool:
        """True when both machines accept the same language (and, for Mealy machines, emit the
        same outputs on every string)."""
        return self.counterexample(other) is None

    def product(self, other: DFA, mode: str = "and") -> DFA:
        """The product automaton of two recognisers over the same alphabet, on reachable pairs.

        A pair accepts when ``mode`` of the two acceptances holds: "and" (intersection), "or"
        (union), "xor" (symmetric difference) or "diff" (in self, not in other). States are
        pairs ``(p, q)`` of state names, ``None`` standing for a machine's dead state; the pair
        of two dead states is left implicit (it accepts in no mode).
        """
        ops = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
               "diff": lambda x, y: x & ~y}
        if mode not in ops:
            raise InputError(f"unknown product mode {mode!r}; use one of {sorted(ops)}")
        if self.is_mealy or (isinstance(other, DFA) and other.is_mealy):
            raise InputError("products are defined for recognisers, not Mealy machines")
        t1, a1, _, t2, a2, _ = self._aligned(other)
        n2 = t2.shape[0]
        ps, qs = [], []
        for p, q, _, _ in _product_levels(t1, t2, self._start_index, other._start_index):
            ps.append(p)
            qs.append(q)
        p = np.concatenate(ps)
        q = np.concatenate(qs)
        codes = p * n2 + q
        sort = np.argsort(codes)
        succ = t1[p] * n2 + t2[q]  # (V, k) successor pair codes
        ids = sort[np.searchsorted(codes[sort], succ)]
        dead = (t1.shape[0] - 1) * n2 + (n2 - 1)
        ids = np.where(succ == dead, -1, ids)
        # the start pair is never (dead, dead); drop the (dead, dead) pair if it was reached
        keep = codes != dead
        index = np.full(len(codes), -1, dtype=np.int64)
        index[keep] = np.arange(int(keep.sum()))
        table = np.where(ids >= 0, index[np.maximum(ids, 0)], -1)[keep]
        acc = ops[mode](a1[p], a2[q])[keep]
        n1s, n2s = self.states + (None,), other.states + (None,)
        names = [(n1s[i], n2s[j]) for i, j in zip(p[keep].tolist(), q[keep].tolist())]
        return self._rebuild(names, table, 0, acc, name=None)

    def intersection(self, other: DFA) -> DFA:
        """Strings accepted by both (the product with mode "and")."""
        return self.product(other, "and")

    def union(self, other: DFA) -> DFA:
        """Strings accepted by either (the product with mode "or")."""
        return self.product(other, "or")

    def difference(self, other: DFA) -> DFA:
        """Strings accepted by self and not by other (the product with mode "diff")."""
        return self.product(other, "diff")

    def symmetric_difference(self, other: DFA) -> DFA:
        """Strings accepted by exactly one of the two (the product with mode "xor")."""
        return self.product(other, "xor")

    def complement(self) -> DFA:
        """The complete DFA of the complement language over the same alphabet."""
        if self.is_mealy:
            raise InputError("the complement is defined for recognisers, not Mealy machines")
        full = self.complete()
        return full._rebuild(full.states, full.table, full._start_index, ~full.accepting_mask,
                             name=None)

    def language(self, max_length: int) -> list[tuple]:
        """The accepted strings of length ≤ max_length as tuples of symbols, in length-then-
        lexicographic order (symbols ordered as in the alphabet)."""
        if not isinstance(max_length, (int, np.integer)) or isinstance(max_length, bool) \
                or max_length < 0:
            raise InputError(f"max_length must be a non-negative int, got {max_length!r}")
        live = _coreach(self.table, self.accepting_mask)
        syms = self.alphabet.symbols
        found: list[tuple] = []
        if not live[self._start_index]:
            return found
        frontier = np.array([self._start_index], dtype=np.int64)
        strings: list[tuple] = [()]
        cap = limits.current().max_configs
        for length in range(int(max_length) + 1):
            if len(found) + frontier.size > cap:
                limits.check(f"listing the language of {self!r} up to length {max_length}",
                             len(found) + frontier.size, "max_configs",
                             hint="ask for a smaller max_length")
            found.extend(strings[i] for i in np.flatnonzero(self.accepting_mask[frontier]).tolist())
            if length == max_length or frontier.size == 0:
                break
            nxt = self.table[frontier]
            ok = (nxt >= 0) & live[np.maximum(nxt, 0)]
            fi, ai = np.nonzero(ok)  # parent-major, then symbol: length-lexicographic order
            frontier = nxt[fi, ai]
            strings = [strings[f] + (syms[a],) for f, a in zip(fi.tolist(), ai.tolist())]
        return found



# --- array algorithms -------------------------------------------------------------------------

def _fresh_state(states: tuple) -> Hashable:
    """A state name not among `states`: one more than the largest int, else "dead", "dead2", …"""
    if states and all(isinstance(q, (int, np.integer)) and not isinstance(q, bool) for q in states):
        return int(max(states)) + 1
    taken = set(states)
    name, i = "dead", 1
    while name in taken:
        i += 1
        name = f"dead{i}"
    return name


def _completed(table: np.ndarray, accepting: np.ndarray, out: np.ndarray | None) -> tuple:
    """Arrays with an explicit dead state appended as row n (absorbing, non-accepting, silent)."""
    n, k = table.shape
    tc = np.vstack([np.where(table >= 0, table, n), np.full((1, k), n, dtype=np.int64)])
    ac = np.append(accepting, False)
    oc = None
    if out is not None:
        oc = np.vstack([np.where(table >= 0, out, -1), np.full((1, k), -1, dtype=np.int64)])
    return tc, ac, oc


def _gather(ptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Positions ptr[v] .. ptr[v+1]-1 for every v in `nodes`, concatenated."""
    starts = ptr[nodes]
    lens = ptr[nodes + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(total)


def _reverse_edges(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges sorted by target: (ptr, sources, symbols) with ptr[q]..ptr[q+1] the edges into q."""
    n = table.shape[0]
    qs, cs = np.nonzero(table >= 0)
    tg = table[qs, cs]
    order = np.argsort(tg, kind="stable")
    ptr = np.searchsorted(tg[order], np.arange(n + 1))
    return ptr, qs[order], cs[order]


def _reach(table: np.ndarray, start: int) -> np.ndarray:
    """Boolean mask of the states reachable from `start` (breadth-first, level by level)."""
    seen = np.zeros(table.shape[0], dtype=bool)
    seen[start] = True
    frontier = np.array([start], dtype=np.int64)
    while frontier.size:
        nxt = table[frontier].ravel()
        nxt = np.unique(nxt[nxt >= 0])
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
    return seen


def _coreach(table: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Boolean mask of the states from which a state in `targets` is reachable."""
    ptr, src, _ = _reverse_edges(table)
    seen = targets.copy()
    frontier = np.flatnonzero(seen)
    while frontier.size:
        prev = np.unique(src[_gather(ptr, frontier)])
        frontier = prev[~seen[prev]]
        seen[frontier] = True
    return seen


def _bfs_order(table: np.ndarray, start: int) -> np.ndarray:
    """States reachable from `start` in breadth-first order, successors in symbol order."""
    seen = np.zeros(table.shape[0], dtype=bool)
    seen[start] = True
    order = [np.array([start], dtype=np.int64)]
    frontier = order[0]
    while frontier.size:
        nxt = table[frontier].ravel()
        nxt = nxt[nxt >= 0]
        nxt = nxt[~seen[nxt]]
        first = np.sort(np.unique(nxt, return_index=True)[1])
        frontier = nxt[first]
        seen[frontier] = True
        order.append(frontier)
    return np.concatenate(order)


def _hopcroft(table: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Coarsest partition refining `labels` that is stable under a complete transition table
    (Hopcroft 1971). Returns the block index of every state.

    A splitter is a block; popping it splits every block Y by which symbols lead from each state
    of Y into the splitter (a bitset signature, computed for all symbols at once). When Y splits
    and is not waiting, all its pieces but the largest are queued ("process the smaller half").
    """
    n, k = table.shape
    block = np.asarray(labels, dtype=np.int64).copy()
    nb = int(block.max()) + 1
    size = np.zeros(n + 1, dtype=np.int64)
    size[:nb] = np.bincount(block, minlength=nb)
    ptr, src, sym = _reverse_edges(table)
    words = (k + 62) // 63
    word = sym // 63
    bit = np.left_shift(np.int64(1), (sym % 63).astype(np.int64))
    sig = np.zeros((n, words), dtype=np.int64)
    waiting = np.zeros(n + 1, dtype=bool)
    largest = int(np.argmax(size[:nb]))
    work = [b for b in range(nb) if b != largest]
    waiting[work] = True
    while work:
        splitter = work.pop()
        waiting[splitter] = False
        edges = _gather(ptr, np.flatnonzero(block == splitter))
        if edges.size == 0:
            continue
        np.bitwise_or.at(sig, (src[edges], word[edges]), bit[edges])
        hit = np.unique(src[edges])
        hsig = sig[hit]
        sig[hit] = 0
        hblk = block[hit]
        order = np.lexsort([hsig[:, w] for w in range(words - 1, -1, -1)] + [hblk])
        hit, hsig, hblk = hit[order], hsig[order], hblk[order]
        new_blk = np.ones(len(hit), dtype=bool)
        new_blk[1:] = hblk[1:] != hblk[:-1]
        new_piece = new_blk.copy()
        new_piece[1:] |= (hsig[1:] != hsig[:-1]).any(axis=1)
        blk_start = np.flatnonzero(new_blk)
        blk_end = np.append(blk_start[1:], len(hit))
        piece_start = np.flatnonzero(new_piece)
        piece_end = np.append(piece_start[1:], len(hit))
        first_piece = np.searchsorted(piece_start, blk_start)
        n_pieces = np.searchsorted(piece_start, blk_end) - first_piece
        hits = blk_end - blk_start
        ids = hblk[blk_start]
        splits = np.flatnonzero((n_pieces > 1) | (hits < size[ids]))
        for j in splits.tolist():
            y = int(ids[j])
            pieces = list(range(int(first_piece[j]), int(first_piece[j] + n_pieces[j])))
            lengths = [int(piece_end[i] - piece_start[i]) for i in pieces]
            if hits[j] == size[y]:  # y is covered by its hit pieces: the largest keeps the id
                del pieces[int(np.argmax(lengths))]
            created = []
            for i in pieces:
                members = hit[piece_start[i]:piece_end[i]]
                block[members] = nb
                size[nb] = len(members)
                size[y] -= len(members)
                created.append(nb)
                nb += 1
            if waiting[y]:
                queue = created
            else:
                everyone = [y] + created
                biggest = max(everyone, key=lambda b: size[b])
                queue = [b for b in everyone if b != biggest]
            work.extend(queue)
            waiting[queue] = True
    return block


def _product_levels(t1: np.ndarray, t2: np.ndarray, s1: int, s2: int):
    """Breadth-first levels of the reachable pairs of two complete tables over the same symbols.

    Yields (p, q, parent, symbol) arrays per level: pair i of a level is (p[i], q[i]), first
    reached from pair parent[i] of the previous level by `symbol[i]`. Pairs of a level are in
    length-lexicographic order of the first strings reaching them.
    """
    n2 = t2.shape[0]
    total = t1.shape[0] * n2
    seen: np.ndarray | set
    if total <= 1 << 27:
        seen = np.zeros(total, dtype=bool)
    else:
        seen = set()
    p = np.array([s1], dtype=np.int64)
    q = np.array([s2], dtype=np.int64)
    parent = np.array([-1], dtype=np.int64)
    symbol = np.array([-1], dtype=np.int64)
    _mark(seen, p * n2 + q)
    k = t1.shape[1]
    while p.size:
        yield p, q, parent, symbol
        np_, nq = t1[p].ravel(), t2[q].ravel()
        codes = np_ * n2 + nq
        first = np.sort(np.unique(codes, return_index=True)[1])
        if isinstance(seen, np.ndarray):
            first = first[~seen[codes[first]]]
        else:
            first = first[np.fromiter((c not in seen for c in codes[first].tolist()), dtype=bool,
                                      count=len(first))]
        _mark(seen, codes[first])
        p, q = np_[first], nq[first]
        parent, symbol = first // k, first % k


def _mark(seen: np.ndarray | set, codes: np.ndarray) -> None:
    if isinstance(seen, np.ndarray):
        seen[codes] = True
    else:
        seen.update(codes.tolist())


__all__ = ["DFA", "END", "DFAConfig"]
