"""The symbolic core: alphabets, DFAs, pushdown automata and transducers, depth-bounded automata."""

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import BatchTrace, Machine, Step
from pdanet.automata.bounded import DyckConfig, DyckKM, dyck
from pdanet.automata.dfa import DFA, DFAConfig

__all__ = ["Alphabet", "EPSILON", "BOTTOM", "Machine", "Step", "BatchTrace", "DFA", "DFAConfig",
           "DyckKM", "DyckConfig", "dyck"]
