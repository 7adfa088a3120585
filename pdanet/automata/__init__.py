"""The symbolic core: alphabets, DFAs, pushdown automata and transducers, depth-bounded automata,
grammars and the named tasks of the source papers."""

from pdanet.automata import tasks
from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import BatchTrace, Machine, Step
from pdanet.automata.bounded import BoundedPDA, DyckConfig, DyckKM, dyck
from pdanet.automata.composition import PushdownRelation, compose
from pdanet.automata.dfa import DFA, DFAConfig
from pdanet.automata.fst import FST
from pdanet.automata.grammar import CFG, PCFG
from pdanet.automata.pda import DPDA, PDA, PDAConfig
from pdanet.automata.pdt import DPDT, PDTConfig
from pdanet.automata.weighted_epsilon import remove_epsilon, string_weight
from pdanet.automata.weighted_ops import allsum, closure, pcfg_to_wpda, wpda_allsum, wpda_to_wcfg

__all__ = [
           "BOTTOM",
           "CFG",
           "DFA",
           "DPDA",
           "DPDT",
           "EPSILON",
           "FST",
           "PCFG",
           "PDA",
           "Alphabet",
           "BatchTrace",
           "BoundedPDA",
           "DFAConfig",
           "DyckConfig",
           "DyckKM",
           "Machine",
           "PDAConfig",
           "PDTConfig",
           "PushdownRelation",
           "Step",
           "allsum",
           "closure",
           "compose",
           "dyck",
           "pcfg_to_wpda",
           "remove_epsilon",
           "string_weight",
           "tasks",
           "wpda_allsum",
           "wpda_to_wcfg",
]
