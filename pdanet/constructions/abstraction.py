"""What a compiled network's units mean: one frozen type per family of network.

`CompiledNetwork.abstraction` is an instance of one of these classes. It is the typed contract
between a construction and everything that reads its network: `pdanet.certify` chooses its
certificate family by the abstraction's type (`pdanet.verify.certify.FAMILIES`, no target
strings), and certifiers, plots and decoders read unit meanings from its fields — never from
parsed label strings or dict keys. An abstraction describes the network; it never changes it.

Adding a family of network is adding one subclass here (or in the construction's own module)
and, if it can be certified, one certifier module named in `FAMILIES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_LABELS = 10_000  # constructions leave ``labels`` empty for networks with more hidden units


@dataclass(frozen=True, eq=False)
class Abstraction:
    """Base: ``labels[j]`` names hidden unit j for messages and plots (one per hidden unit, or
    none at all for networks of more than `MAX_LABELS` units)."""

    labels: tuple[str, ...] = ()

    def groups(self) -> tuple[int, ...]:
        """Unit indices where a new group of units of one meaning starts (for plots): none."""
        return ()


@dataclass(frozen=True, eq=False)
class RecurrentUnits(Abstraction):
    """A `RecurrentNet` (``nn.RNN`` tanh or ``nn.LSTM``, one step per symbol) whose state
    encodes the machine's configuration, certified by box induction over explored
    (configuration, state) pairs. ``cell`` is ``"rnn"`` or ``"lstm"`` (state [h; c], 2H)."""

    cell: str = "rnn"


@dataclass(frozen=True, eq=False)
class DyckSlots(RecurrentUnits):
    """A Dyck-(k, m) network of Hewitt et al. (2020): m stack slots of ``slot_width`` units.

    ``kind``: ``"push_pop"`` (Elman; ``units[copy, slot, j]`` is coordinate j of slot ``slot``
    (0 = top) in copy P (0, written on push) or Q (1, written on pop); ideal value
    2·signs[j]·φ[j] − 1 in the copy the last operation wrote, −1 elsewhere) or
    ``"cell_stack"`` (LSTM; ``units[slot, j]``, slot 0 = bottom, in h and in c; c = φ, h =
    tanh(φ) in the top slot and 0 elsewhere). ``code`` is the `SlotCode` (φ per bracket type).
    """

    kind: str = "push_pop"
    slots: int = 0
    slot_width: int = 0
    top: str = "first"
    units: np.ndarray = None  # type: ignore[assignment]
    signs: np.ndarray | None = None
    code: Any = None

    def groups(self) -> tuple[int, ...]:
        """Each slot (of each copy) is a group of ``slot_width`` consecutive units."""
        size = 0 if self.units is None else int(np.asarray(self.units).size)
        return tuple(range(self.slot_width, size, self.slot_width)) if self.slot_width else ()


@dataclass(frozen=True)
class ControllerUnit:
    """Hidden unit "the controller was in state ``c``, read input ``a`` and memory reading
    ``R``" (R = None: any reading; a = −1: ε, −2: input used up, for the buffered model),
    after which the controller is in ``c2``."""

    c: int
    a: int
    R: int | None
    c2: int


@dataclass(frozen=True, eq=False)
class ControllerMemory(Abstraction):
    """An Elman (or linear) controller driving a differentiable memory (target ``stack_rnn``).

    ``units[j]`` is the meaning of controller unit ``j + (start is not None)``; ``start`` the
    index of the start unit (+1 only before the first symbol; None for a linear controller).
    ``memory`` names the store class (``grefenstette``, ``joulin_mikolov``, ``suzgun``),
    ``store`` the machine's store (``stack``, ``queue``, ``deque``), ``code`` the symbol code
    (``binary`` or ``one_hot``) and ``codes`` its (G + 1, width) 0/1 rows (row G: empty)."""

    memory: str = "grefenstette"
    store: str = "stack"
    code: str = "binary"
    codes: np.ndarray = None  # type: ignore[assignment]
    linear: bool = False
    start: int | None = 0
    units: tuple[ControllerUnit, ...] = ()


@dataclass(frozen=True, eq=False)
class BufferedController(ControllerMemory):
    """The buffered stack RNN of Hao et al. (2018) §2.3: a `ControllerMemory` whose units may
    be ε-units (a = −1) or idle units (a = −2), with a variable number of steps per symbol."""


@dataclass(frozen=True, eq=False)
class NSChart(Abstraction):
    """The RNS-RNN of DuSell & Chiang (2021): unit (q, x) is the reading's log-weight of state
    q with top x; ``neg`` is L, the stand-in for log 0; ``window`` the stack window (None:
    unbounded)."""

    neg: int = 10_000
    window: int | None = None


@dataclass(frozen=True, eq=False)
class SteppedUnits(Abstraction):
    """A network that is not certified (second-order units, several steps per symbol): its
    labels only. `pdanet.verify` checks it."""


__all__ = ["MAX_LABELS", "Abstraction", "BufferedController", "ControllerMemory", "ControllerUnit",
           "DyckSlots", "NSChart", "RecurrentUnits", "SteppedUnits"]
