"""pdanet: compile symbolic automata into neural networks with hand-set weights, and prove that
network and automaton agree.

    import pdanet as pn
    m = pn.tasks.dyck(k=2, m=3)
    net = pn.compile(m, target="lstm")
    pn.verify(m, net, max_length=8).ok
    pn.certify(m, net)

``import pdanet`` does not import torch: the symbolic core is loaded at once, and the names that
need torch (`compile`, `verify`, `certify`, `CompiledNetwork`, `load_network`, ...) are loaded
on first use (PEP 562 module ``__getattr__``).

`pn.verify` is the function `pdanet.verify.lockstep.verify`; the subpackage of the same name is
``sys.modules["pdanet.verify"]`` (``from pdanet.verify.bounds import table`` and the like work
as usual). The subpackage is imported here, before the name is bound, so importing any of its
submodules later never rebinds `pn.verify` to the module.
"""

from __future__ import annotations

import importlib
from typing import Any

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
from pdanet.automata.composition import PushdownRelation, compose
from pdanet.automata.conversions import accepts_empty, pda_to_cfg, to_empty_stack, to_final_state
from pdanet.automata.fst import FST
from pdanet.automata.intersection import intersect
from pdanet.automata.io import from_automata_lib, from_pyformlang, load
from pdanet.automata.nfa import NFA
from pdanet.automata.probabilistic import PFSA, ProbabilisticDPDA
from pdanet.automata.regex import regex_to_dfa
from pdanet.automata.weighted import WeightedPDA, WeightedPDT
from pdanet.automata.weighted_epsilon import remove_epsilon, string_weight
from pdanet.automata.weighted_ops import allsum, closure, pcfg_to_wpda, wpda_allsum, wpda_to_wcfg

# Load the subpackage pdanet.verify now (it is cheap and torch-free) so that the import system
# binds the attribute ``verify`` to the module here, once; the name is then dropped, and
# ``__getattr__`` below binds it to the function on first use.
importlib.import_module("pdanet.verify")
globals().pop("verify", None)

__version__ = "0.1.0"

# name -> (module, attribute): loaded on first access, then cached in the module's namespace
_LAZY: dict[str, tuple[str, str]] = {
    "draw": ("pdanet.automata.draw", "draw"),
    "render": ("pdanet.automata.draw", "render"),
    "to_networkx": ("pdanet.automata.draw", "to_networkx"),
    "CompiledNetwork": ("pdanet.constructions.base", "CompiledNetwork"),
    "compile": ("pdanet.constructions.table", "compile"),
    "load_network": ("pdanet.export", "load_network"),
    "save_network": ("pdanet.export", "save_network"),
    "initialize": ("pdanet.learning.init", "initialize"),
    "weight_tolerance": ("pdanet.learning.init", "weight_tolerance"),
    "paper_learner": ("pdanet.learning.paper_init", "paper_learner"),
    "bounds": ("pdanet.verify.bounds", ""),
    "verify": ("pdanet.verify.lockstep", "verify"),
    "VerifyOptions": ("pdanet.verify.lockstep", "VerifyOptions"),
    "certify": ("pdanet.verify.certify", "certify"),
    "Certificate": ("pdanet.verify.certify", "Certificate"),
}

__all__ = [
    "BOTTOM",
    "CFG",
    "DFA",
    "DPDA",
    "DPDT",
    "EPSILON",
    "FST",
    "NFA",
    "PCFG",
    "PDA",
    "PFSA",
    "Alphabet",
    "BoundedPDA",
    "Certificate",
    "CompiledNetwork",
    "DyckKM",
    "ProbabilisticDPDA",
    "PushdownRelation",
    "VerifyOptions",
    "WeightedPDA",
    "WeightedPDT",
    "__version__",
    "accepts_empty",
    "allsum",
    "bounds",
    "certify",
    "closure",
    "compile",
    "compose",
    "draw",
    "errors",
    "from_automata_lib",
    "from_pyformlang",
    "initialize",
    "intersect",
    "limits",
    "load",
    "load_network",
    "paper_learner",
    "pcfg_to_wpda",
    "pda_to_cfg",
    "regex_to_dfa",
    "remove_epsilon",
    "render",
    "save_network",
    "string_weight",
    "tasks",
    "to_empty_stack",
    "to_final_state",
    "to_networkx",
    "verify",
    "weight_tolerance",
    "wpda_allsum",
    "wpda_to_wcfg",
]


# subpackages and modules reachable as attributes (``pn.constructions.available``)
_SUBMODULES = frozenset({"automata", "constructions", "learning", "export", "plot", "demo", "cli"})


def __getattr__(name: str) -> Any:
    """Load a torch-dependent (or otherwise heavy) public name, or a submodule, on first use."""
    if name in _SUBMODULES:
        return importlib.import_module(f"pdanet.{name}")  # the import binds the attribute
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'pdanet' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
