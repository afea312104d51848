"""The reference as a backend: the yardstick adapter, and what ``maskcert certify`` runs by default."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import refdecoder
from props.contract.backend import Compiled, CompileOutcome, DeclaredProfile, Refused
from refdecoder import JsonProfile, LimitExceeded, Spec, TokenGrammar, Unsupported
from refdecoder import Matcher as RefMatcher
from tokenizers_matrix import Vocabulary

__all__ = ["ReferenceBackend"]


class ReferenceBackend:
    """``refdecoder`` behind the Backend protocol. Its matchers already have value semantics."""

    name = "reference"
    version = "0.1.0"

    def __init__(self, profile: JsonProfile | Mapping[str, Any] | None = None) -> None:
        # The reference implements every profile exactly; by default it follows JSON Schema with
        # repeated undeclared keys allowed (``JsonProfile()`` excludes them, with key memory). A mapping
        # is JsonProfile's fields (what `certify --profile` passes: options stay JSON for checkpoints).
        if isinstance(profile, Mapping):
            profile = JsonProfile(**profile)
        self.profile = DeclaredProfile(
            json=profile or JsonProfile(allow_duplicate_keys=True),
            notes=("refdecoder: exact by construction; refuses what it cannot decide",),
        )

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        t0 = time.perf_counter()
        try:
            grammar = refdecoder.compile(spec)
        except Unsupported as e:
            return Refused(e.reason, e.keyword, e.where)
        except LimitExceeded as e:
            return Refused(str(e), f"limit:{e.limit}", e.where)
        return Compiled(TokenGrammar(grammar, vocabulary), (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> RefMatcher:
        return RefMatcher(compiled.handle)
