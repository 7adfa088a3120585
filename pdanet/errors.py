"""The exception hierarchy of pdanet.

Every error names what is wrong (the state, symbol, transition, field or unit) and says what to do.
"""

from __future__ import annotations


class PdanetError(Exception):
    """Base class of every error raised by pdanet."""


class AutomatonError(PdanetError):
    """A machine is malformed: undeclared states, missing start state, bad transitions."""


class DeterminismError(AutomatonError):
    """A machine declared deterministic has two transitions that can fire on the same input."""


class FrozenMachineError(AutomatonError):
    """An attribute of a machine was set or deleted after construction (machines are immutable)."""


class EpsilonLoopError(AutomatonError):
    """A cycle of ε-moves that never consumes input: in a pushdown machine, or in a transducer
    whose ε-moves emit output, so that a translation is infinite (give a maximum length)."""


class InputError(PdanetError):
    """Bad input to a machine or a network: unknown symbols, bad arguments, bad lengths."""


class DivergenceError(InputError):
    """A star or an allsum does not converge: the weights on some cycle sum to ≥ 1."""


class SpecError(PdanetError):
    """A machine file (JSON, JFLAP) is malformed. The message names the path to the bad field."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


class SearchBoundError(PdanetError):
    """A nondeterministic simulation explored more configurations than its explicit bound."""


class CompileError(PdanetError):
    """A machine cannot be compiled to the requested target (and the message says which can)."""


class UnboundedStackError(CompileError):
    """A machine with an unbounded stack was given to a finite-state target."""


class VerificationError(PdanetError):
    """Verification could not be carried out (not: verification found a disagreement)."""


class CertificationError(PdanetError):
    """Certification could not be attempted for this machine and network."""


class ResourceError(PdanetError):
    """A request would exceed a resource limit (memory, units, configurations, time).

    Raised *before* allocating, from an estimate; the message gives the estimate, the limit and
    how to raise it (``pdanet.limits.raised(...)`` or the ``PDANET_MAX_*`` environment variables).
    """


__all__ = [
    "AutomatonError",
    "CertificationError",
    "CompileError",
    "DeterminismError",
    "DivergenceError",
    "EpsilonLoopError",
    "FrozenMachineError",
    "InputError",
    "PdanetError",
    "ResourceError",
    "SearchBoundError",
    "SpecError",
    "UnboundedStackError",
    "VerificationError",
]
