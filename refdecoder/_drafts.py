"""JSON Schema drafts 4, 6, 7 and 2019-09: which draft a schema is read in, and the keywords that differ.

Theory of operation
-------------------
A schema's dialect is named by its ``$schema`` (draft-04 Core §6, draft-06/07 Core §7, 2019-09 Core
§8.1.1, 2020-12 Core §8.1.1); a document that names none is read in ``JsonProfile.draft`` (2020-12 by
default). :func:`dialect_of` maps the meta-schema URIs of json-schema.org (http or https, with or
without the empty fragment ``#``) to a draft; any other ``$schema`` is refused, because a meta-schema
may declare vocabularies the reference does not know.

``_resolve.Resolver`` records the dialect of every location while it indexes the documents (a
``$schema`` switches it for the subschemas below it), with each draft's identifier rules
(:func:`identifier`); ``_jsonschema.Compiler`` normalizes a schema object of an older draft with that
draft's keyword table (``_jsonschema.shape_of_older_draft``, ``KEYWORDS_BY_DRAFT``: the older drafts' keyword functions are
built from the front-end's shapes, so they live with them, in its last section). Documents are **not**
rewritten into 2020-12 ones: a ``$ref`` is a JSON pointer into the document as written (``#/items/0``,
``#/definitions/a``), so reading the original keeps every pointer valid, and a rewrite could not express
the drafts' ``$ref`` (which hides its siblings) or ``$recursiveRef`` anyway. A keyword with the same
meaning in two drafts is the same function (``_jsonschema.KEYWORDS``); each difference below is one
function, citing the draft's section. A keyword missing from a draft's table is not a keyword of that
draft, hence an annotation: every draft says unknown keywords are ignored (2019-09 Core §4.3.1:
"Unknown keywords SHOULD be ignored").

The differences from 2020-12 (Validation = the draft's validation specification, Core = its core one):

* ``type: "integer"`` (draft-04): "a JSON number without a fraction or exponent part"
  (draft-zyp-json-schema-04 §3.5), a property of the text: ``1.0`` is not one (from draft-06 on it is
  any number with a zero fractional part). Compiled as numbers *spelled* as integers
  (``_numbers.NumberConstraint.spelling``).
* ``minimum``/``maximum`` with boolean ``exclusiveMinimum``/``exclusiveMaximum`` (draft-04 Validation
  §5.1.2-5.1.3); numeric ones from draft-06 (Validation §6.2-6.5), as in 2020-12.
* ``items`` as an array of schemas with ``additionalItems`` for the positions after it (draft-04
  Validation §5.3.1, draft-06 §6.9-6.10, draft-07 §6.4.1-6.4.2, 2019-09 Core §9.3.1.1-9.3.1.2); a schema
  ``items`` applies to every item and ``additionalItems`` is then ignored, as it is without ``items``.
* ``dependencies`` (draft-04 Validation §5.4.5, draft-06 §6.21, draft-07 §6.5.7): per property, an array
  of property names (2019-09's ``dependentRequired``) or a schema (``dependentSchemas``).
* ``$ref`` (drafts 4-7): "All other properties in a "$ref" object MUST be ignored" (draft-07 Core §8.3,
  draft-06 Core §8; draft-04 through JSON Reference, draft-pbryan-zyp-json-ref-03 §3: "Any members other
  than "$ref" in a JSON Reference object SHALL be ignored"), ``$id``/``id`` next to it included (no base
  change).
  From 2019-09 on, ``$ref`` is one applicator among its siblings (2019-09 Core §8.2.4.1).
* Identifiers: draft-04 spells ``$id`` as ``id`` (draft-04 Core §7.2); in drafts 4-7 an identifier
  that is a plain-name fragment (``"#foo"``) names a location, as 2019-09's ``$anchor`` does (draft-07
  Core §8.2.3); ``$anchor`` exists from 2019-09, ``$dynamicAnchor`` only in 2020-12.
* ``contains`` (drafts 6-7): at least one matching item; ``minContains``/``maxContains`` are 2019-09's.
* ``const``, ``contains``, ``propertyNames`` and numeric exclusive bounds are new in draft-06;
  ``if``/``then``/``else`` in draft-07; ``dependentRequired``, ``dependentSchemas``, ``min/maxContains``,
  ``unevaluated*``, ``$recursiveRef`` in 2019-09; ``prefixItems`` and ``$dynamicRef`` in 2020-12.
* ``$recursiveRef`` (2019-09 Core §8.2.4.2): ``"#"`` resolved against the current resource, unless that
  resource sets ``$recursiveAnchor: true``: then the outermost such resource of the dynamic scope. With
  two or more anchored resources the schema expression carries the part of the dynamic scope that
  decides it (refdecoder/_dynamic.py); refused only where ``jsonschema``'s resolver reads the scope
  otherwise (it stops at the first resource without the anchor).
* ``unevaluatedProperties``/``unevaluatedItems`` (2019-09 Core §9.3.1.3, §9.3.2.4): decided as in
  2020-12 (refdecoder/_unevaluated.py), with 2019-09's evaluating keywords (array-form ``items``,
  ``additionalItems``); refused where ``jsonschema``'s 2019-09 reading departs from the spec.

``format`` is read the same way in every draft: ``JsonProfile.formats`` decides whether it asserts, and
under ``"assert"`` the formats the reference implements are enforced in every draft, whichever draft
first named them (engines assert formats whatever the draft).
"""

from __future__ import annotations

import re
from typing import Any

from .grammar import JSON_SCHEMA_DRAFTS

__all__ = [
    "dialect_of",
    "identifier",
    "schema_members",
    "NAME_MAPS",
    "REF_ALONE",
    "UNKNOWN",
    "VALUE_KEYWORDS",
]

#: The dialect of a location whose ``$schema`` names no draft the reference knows.
UNKNOWN = ""

_META = re.compile(
    r"^https?://json-schema\.org/(?:draft-0(?P<old>[3-7])|draft/(?P<new>2019-09|2020-12))/schema#?$"
)
#: Drafts in which "$ref" hides its siblings and "#name" identifiers are anchors.
REF_ALONE = frozenset({"draft-04", "draft-06", "draft-07"})


def dialect_of(meta: str) -> str:
    """The draft a ``$schema`` URI names (one of ``JSON_SCHEMA_DRAFTS``), or :data:`UNKNOWN`."""
    m = _META.match(meta)
    if m is None:
        return UNKNOWN
    if m.group("new"):
        return m.group("new")
    name = f"draft-0{m.group('old')}"
    return name if name in JSON_SCHEMA_DRAFTS else UNKNOWN  # draft-03, draft-05 (never published)


def identifier(node: dict[str, Any], draft: str) -> tuple[str | None, str | None]:
    """``(base, anchor)`` that a schema object declares in ``draft``: a URI reference that changes the
    base URI, and a plain name that names this location (either may be None)."""
    if draft in REF_ALONE:
        ident = node.get("id" if draft == "draft-04" else "$id")
        if not isinstance(ident, str) or "$ref" in node:
            return None, None  # an identifier next to "$ref" is ignored with the rest
        if ident.startswith("#"):
            return None, ident[1:]  # a location-independent identifier (draft-07 Core §8.2.3)
        return ident, None
    ident = node.get("$id")
    anchor = node.get("$anchor")
    return (ident if isinstance(ident, str) else None), (anchor if isinstance(anchor, str) else None)


#: Keywords whose value is a JSON value, not a schema: a walk for identifiers and references skips
#: them — but a member of that name in a map of schemas (``$defs/default``) is a schema.
VALUE_KEYWORDS = frozenset(("enum", "const", "examples", "default"))
#: Keywords whose value maps names (or patterns) to schemas.
NAME_MAPS = frozenset(
    ("$defs", "definitions", "properties", "patternProperties", "dependentSchemas", "dependencies")
)


def schema_members(node: dict[str, Any], names: bool) -> list[tuple[str, Any, bool]]:
    """The members of ``node`` a walk for identifiers and references descends into, each as
    ``(key, value, value is a map of schemas)``: all of them where ``node`` is a map of schemas
    (``names``), else all but the value keywords."""
    if names:
        return [(k, v, False) for k, v in node.items()]
    return [(k, v, k in NAME_MAPS) for k, v in node.items() if k not in VALUE_KEYWORDS]
