"""A read-only view of the JSON Schema front-end's keyword tables, for tools that explain a schema.

``maskcert check-schema --explain`` classifies every keyword of a schema as the compiler would; it reads
these tables rather than the front-end's private modules, so that the classification cannot drift from
what the compiler does. Each draft's table: :func:`enforced` (the keywords compiled into the language
exactly, or read by a sibling), :func:`refused` (keyword -> why the reference cannot decide it), and
:data:`ANNOTATIONS` (2020-12's keywords that constrain nothing). :func:`dialect_of` names the draft a
``$schema`` URI declares (:data:`UNKNOWN_DRAFT` when none the reference knows).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ._drafts import UNKNOWN, dialect_of
from ._jsonschema import ANNOTATIONS, KEYWORDS, KEYWORDS_BY_DRAFT, REFUSED, REFUSED_BY_DRAFT

__all__ = ["ANNOTATIONS", "UNKNOWN_DRAFT", "dialect_of", "enforced", "refused"]

#: What :func:`dialect_of` returns for a ``$schema`` naming no draft the reference knows.
UNKNOWN_DRAFT: str = UNKNOWN

_ENFORCED: dict[str, frozenset[str]] = {
    "2020-12": frozenset(KEYWORDS),
    **{draft: frozenset(table) for draft, table in KEYWORDS_BY_DRAFT.items()},
}
_REFUSED: dict[str, Mapping[str, str]] = {
    "2020-12": MappingProxyType(dict(REFUSED)),
    **{draft: MappingProxyType(dict(table)) for draft, table in REFUSED_BY_DRAFT.items()},
}
_NONE: Mapping[str, str] = MappingProxyType({})


def enforced(draft: str = "2020-12") -> frozenset[str]:
    """The keywords ``draft`` compiles (or that a sibling reads); KeyError for a draft without a table
    (``refdecoder.grammar.JSON_SCHEMA_DRAFTS`` lists those with one)."""
    return _ENFORCED[draft]


def refused(draft: str = "2020-12") -> Mapping[str, str]:
    """Keyword -> why the reference refuses it when read in ``draft`` (empty: none refused)."""
    return _REFUSED.get(draft, _NONE)
