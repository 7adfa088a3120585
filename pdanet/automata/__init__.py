"""The symbolic core: alphabets, DFAs, pushdown automata and transducers, depth-bounded automata,
grammars and the named tasks of the source papers."""

from pdanet.automata import tasks
from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import BatchTrace, Machine, Step
from pdanet.automata.bounded import BoundedPDA, DyckConfig, DyckKM, dyck
from pdanet.automata.dfa import DFA, DFAConfig
from pdanet.automata.grammar import CFG, PCFG
from pdanet.automata.pda import DPDA, PDA, PDAConfig
from pdanet.automata.pdt import DPDT, PDTConfig

__all__ = ["Alphabet", "EPSILON", "BOTTOM", "Machine", "Step", "BatchTrace", "DFA", "DFAConfig",
           "DyckKM", "DyckConfig", "dyck", "BoundedPDA", "DPDA", "PDA", "PDAConfig", "DPDT",
           "PDTConfig", "CFG", "PCFG", "tasks"]
