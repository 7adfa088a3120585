"""pdanet: compile symbolic automata into neural networks with hand-set weights, and prove that
network and automaton agree."""

from pdanet import errors
from pdanet.automata import BOTTOM, DFA, EPSILON, Alphabet, DyckKM
from pdanet.constructions import CompiledNetwork, compile

__version__ = "0.1.0"

__all__ = ["errors", "Alphabet", "EPSILON", "BOTTOM", "DFA", "DyckKM", "CompiledNetwork",
           "compile", "__version__"]
