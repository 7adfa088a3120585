"""`certify`: the certificate family of a network is chosen by the type of its abstraction.

`FAMILIES` maps each `pdanet.constructions.abstraction` class to the module of
`pdanet.verify.certify` that certifies its networks (None: a class whose networks are not
certified, though a base class's are). `family` walks the MRO of ``type(net.abstraction)``, so a
subclass of a certified abstraction is certified by its base's family unless it says otherwise.
Adding a family is adding one module with a ``certify(machine, net, *, dtype, eps, max_configs,
chunk, kernel, progress)`` function and one entry here.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from pdanet.automata.base import Machine
from pdanet.constructions.abstraction import (
    Abstraction,
    BufferedController,
    CompactSlots,
    ControllerMemory,
    DyckSlots,
    NSChart,
    RecurrentUnits,
)
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.lm import LMUnits
from pdanet.constructions.ns_lm import NSLMChart
from pdanet.errors import CertificationError
from pdanet.models.dusell_chiang import NSController
from pdanet.models.grefenstette import GrefenstetteController
from pdanet.models.hao import PaperController
from pdanet.models.suzgun import BabyNTMController, SuzgunController
from pdanet.verify.certify.core import Certificate, Progress, check_arguments, no_nan

FAMILIES: dict[type[Abstraction], str | None] = {
    RecurrentUnits: "box",          # box induction over explored (configuration, state) pairs
    DyckSlots: "dyck",              # local views when too many configurations, else box
    CompactSlots: "compact",        # local views when too many configurations, else box
    ControllerMemory: "stack",      # exact saturation + the memory lemma
    GrefenstetteController: "grefenstette",  # exact saturation of the paper's heads, data path boxed
    BufferedController: None,       # several steps per symbol: checked by pn.verify only
    NSChart: "ns",                  # a length bound on the stand-in for log 0
    LMUnits: "lm",                  # box induction, then a bound on the log-probability error
    NSLMChart: None,                # an NS-RNN language model: pn.verify (by distribution) only
    SuzgunController: "suzgun",     # Suzgun et al. 2019: exact one-hot softmax + the memory lemma
    BabyNTMController: "suzgun",    # Suzgun et al. 2019 §3.3: a finite product, explored exactly
    PaperController: "paper",       # Hao et al. 2018, Joulin–Mikolov 2015: exact saturation
    NSController: "dusell",         # DuSell & Chiang: exact one-hot actions + the chart lemma
}


def family(net: Any) -> str:
    """The name of the module of `pdanet.verify.certify` that certifies `net` (`FAMILIES`, by
    the MRO of its abstraction's type); CertificationError when none does."""
    abst = getattr(net, "abstraction", None)
    for cls in type(abst).__mro__:
        if cls in FAMILIES:
            if FAMILIES[cls] is None:
                break
            return FAMILIES[cls]
    what = getattr(net, "construction", type(net).__name__)
    raise CertificationError(
        f"no certificate family for a network whose abstraction is {type(abst).__name__} "
        f"({what}); check it with pn.verify")


def certify(machine: Machine, net: CompiledNetwork, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Prove that `net` agrees with `machine` on every string whose prefixes are live (or up to
    a stated length), by the family its abstraction selects (`family`).

    ``eps`` caps the box radius (None: searched over `EPS_LADDER`). Radii are per unit: starting
    from the initial state's own deviation, they are widened to the image's deviation until the
    box family is invariant (`pdanet.verify.certify.induction`). LSTM cells that still move are
    bounded by their drift per step with their radius capped at ``eps``. Dyck-(k, m) networks
    with more than ``max_configs`` cases are certified structurally
    (`pdanet.verify.certify.dyck`); ``chunk`` is the number of explored pairs enclosed at once.

    ``kernel`` says how tanh and sigmoid kernels are modelled (`intervals.KERNEL_MODELS`):
    ``"ulp"`` (default) bounds their error by a few ulps; ``"saturating"`` adds exact
    saturation (σ = 1, tanh = ±1 beyond thresholds checked on this build's kernels), which is
    what makes a saturated forget gate exactly 1 and an LSTM certificate hold for every length.
    Under ``"ulp"``, a certificate that does not cover every length is retried under
    ``"saturating"``; the returned certificate's ``kernel`` names the model its proof used, and
    a note gives what the ulp model alone proved.

    Bad arguments raise InputError (`check_arguments`: ``eps`` finite in (0, `EPS_MAX`],
    ``chunk`` and ``max_configs`` positive ints); a network compiled for another machine, or one
    no family certifies, raises CertificationError. A non-finite weight, or any NaN met on the
    way, gives a NOT CERTIFIED certificate whose failing case names it. ``progress``: None or a
    callable ``progress(stage, done, total)``, called per pass or chunk of cases.
    """
    check_arguments(eps=eps, chunk=chunk, max_configs=max_configs, kernel=kernel, dtype=dtype,
                    progress=progress)
    module = importlib.import_module(f"{__package__}.{family(net)}")
    return no_nan(module.certify(machine, net, dtype=dtype, eps=eps, max_configs=max_configs,
                                 chunk=chunk, kernel=kernel, progress=progress))


__all__ = ["FAMILIES", "certify", "family"]
