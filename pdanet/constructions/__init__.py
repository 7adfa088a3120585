"""Compilers from machines to networks with hand-set weights."""

from pdanet.constructions.base import CompiledNetwork, ExactWeight, available, compile, register

__all__ = ["CompiledNetwork", "ExactWeight", "compile", "register", "available"]
