"""Deterministic pushdown transducers (Hao et al. 2018, §3).

A transition ``δ(q, x, s) = ⟨q', y, s'⟩`` is written ``{(q, x, s): (q2, y, gamma)}``: in state q,
reading x (an input symbol or `EPSILON`) with s on top (a stack symbol or `BOTTOM`), the machine
emits y (an output symbol, `EPSILON` for nothing, or a tuple of output symbols), pops s, pushes
gamma (X1 of gamma ends on top; BOTTOM as for `DPDA`) and goes to q2.

Stacks, determinism, ε-closure and the ε-loop check are exactly those of `DPDA`. One *step* reads
one input symbol and then follows ε-moves to the closure end; what it emits is the concatenation of
the outputs of those moves, kept in the configuration (`PDTConfig.emitted`). The initial
configuration's ``emitted`` holds what the initial ε-closure emits. ``transduce(w)`` concatenates
the emissions of the initial configuration and of every step.

``output_kind`` is "symbol" when every input transition emits at most one symbol and no ε-transition
emits (so every step emits at most one symbol; ``output(config)`` is that symbol or None), and
"string" otherwise (``output(config)`` is the tuple emitted).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import BatchTrace
from pdanet.automata.pda import (
    DPDA,
    DeterministicPushdown,
    PDAConfig,
    _check_move,
    _validate_common,
)
from pdanet.errors import AutomatonError, InputError


@dataclass(frozen=True)
class PDTConfig(PDAConfig):
    """A transducer configuration: state (None = dead), stack (bottom first, BOTTOM at index 0) and
    ``emitted``, the output symbols produced by the last input step and the ε-moves after it."""

    emitted: tuple = ()


class DPDT(DeterministicPushdown):
    """A deterministic pushdown transducer (immutable, validated; see the module docstring).

    ``accepting`` is optional: when given, `transduce` also requires the run to end in an accepting
    state; when empty, every string the machine reads without blocking is in its domain.
    """

    def __init__(
        self,
        states: Iterable[Hashable],
        input_alphabet: Alphabet | Iterable[Hashable] | str,
        output_alphabet: Alphabet | Iterable[Hashable] | str,
        stack_alphabet: Alphabet | Iterable[Hashable] | str,
        transitions: Mapping[tuple, Any],
        start: Hashable,
        accepting: Iterable[Hashable] = (),
        name: str | None = None,
    ):
        spec = _validate_common(states, input_alphabet, stack_alphabet, start, accepting)
        self.output_alphabet = Alphabet.of(output_alphabet)

        def parse(key, value):
            if not (isinstance(value, tuple) and len(value) == 3):
                raise AutomatonError(
                    f"transition {key!r} must map to a triple (next state, output, pushed string), "
                    f"got {value!r}"
                )
            q2, gamma = _check_move(key, value[0], value[2], spec)
            return (q2, self._normalise_output(key, value[1]), gamma)

        trans = self._parse_deterministic(spec, transitions, parse)
        self._setup(spec, trans, name)

    def _normalise_output(self, key: tuple, y: Any) -> tuple:
        if y is EPSILON or y is None:
            return ()
        out = tuple(y) if isinstance(y, (tuple, list)) else (y,)
        for s in out:
            if s is EPSILON or s is BOTTOM or s not in self.output_alphabet:
                raise AutomatonError(
                    f"transition {key!r} emits {s!r}, which is not in the output alphabet "
                    f"{self.output_alphabet!r}"
                )
        return out

    def _key_extra(self) -> tuple:
        return (self.output_alphabet,)

    @property
    def transitions(self) -> dict:
        """{(q, x, s): (q2, y, gamma)} with y and gamma normalised to tuples."""
        return dict(self._trans)

    def _rebuild(self, states: tuple, trans: dict) -> "DPDT":
        return DPDT(states, self.alphabet, self.output_alphabet, self.stack_alphabet, trans,
                    self.start, self.accepting, self.name)

    @cached_property
    def output_kind(self) -> str:  # type: ignore[override]
        single = all(
            len(out) <= 1 and (a is not EPSILON or not out)
            for (_, a, _), (_, out, _) in self._trans.items()
        )
        return "symbol" if single else "string"

    def _make_config(self, state, stack, emitted: tuple) -> PDTConfig:
        return PDTConfig(state, stack, emitted)

    def output(self, config: PDTConfig) -> Any:
        """The symbol emitted by the last step (None for none) for "symbol" machines; the tuple
        emitted for "string" machines."""
        if self.output_kind == "symbol":
            return config.emitted[0] if config.emitted else None
        return config.emitted

    def is_accepting(self, config: PDTConfig) -> bool:
        """Not blocked, and in an accepting state when accepting states were given."""
        if config.state is None:
            return False
        return not self.accepting or config.state in self.accepting

    def accepts(self, string: str | Sequence[Hashable]) -> bool:
        """True when `string` is in the domain of the transduction."""
        return self.is_accepting(self.run(string))

    def transduce(self, string: str | Sequence[Hashable]) -> tuple:
        """The output string (a tuple of output symbols). InputError when the machine blocks, or
        ends outside its accepting states when it has some."""
        symbols = self.alphabet.split(string)
        config = self.initial()
        out = list(config.emitted)
        for pos, sym in enumerate(symbols):
            before = config
            config = self.step(config, sym)
            if config.state is None:
                raise InputError(
                    f"{self!r} blocks at position {pos} of {string!r}: no transition from state "
                    f"{before.state!r} reading {sym!r} with top {before.top!r}; the string is not "
                    "in the transducer's domain"
                )
            out.extend(config.emitted)
        if not self.is_accepting(config):
            raise InputError(
                f"{self!r} ends {string!r} in state {config.state!r}, which is not accepting; the "
                "string is not in the transducer's domain"
            )
        return tuple(out)

    def to_dpda(self) -> DPDA:
        """The same machine without outputs: a final-state DPDA recognising the domain (its
        accepting states are the DPDT's, or all states when it has none)."""
        return DPDA(self.states, self.alphabet, self.stack_alphabet,
                    {k: (q2, g) for k, (q2, _, g) in self._trans.items()}, self.start,
                    self.accepting or self.states, "final_state", self.name)

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """Vectorised simulation. Fields as for `DPDA.run_batch` (``state``, ``stack``, ``depth``,
        ``top``) plus ``output``: for "symbol" machines (B, T+1) with the index of the symbol
        emitted by each step in ``output_alphabet`` (-1 none); for "string" machines (B, T+1, W)
        with the emitted indices in order and -1 padding, W the most symbols one step emits in this
        batch (at least 1). Index 0 holds what the initial ε-closure emits."""
        ids, lengths = self.check_ids(ids, lengths)
        sim = self._simulate(ids, lengths)
        fields = {k: sim[k] for k in ("state", "stack", "depth", "top")}
        emitted = sim["emitted"]
        fields["output"] = emitted[..., 0] if self.output_kind == "symbol" else emitted
        return BatchTrace(lengths, fields)


__all__ = ["DPDT", "PDTConfig"]
