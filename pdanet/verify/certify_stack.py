"""Certificates for the compiled stack RNNs and the NS-RNN: the public names of
`pdanet.verify.certify.stack` and `pdanet.verify.certify.ns` under their earlier module path."""

from __future__ import annotations

from pdanet.verify.certify.ns import certify_ns_rnn
from pdanet.verify.certify.stack import (
    certify_stack_rnn,
    exact_terms_sum,
    memory_check,
    step_invariant,
)

__all__ = [
    "certify_ns_rnn",
    "certify_stack_rnn",
    "exact_terms_sum",
    "memory_check",
    "step_invariant",
]
