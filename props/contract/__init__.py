"""The contract every layer above speaks: findings and their invariants, the ``Backend`` protocol an
adapter implements, spec references (``docs/architecture.md``, "The contract")."""

from props.contract.backend import Backend, BackendMatcher, Compiled, DeclaredProfile, Refused
from props.contract.findings import Finding, FindingFailure, SpecRef

__all__ = [
    "Backend",
    "BackendMatcher",
    "Compiled",
    "DeclaredProfile",
    "Refused",
    "Finding",
    "FindingFailure",
    "SpecRef",
]
