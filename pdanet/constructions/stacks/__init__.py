"""Differentiable memories as parameter-free torch modules, batched and vectorised over cells.

Every module has ``init_state(...)``, ``step(state, actions) -> (state, reading)``,
``scan(actions over time, state=None) -> (state, readings)``, ``forward(...) -> readings (B, T, m)``
and ``contents(state, threshold=0.5)`` (the discrete contents per batch element). States are
frozen dataclasses of tensors; actions are NamedTuples of tensors produced by a controller.

- `NeuralStack`, `NeuralQueue`, `NeuralDeQue`: Grefenstette et al. (2015), stratified (multi-pop).
- `SuperpositionStack`: Joulin & Mikolov (2015) as in DuSell & Chiang (2022), optional depth limit.
- `SuzgunStack`, `BabyNTM`: Suzgun et al. (2019).
- `InputBuffer`, `OutputBuffer`: Hao et al. (2018) §2.3 (ε-steps on input and output).
- `NondeterministicStack`: DuSell & Chiang (2021), the (R)NS-RNN's stack WFA (Lang's algorithm
  over log action weights; its own ``forward(log_actions) -> NSResult`` interface, and
  ``initial_state(batch)`` / ``step(state, log_actions_t) -> (NSState, reading_t)`` for a
  controller that needs r_{t−1} before it emits step t's actions).

The Grefenstette, Joulin–Mikolov and Suzgun stores are also `Store`s (`protocol`): they give a
compiled controller their one-step op encoding (``actions``), their discrete semantics
(``apply``, checked by `check_store`) and an in-place run (``run``).
"""

from pdanet.constructions.stacks.buffered import BufferState, InputBuffer, OutputBuffer
from pdanet.constructions.stacks.grefenstette import (
    DequeActions,
    DequeReading,
    DequeState,
    NeuralDeQue,
    NeuralQueue,
    NeuralStack,
    StackActions,
    StratifiedState,
)
from pdanet.constructions.stacks.ns import NondeterministicStack, NSState
from pdanet.constructions.stacks.protocol import Store, StoreRun, SymbolCodes, check_store
from pdanet.constructions.stacks.superposition import (
    NOOP,
    POP,
    PUSH,
    SuperpositionActions,
    SuperpositionStack,
    SuperpositionState,
)
from pdanet.constructions.stacks.suzgun import (
    NTM_NOOP,
    POP_LEFT,
    POP_RIGHT,
    ROTATE_LEFT,
    ROTATE_RIGHT,
    S_POP,
    S_PUSH,
    BabyNTM,
    BabyNTMActions,
    MemoryState,
    SuzgunActions,
    SuzgunStack,
)

__all__ = [
    "NOOP",
    "NTM_NOOP",
    "POP",
    "POP_LEFT",
    "POP_RIGHT",
    "PUSH",
    "ROTATE_LEFT",
    "ROTATE_RIGHT",
    "S_POP",
    "S_PUSH",
    "BabyNTM",
    "BabyNTMActions",
    "BufferState",
    "DequeActions",
    "DequeReading",
    "DequeState",
    "InputBuffer",
    "MemoryState",
    "NSState",
    "NeuralDeQue",
    "NeuralQueue",
    "NeuralStack",
    "NondeterministicStack",
    "OutputBuffer",
    "StackActions",
    "Store",
    "StoreRun",
    "StratifiedState",
    "SuperpositionActions",
    "SuperpositionStack",
    "SuperpositionState",
    "SuzgunActions",
    "SuzgunStack",
    "SymbolCodes",
    "check_store",
]
