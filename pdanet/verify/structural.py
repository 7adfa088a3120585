"""Structural (local-view) certificates for the Dyck-(k, m) stack networks: the public names of
`pdanet.verify.certify.dyck` under their earlier module path."""

from __future__ import annotations

from pdanet.verify.certify.dyck import certify_structural, uses_structural

__all__ = ["certify_structural", "uses_structural"]
