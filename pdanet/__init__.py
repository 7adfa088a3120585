"""pdanet: compile symbolic automata into neural networks with hand-set weights, and prove that
network and automaton agree.

    import pdanet as pn
    m = pn.tasks.dyck(k=2, m=3)
    net = pn.compile(m, target="lstm")
    pn.verify(m, net, max_length=8).ok
    pn.certify(m, net)
"""

from pdanet import errors, limits
from pdanet.automata import (
    BOTTOM,
    CFG,
    DFA,
    DPDA,
    DPDT,
    EPSILON,
    PCFG,
    PDA,
    Alphabet,
    BoundedPDA,
    DyckKM,
    tasks,
)
from pdanet.automata.draw import draw, render, to_networkx
from pdanet.automata.io import load
from pdanet.automata.nfa import NFA
from pdanet.automata.regex import regex_to_dfa
from pdanet.automata.weighted import WeightedPDA, WeightedPDT
from pdanet.constructions import CompiledNetwork, compile
from pdanet.export import load_network, save_network
from pdanet.learning import initialize
from pdanet.verify import bounds
from pdanet.verify.certificate import Certificate, certify
from pdanet.verify.lockstep import verify

__version__ = "0.1.0"

__all__ = [
    "errors", "limits", "Alphabet", "EPSILON", "BOTTOM", "DFA", "NFA", "DPDA", "PDA", "DPDT", "BoundedPDA",
    "DyckKM", "CFG", "PCFG", "WeightedPDA", "WeightedPDT", "tasks", "regex_to_dfa", "load", "draw", "render", "to_networkx",
    "CompiledNetwork", "compile", "load_network", "save_network", "initialize", "verify", "certify", "Certificate", "bounds", "__version__",
]
