"""All-lengths certificates: the public names of `pdanet.verify.certify` under their earlier
module path (`pdanet.certify` is `certify` here). The certifier core is
`pdanet.verify.certify.core` and `pdanet.verify.certify.induction`; the box family of recurrent
networks is `pdanet.verify.certify.box`."""

from __future__ import annotations

from pdanet.verify.certify.box import QUANTA, explore, explore_at
from pdanet.verify.certify.core import (
    EPS_LADDER,
    EPS_MAX,
    MAX_ROUNDS,
    Certificate,
    FailingCase,
    Progress,
    best_over_caps,
    check_arguments,
    check_pair,
    nan_min,
    no_nan,
    nonfinite_weights,
    notify,
    overflow_free,
    rejected,
    weights_failure,
)
from pdanet.verify.certify.dispatch import certify
from pdanet.verify.certify.dyck import uses_structural
from pdanet.verify.certify.scale import min_scale

__all__ = ["EPS_LADDER", "EPS_MAX", "MAX_ROUNDS", "QUANTA", "Certificate", "FailingCase",
           "Progress", "best_over_caps", "certify", "check_arguments", "check_pair", "explore",
           "explore_at", "min_scale", "nan_min", "no_nan", "nonfinite_weights", "notify",
           "overflow_free", "rejected", "uses_structural", "weights_failure"]
