"""Certificates for the compiled stack RNNs and the NS-RNN: the public names of
`pdanet.verify.certify.stack` and `pdanet.verify.certify.ns` under their earlier module path."""

from __future__ import annotations

from pdanet.verify.certify.ns import certify_ns_rnn
from pdanet.verify.certify.stack import (
    _exact_terms_sum,
    _step_invariant,
    certify_stack_rnn,
    memory_check,
)

__all__ = ["_exact_terms_sum", "_step_invariant", "certify_ns_rnn", "certify_stack_rnn",
           "memory_check"]
