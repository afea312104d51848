"""JSON Schema (draft 2020-12) front-end: schema -> shapes -> grammar network, exactly or not at all.

Older drafts (4, 6, 7, 2019-09), named by ``$schema`` or ``JsonProfile.draft``, go through the same
shapes with their own keyword tables (the last section; ``_drafts`` decides each location's draft).

Theory of operation
-------------------
A JSON Schema denotes a set of JSON values; the language is every serialization of those values that
the ``JsonProfile`` allows. Compilation has two layers.

1. **Shapes.** Every schema (sub-)expression is normalized to a :class:`Shape`: for each JSON type, the
   exact set of values of that type it accepts — ``null`` (bool), ``boolean`` (a set), ``number`` (a
   ``NumberPredicate``, integers included), ``string`` (a ``CodepointDFA`` over the decoded text), and
   for containers a *union* of :class:`ArrayShape` / :class:`ObjectShape` whose members are themselves
   schema expressions (so recursion through ``$ref`` stays finite). Each keyword is one small function
   (``KEYWORDS``) returning the shape it alone allows; a schema is the intersection of its keywords'
   shapes. ``allOf`` is intersection, ``anyOf`` union, ``not`` complement, ``oneOf`` and ``if``/``then``/
   ``else`` boolean combinations. Scalars are closed under all of these (DFAs and numeric predicates);
   containers are intersected structurally and complemented only where the result is still a union of
   shapes. Anything else raises ``Unsupported`` — the reference never approximates.

2. **Emission.** A shape becomes grammar nodes (``_ir``): literal and DFA lexemes for scalars, and two
   custom nodes for containers whose local state is finite: :class:`ObjectNode` remembers which declared
   keys were seen and how many members were read (no permutation explosion with ``property_order=any``),
   :class:`ArrayNode` the index and the ``contains`` count.

Schema expressions (``Expr``) are hashable: ``("loc", uri, pointer)`` for a schema in the document
(``("loc", uri, pointer, scope)`` when dynamic references can read the path that led there: the finite
part of the dynamic scope they read, refdecoder/_dynamic.py), ``("and", frozenset)``, ``("not", expr)``, ``("const", canonical_json)``, ``TRUE``/``FALSE``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import product
from typing import Any, Union
from urllib.parse import unquote, urldefrag, urljoin

from ._drafts import REF_ALONE, UNKNOWN, dialect_of, identifier
from ._dynamic import DynamicIndex, Loc, Scope, meta_schema
from ._fsa import CodepointDFA
from ._limits import check_bound, spend
from ._numbers import NumberPredicate
from ._shapes import (
    ANY_ARRAY,
    ANY_OBJECT,
    FALSE,
    TRUE,
    ArrayShape,
    Expr,
    ObjectShape,
    Shape,
    _ecma_search,
    _props_dict,
    and_exprs,
    any_shape,
    empty_shape,
    not_expr,
    only,
)
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import JSON_SCHEMA_DRAFTS, Deadline, JsonProfile, JsonSchema, Limits

__all__ = ["Compiler", "Shape", "ObjectShape", "ArrayShape", "KEYWORDS_BY_DRAFT", "REFUSED_BY_DRAFT"]


# Keywords that only annotate (draft 2020-12 core/meta-data/content vocabularies): ignored.
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$defs",
        "definitions",
        "$anchor",
        "$vocabulary",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        # read by their siblings (``contains``, ``if``), no constraint of their own:
        "minContains",
        "maxContains",
        "then",
        "else",
    }
)

JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")


# Fuel for normalizing one subschema (its shapes, number predicates, Boolean algebra): about the
# cost of a hundred automaton states (refdecoder/_limits.py).
_SHAPE_FUEL = 100


# ---------------------------------------------------------------------------------------------
# The compiler context: documents, $ref resolution, shape normalization (memoized)
# ---------------------------------------------------------------------------------------------
class Compiler:
    def __init__(self, spec: JsonSchema, limits: Limits) -> None:
        self.profile: JsonProfile = spec.profile
        self.limits = limits
        self.deadline = Deadline(limits.compile_seconds)
        self.root_uri = "urn:maskcert:root"
        self.resources: dict[str, Any] = {}  # absolute URI (no fragment) -> schema
        self.anchors: dict[str, tuple[str, str]] = {}  # uri#anchor -> (resource uri, pointer)
        self.base_of: dict[tuple[str, str], str] = {}  # (doc uri, pointer) -> base uri
        self.docs: dict[str, Any] = {}
        self._shapes: dict[Expr, Shape] = {}
        self._in_progress: set[Expr] = set()
        # Dialects (refdecoder/_drafts.py): the draft of every location not in the profile's draft,
        # the ``$schema`` behind each location of an unknown one, the 2019-09 $recursiveAnchor's.
        self.default_draft = spec.profile.draft
        self.draft_of: dict[tuple[str, str], str] = {}
        self.unknown_meta: dict[tuple[str, str], tuple[str, str]] = {}
        self.recursive_anchors: set[tuple[str, str]] = set()
        # Dynamic references (refdecoder/_dynamic.py): (resource URI, name) -> its $dynamicAnchor, and
        # the anchor URIs declared twice in one resource ($anchor and $dynamicAnchor, or two of either).
        self.dynamic_anchors: dict[tuple[str, str], tuple[str, str]] = {}
        self.ambiguous_anchors: set[str] = set()
        self.dynamic: DynamicIndex | None = None
        self._check_size(spec.schema)
        self.docs[self.root_uri] = spec.schema
        for uri, doc in spec.resources.items():
            self._check_size(doc)
            self.docs[uri] = doc
            self._index(doc, uri, urldefrag(uri)[0], "", 0, self.default_draft, None)
            self.resources.setdefault(urldefrag(uri)[0], (uri, ""))  # its retrieval URI, whatever its $id
        self._index(spec.schema, self.root_uri, self.root_uri, "", 0, self.default_draft, None)
        self.dynamic = self._dynamic_index()

    # -- input checks ---------------------------------------------------------------------------
    def _check_size(self, schema: Any) -> None:
        try:
            text = json.dumps(schema, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise SpecError("schema is not JSON", "/", f"a JSON-serializable schema ({e})") from e
        except RecursionError as e:
            raise LimitExceeded("nesting_depth", ">recursion limit", self.limits.nesting_depth, "/") from e
        if len(text) > self.limits.schema_bytes:
            raise LimitExceeded("schema_bytes", len(text), self.limits.schema_bytes)
        # Depth check without recursion.
        stack: list[tuple[Any, int]] = [(schema, 0)]
        while stack:
            node, d = stack.pop()
            if d > self.limits.nesting_depth:
                raise LimitExceeded("nesting_depth", d, self.limits.nesting_depth)
            if isinstance(node, dict):
                stack.extend((v, d + 1) for v in node.values())
            elif isinstance(node, list):
                stack.extend((v, d + 1) for v in node)

    def _index(
        self,
        node: Any,
        doc: str,
        base: str,
        ptr: str,
        depth: int,
        draft: str,
        unknown: tuple[str, str] | None,
    ) -> None:
        """Record $id resources and $anchor names with their base URIs, and each location's draft
        (iteratively deep). ``unknown``: the ``$schema`` (URI, pointer) of an unknown dialect."""
        if isinstance(node, dict):
            meta = node.get("$schema")
            if isinstance(meta, str):
                draft = dialect_of(meta)
                unknown = (meta, f"{ptr}/$schema") if draft == UNKNOWN else None
            if draft == "2020-12":
                if isinstance(node.get("$id"), str):
                    base = urldefrag(urljoin(base, node["$id"]))[0]
                    self.resources[base] = (doc, ptr)
                for kw in ("$anchor", "$dynamicAnchor"):
                    if isinstance(node.get(kw), str):
                        key = base + "#" + node[kw]
                        if (
                            key in self.anchors
                            and self.anchors[key] != (doc, ptr)
                            or (kw == "$dynamicAnchor" and (base, node[kw]) in self.dynamic_anchors)
                        ):
                            self.ambiguous_anchors.add(key)
                        self.anchors.setdefault(key, (doc, ptr))
                if isinstance(node.get("$dynamicAnchor"), str):
                    self.dynamic_anchors.setdefault((base, node["$dynamicAnchor"]), (doc, ptr))
            else:
                ident, anchor = identifier(node, draft)
                if ident is not None:
                    base = urldefrag(urljoin(base, ident))[0]
                    self.resources[base] = (doc, ptr)
                if anchor is not None:
                    self.anchors[base + "#" + anchor] = (doc, ptr)
                if draft == "2019-09" and node.get("$recursiveAnchor") is True:
                    self.recursive_anchors.add((doc, ptr))
                self.draft_of[(doc, ptr)] = draft
                if unknown is not None:
                    self.unknown_meta[(doc, ptr)] = unknown
            self.base_of[(doc, ptr)] = base
            for k, v in node.items():
                if k in ("enum", "const", "examples", "default"):
                    continue
                self._index(v, doc, base, f"{ptr}/{_esc(k)}", depth + 1, draft, unknown)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._index(v, doc, base, f"{ptr}/{i}", depth + 1, draft, unknown)
        if ptr == "":
            self.resources.setdefault(base, (doc, ptr))

    def draft_at(self, doc: str, ptr: str) -> str:
        """The draft a location is read in: its own, or (a location ``_index`` skips, such as a
        ``$ref`` into an ``enum`` value) that of its nearest indexed ancestor."""
        while (doc, ptr) not in self.base_of and ptr:
            ptr = ptr.rsplit("/", 1)[0]
        return self.draft_of.get((doc, ptr), "2020-12")

    def ctx(self, doc: str, ptr: str, schema: dict[str, Any], scope: Any = None) -> Ctx:
        """The keyword context of the schema object at ``doc#ptr`` (for ``_unevaluated``, which
        walks subschemas without importing this module)."""
        return Ctx(self, doc, ptr, schema, scope)

    def schema_at(self, doc: str, ptr: str) -> Any:
        node = self.docs[doc]
        if ptr == "":
            return node
        for raw in ptr.split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SpecError("unresolvable JSON pointer", ptr, "a path to a subschema")
        return node

    def static_target(self, ref: str, doc: str, ptr: str, kw: str = "$ref") -> tuple[str, str, Loc]:
        """``(uri, fragment, location)`` that ``ref`` at ``(doc, ptr)`` names, read as a ``$ref``."""
        base = self.base_of.get((doc, ptr), self.root_uri)
        target = urljoin(base, ref)
        uri, frag = urldefrag(target)
        if not uri:
            uri = base
        if uri not in self.resources:
            raise Unsupported(
                kw,
                ptr,
                f"reference {ref!r} resolves to {uri!r}, which is not in the schema "
                "(remote references are not fetched; the json-schema.org meta-schemas are known)",
            )
        rdoc, rptr = self.resources[uri]
        frag = unquote(frag)
        if frag == "" or frag.startswith("/"):
            full = rptr + frag
            self.schema_at(rdoc, full)
            return uri, frag, (rdoc, full)
        key = uri + "#" + frag
        if key not in self.anchors:
            raise SpecError(f"unknown $anchor in {kw}", ptr, f"an anchor named {frag!r} under {uri!r}")
        if key in self.ambiguous_anchors:
            raise Unsupported(
                kw,
                ptr,
                f"{key!r} is declared more than once in its resource ($anchor/$dynamicAnchor), so which "
                "schema it names is not defined",
            )
        return uri, frag, self.anchors[key]

    def resolve_ref(self, ref: str, doc: str, ptr: str, scope: Scope | None = None) -> Expr:
        """The expression ``$ref: ref`` at ``(doc, ptr)`` names; with the dynamic scope after following
        it when ``scope`` (that of ``(doc, ptr)``) is tracked (refdecoder/_dynamic.py)."""
        uri, frag, target = self.static_target(ref, doc, ptr)
        d = self.dynamic
        if d is not None and frag in d.names and (uri, frag) in self.dynamic_anchors:
            # jsonschema resolves a $ref to a $dynamicAnchor dynamically, the spec statically (2020-12
            # Core §8.2.3.1): decided only where both name the same schema.
            if scope is None:
                raise Unsupported("$ref", ptr, _NO_SCOPE)
            stacked = d.stack(
                scope, self.resource_of(doc, ptr), self.resources[uri] == self.resource_of(doc, ptr)
            )
            js = d.first(stacked, frag)[1]
            if js is not None and self._anchor_in(js, frag) != target:
                raise Unsupported(
                    "$ref",
                    ptr,
                    f"the reference names the $dynamicAnchor {frag!r}: the spec resolves a $ref statically "
                    f"(to {_loc_name(target)}), jsonschema dynamically (to {_loc_name(self._anchor_in(js, frag))}); "
                    "use $dynamicRef, or an $anchor, to say which",
                )
        if scope is None:
            return ("loc", *target)
        return ("loc", *target, self._followed(scope, doc, ptr, uri, target))

    def resolve_dynamic_ref(self, ref: str, doc: str, ptr: str, scope: Scope | None) -> Expr:
        """``$dynamicRef`` (2020-12 Core §8.2.3.2): a ``$ref``, unless its initial target is a
        ``$dynamicAnchor``: then that anchor in the outermost resource of the dynamic scope declaring
        it. Refused where jsonschema's resolver stack names another one (refdecoder/_dynamic.py)."""
        where = f"{ptr}/$dynamicRef"
        uri, frag, target = self.static_target(ref, doc, ptr, "$dynamicRef")
        d = self.dynamic
        if d is None or frag not in d.names or (uri, frag) not in self.dynamic_anchors:
            # a pointer, an $anchor, or a $dynamicAnchor only one reachable resource declares: a $ref
            return self.resolve_ref(ref, doc, ptr, scope)
        if scope is None:
            raise Unsupported("$dynamicRef", where, _NO_SCOPE)
        here = self.resource_of(doc, ptr)
        stacked = d.stack(scope, here, self.resources[uri] == here)
        spec, js = d.first(scope, frag)[0], d.first(stacked, frag)[1]
        spec_t = target if spec is None else self._anchor_in(spec, frag)
        js_t = target if js is None else self._anchor_in(js, frag)
        if spec_t != js_t:
            raise Unsupported(
                "$dynamicRef",
                where,
                f"the outermost resource of the dynamic scope declaring $dynamicAnchor {frag!r} is "
                f"{_loc_name(spec_t)} by the spec, but {_loc_name(js_t)} on jsonschema's resolver stack "
                "(which holds only resources left through references): the reference does not pick one",
            )
        if spec_t != target and self._js_base_differs(uri, spec_t):
            raise Unsupported(
                "$dynamicRef",
                where,
                f"jsonschema evaluates the dynamic target {_loc_name(spec_t)} against the base URI {uri!r} "
                "of the initial target, and it holds references or identifiers that base would change",
            )
        return ("loc", *spec_t, d.enter(stacked, self.resource_of(*spec_t)))

    def resolve_recursive_ref(self, doc: str, ptr: str, scope: Scope | None) -> Expr:
        """``$recursiveRef: "#"`` (2019-09 Core §8.2.4.2): ``"#"``, unless that resource sets
        ``$recursiveAnchor: true``: then the outermost resource of the dynamic scope setting it.
        Refused where jsonschema's resolver stack names another one (refdecoder/_dynamic.py)."""
        where = f"{ptr}/$recursiveRef"
        _, _, target = self.static_target("#", doc, ptr, "$recursiveRef")
        d = self.dynamic
        if d is None or d.recursive is None or target not in d.recursive:
            # "$recursiveAnchor" absent or false (a plain "$ref", §8.2.4.2.2), or the only resource
            # setting it: the outermost such resource in scope is the target itself
            return self.resolve_ref("#", doc, ptr, scope)
        if scope is None:
            raise Unsupported("$recursiveRef", where, _NO_SCOPE)
        spec_t = scope.spec_rec or target  # the current resource is in scope and sets it: never None
        js_t = scope.js_rec or target  # jsonschema: the oldest of the anchored run on top of its stack
        if spec_t != js_t:
            raise Unsupported(
                "$recursiveRef",
                where,
                f"the outermost resource with $recursiveAnchor: true in the dynamic scope is "
                f"{_loc_name(spec_t)} by the spec, but {_loc_name(js_t)} on jsonschema's resolver stack "
                "(which stops at the first resource without it): the reference does not pick one",
            )
        here = self.resource_of(doc, ptr)
        stacked = d.stack(scope, here, scope.js_rec is None or spec_t == here)
        return ("loc", *spec_t, d.enter(stacked, spec_t))

    # -- dynamic scopes (refdecoder/_dynamic.py) ----------------------------------------------------
    def resource_of(self, doc: str, ptr: str) -> Loc:
        """The schema resource a location belongs to, by the location of its root."""
        while (doc, ptr) not in self.base_of and ptr:
            ptr = ptr.rsplit("/", 1)[0]
        res = self.resources.get(self.base_of.get((doc, ptr), ""))
        return res if res is not None else (doc, "")

    def entered(self, scope: Scope, doc: str, ptr: str) -> Scope:
        """The scope of the subschema ``(doc, ptr)`` descended into: a new resource if it has ``$id``."""
        if self.dynamic is not None and self.resources.get(self.base_of.get((doc, ptr), "")) == (doc, ptr):
            return self.dynamic.enter(scope, (doc, ptr))
        return scope

    def _followed(self, scope: Scope, doc: str, ptr: str, uri: str, target: Loc) -> Scope:
        """The scope at ``target`` after following a reference to ``uri`` from ``(doc, ptr)``."""
        assert self.dynamic is not None
        here = self.resource_of(doc, ptr)
        stacked = self.dynamic.stack(scope, here, self.resources[uri] == here)
        return self.dynamic.enter(stacked, self.resource_of(*target))

    def _anchor_in(self, res: Loc, name: str) -> Loc:
        """The ``$dynamicAnchor`` named ``name`` that the resource ``res`` declares."""
        for (base, n), loc in self.dynamic_anchors.items():
            if n == name and self.resources.get(base) == res:
                return loc
        raise AssertionError((res, name))

    def _js_base_differs(self, uri: str, loc: Loc) -> bool:
        """jsonschema evaluates a dynamic target ``loc`` against the base ``uri`` of the initial target
        (joined with the target's own ``$id``): True when that is not ``loc``'s resource and the
        subtree holds references or identifiers, whose meaning would change."""
        node = self.schema_at(*loc)
        ident = node.get("$id") if isinstance(node, dict) else None
        js_base = urldefrag(urljoin(uri, ident))[0] if isinstance(ident, str) else uri
        if self.resources.get(js_base) == self.resource_of(*loc):
            return False
        stack: list[Any] = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, dict):
                if any(k in n for k in ("$ref", "$dynamicRef", "$recursiveRef", "$id", "id")):
                    return True
                stack.extend(v for k, v in n.items() if k not in ("enum", "const", "examples", "default"))
            elif isinstance(n, list):
                stack.extend(n)
        return False

    def _refs_in(self, doc: str) -> list[tuple[str, str, str]]:
        """``(pointer, keyword, value)`` of every reference in a document (``_index``'s walk)."""
        out: list[tuple[str, str, str]] = []
        stack: list[tuple[Any, str]] = [(self.docs[doc], "")]
        while stack:
            node, ptr = stack.pop()
            if isinstance(node, dict):
                for kw in ("$ref", "$dynamicRef", "$recursiveRef"):
                    if isinstance(node.get(kw), str):
                        out.append((ptr, kw, node[kw]))
                stack.extend(
                    (v, f"{ptr}/{_esc(k)}")
                    for k, v in node.items()
                    if k not in ("enum", "const", "examples", "default")
                )
            elif isinstance(node, list):
                stack.extend((v, f"{ptr}/{i}") for i, v in enumerate(node))
        return out

    def _reachable_docs(self) -> set[str]:
        """The documents the root reaches through references: only their resources can be in a
        dynamic scope. A json-schema.org meta-schema one of them names is loaded here, from the
        package's data (refdecoder/metaschemas), and indexed like a document of the schema."""
        docs = {self.root_uri}
        todo = [self.root_uri]
        while todo:
            doc = todo.pop()
            for ptr, _, value in self._refs_in(doc):
                uri = urldefrag(urljoin(self.base_of.get((doc, ptr), self.root_uri), value))[0]
                if uri not in self.resources and (meta := meta_schema(uri)) is not None:
                    self.docs[uri] = meta
                    self._index(meta, uri, uri, "", 0, self.default_draft, None)
                    self.resources.setdefault(uri, (uri, ""))
                target = self.resources.get(uri)
                if target is not None and target[0] not in docs:
                    docs.add(target[0])
                    todo.append(target[0])
        return docs

    def _dynamic_index(self) -> DynamicIndex | None:
        """What dynamic scopes to track: the $dynamicAnchor names some reference targets and two or
        more reachable resources declare, and $recursiveAnchor when two or more reachable resources
        set it; None when nothing is (a reference then always lands on its initial target)."""
        docs = self._reachable_docs()
        declared: dict[str, set[Loc]] = {}
        for (base, name), (doc, _) in self.dynamic_anchors.items():
            if doc in docs:
                declared.setdefault(name, set()).add(self.resources[base])
        targeted: set[str] = set()
        recursive_used = False
        for doc in docs:
            for ptr, kw, value in self._refs_in(doc):
                if kw == "$recursiveRef":
                    recursive_used = True
                    continue
                base = self.base_of.get((doc, ptr), self.root_uri)
                uri, frag = urldefrag(urljoin(base, value))
                if (uri or base, unquote(frag)) in self.dynamic_anchors:
                    targeted.add(unquote(frag))
        names = tuple(sorted(n for n in targeted if len(declared.get(n, ())) > 1))
        anchored = frozenset(
            loc
            for loc in self.recursive_anchors
            if loc[0] in docs and self.resources.get(self.base_of.get(loc, "")) == loc
        )
        recursive = anchored if recursive_used and len(anchored) > 1 else None
        if not names and recursive is None:
            return None
        declares: dict[Loc, frozenset[str]] = {}
        for n in names:
            for res in declared[n]:
                declares[res] = declares.get(res, frozenset()) | {n}
        root = self.resource_of(self.root_uri, "")
        unstacked = root if self.base_of.get((self.root_uri, "")) == self.root_uri else None
        return DynamicIndex(names, declares, recursive, unstacked)

    # -- normalization ----------------------------------------------------------------------------
    def shape(self, expr: Expr) -> Shape:
        cached = self._shapes.get(expr)
        if cached is not None:
            return cached
        if expr in self._in_progress:
            raise Unsupported(
                "$ref",
                _where(expr),
                "the schema refers to itself without going through an "
                "object or array, so it does not describe any value",
            )
        spend(_SHAPE_FUEL, _where(expr))
        self.deadline.check(_where(expr))
        if len(self._in_progress) >= self.limits.nesting_depth:  # a $ref chain or a deep nest of subschemas
            raise LimitExceeded(
                "nesting_depth",
                f"{len(self._in_progress) + 1} nested subschemas or $refs",
                self.limits.nesting_depth,
                _where(expr),
            )
        self._in_progress.add(expr)
        try:
            result = self._shape_uncached(expr)
        finally:
            self._in_progress.discard(expr)
        self._shapes[expr] = result
        return result

    def _shape_uncached(self, expr: Expr) -> Shape:
        if expr == TRUE:
            return any_shape()
        if expr == FALSE:
            return empty_shape()
        assert isinstance(expr, tuple)
        tag = expr[0]
        if tag == "and":
            out = any_shape()
            for e in sorted(expr[1], key=repr):
                out = self.intersect(out, self.shape(e))
            return out
        if tag == "not":
            return self.complement(self.shape(expr[1]), _where(expr))
        if tag == "const":
            return self.shape_of_value(json.loads(expr[1]))
        if tag == "loc":
            if len(expr) > 3:
                return self.shape_of_schema(expr[1], expr[2], expr[3])
            scope = None
            if self.dynamic is not None and (expr[1], expr[2]) == (self.root_uri, ""):
                scope = self.dynamic.initial(self.resource_of(self.root_uri, ""))  # the root: its own scope
            return self.shape_of_schema(expr[1], expr[2], scope)
        raise AssertionError(expr)

    def shape_of_schema(self, doc: str, ptr: str, scope: Scope | None = None) -> Shape:
        schema = self.schema_at(doc, ptr)
        if schema is True:
            return any_shape()
        if schema is False:
            return empty_shape()
        if not isinstance(schema, dict):
            raise SpecError(
                "schema must be an object or a boolean", ptr or "/", "a JSON object or true/false"
            )
        ctx = Ctx(self, doc, ptr, schema, scope)
        meta = schema.get("$schema")
        if meta is not None and not isinstance(meta, str):
            raise SpecError("'$schema' must be a string", ctx.at("$schema"), "a meta-schema URI")
        if self.draft_of and (draft := self.draft_at(doc, ptr)) != "2020-12":
            return shape_of_older_draft(self, ctx, draft)
        out = any_shape()
        if (
            not self.profile.additional_properties_default
            and "additionalProperties" not in schema
            and ("properties" in schema or "patternProperties" in schema)
        ):
            # The profile reads an absent additionalProperties as false (engines' "strict" mode).
            out = self.intersect(out, only(objects=(_additional(ctx, FALSE),)))
        if not self.profile.additional_items_default and "prefixItems" in schema and "items" not in schema:
            # The profile reads an absent items next to prefixItems as false (engines' "strict" mode).
            n = len(schema["prefixItems"]) if isinstance(schema["prefixItems"], list) else 0
            out = self.intersect(out, only(arrays=(ArrayShape(prefix=(TRUE,) * n, items=FALSE),)))
        for kw in sorted(schema):
            if kw in ANNOTATIONS:
                continue
            fn = KEYWORDS.get(kw)
            if fn is None:
                if kw in REFUSED:
                    raise Unsupported(kw, f"{ptr}/{_esc(kw)}", REFUSED[kw])
                continue  # unknown keywords are annotations in 2020-12
            part = fn(ctx, schema[kw], schema)
            if part is not None:
                out = self.intersect(out, part)
        return out

    def shape_of_value(self, v: Any) -> Shape:
        """The shape accepting exactly the JSON value ``v`` (numbers by mathematical value)."""
        e = empty_shape()
        if v is None:
            return replace(e, null=True)
        if isinstance(v, bool):
            return replace(e, boolean=frozenset({v}))
        if isinstance(v, (int, float)):
            x = _num(v, "const")
            return replace(e, number=NumberPredicate.from_keywords(minimum=x, maximum=x))
        if isinstance(v, str):
            return replace(e, string=CodepointDFA.literal(v))
        if isinstance(v, list):
            items = tuple(const_expr(x) for x in v)
            return replace(
                e, arrays=(ArrayShape(prefix=items, items=FALSE, min_items=len(v), max_items=len(v)),)
            )
        if isinstance(v, dict):
            named = tuple(sorted((k, const_expr(x)) for k, x in v.items()))
            obj = ObjectShape(
                named=named,
                rules=((CodepointDFA.any_string(), FALSE),),
                required=frozenset(v),
                max_props=len(v),
            )
            return replace(e, objects=(obj,))
        raise SpecError("not a JSON value", repr(v)[:60], "null, bool, number, string, array or object")

    # -- the algebra ------------------------------------------------------------------------------
    def intersect(self, a: Shape, b: Shape) -> Shape:
        arrays = self._cap(
            tuple(x for p, q in product(a.arrays, b.arrays) if (x := self.and_array(p, q))), "arrays"
        )
        objects = self._cap(tuple(self.and_object(p, q) for p, q in product(a.objects, b.objects)), "objects")
        return Shape(
            a.null and b.null,
            a.boolean & b.boolean,
            a.number.and_(b.number),
            a.string.intersection(b.string),
            arrays,
            objects,
        )

    def union(self, a: Shape, b: Shape) -> Shape:
        return Shape(
            a.null or b.null,
            a.boolean | b.boolean,
            a.number.or_(b.number),
            a.string.union(b.string),
            self._cap(_dedup(a.arrays + b.arrays), "arrays"),
            self._cap(_dedup(a.objects + b.objects), "objects"),
        )

    def _cap(self, shapes: tuple[Any, ...], what: str) -> tuple[Any, ...]:
        if ANY_ARRAY in shapes:
            return (ANY_ARRAY,)
        if ANY_OBJECT in shapes:
            return (ANY_OBJECT,)
        bound = self.limits.alternatives
        if len(shapes) > bound:
            raise LimitExceeded("alternatives", len(shapes), bound, f"a union of {what} shapes")
        return shapes

    def and_object(self, p: ObjectShape, q: ObjectShape) -> ObjectShape:
        if p == ANY_OBJECT:
            return q
        if q == ANY_OBJECT:
            return p
        pn, qn = p.named_dict(), q.named_dict()
        named: dict[str, Expr] = {}
        for k in dict.fromkeys([*pn, *qn]):  # declared order (property_order="schema"), p's keys first
            named[k] = and_exprs([p.eff(k), q.eff(k)])
        key_lang = (
            p.key_lang
            if q.key_lang is None
            else (q.key_lang if p.key_lang is None else p.key_lang.intersection(q.key_lang))
        )
        deps: dict[str, frozenset[str]] = {}
        for k, d in p.dependent_required + q.dependent_required:
            deps[k] = deps.get(k, frozenset()) | d
        return ObjectShape(
            named=tuple(named.items()),
            rules=tuple(dict.fromkeys(p.rules + q.rules)),
            required=p.required | q.required,
            min_props=max(p.min_props, q.min_props),
            max_props=_min_opt(p.max_props, q.max_props),
            key_lang=key_lang,
            dependent_required=tuple(sorted(deps.items())),
            exists=tuple(dict.fromkeys(p.exists + q.exists)),
        )

    def and_array(self, p: ArrayShape, q: ArrayShape) -> ArrayShape | None:
        if p == ANY_ARRAY:
            return q
        if q == ANY_ARRAY:
            return p
        if (
            p.contains is not None
            and q.contains is not None
            and (p.contains, p.min_contains, p.max_contains, p.contains_from)
            != (q.contains, q.min_contains, q.max_contains, q.contains_from)
        ):
            raise Unsupported("contains", "", "two different 'contains' constraints on one array")
        n = max(len(p.prefix), len(q.prefix))
        prefix = tuple(and_exprs([p.at(i), q.at(i)]) for i in range(n))
        c = p if p.contains is not None else q
        return ArrayShape(
            prefix=prefix,
            items=and_exprs([p.items, q.items]),
            min_items=max(p.min_items, q.min_items),
            max_items=_min_opt(p.max_items, q.max_items),
            contains=c.contains,
            min_contains=c.min_contains,
            max_contains=c.max_contains,
            contains_from=c.contains_from,
            unique=p.unique or q.unique,
        )

    def complement(self, s: Shape, where: str) -> Shape:
        return Shape(
            not s.null,
            frozenset({True, False}) - s.boolean,
            s.number.not_(),
            s.string.complement(),
            self._complement_arrays(s.arrays, where),
            self._complement_objects(s.objects, where),
        )

    def _complement_arrays(self, arrays: tuple[ArrayShape, ...], where: str) -> tuple[ArrayShape, ...]:
        if not arrays:
            return (ANY_ARRAY,)
        if ANY_ARRAY in arrays:
            return ()
        comps = [self._complement_array(a, where) for a in arrays]
        if not all(comps):
            return ()
        out: list[ArrayShape] | None = None
        for comp in comps:  # ¬(A ∪ B) = ¬A ∩ ¬B, capped at every step (the product grows geometrically)
            if out is not None:
                pairs = (self.and_array(p, q) for p, q in product(out, comp))
                comp = list(self._cap(tuple(x for x in pairs if x), "arrays"))
            out = comp
        return self._cap(tuple(out or ()), "arrays")

    def _complement_array(self, a: ArrayShape, where: str) -> list[ArrayShape]:
        """¬A as a union: too short, too long, some prefix position wrong, some later item wrong."""
        if a.contains is not None:
            raise Unsupported("not", where, "complement of an array schema with 'contains'")
        if a.unique is not None:
            raise Unsupported(
                "uniqueItems",
                a.unique,
                f"negated at {where or '/'}: 'some two items are equal' is not decided (only pairwise "
                "distinct items are, by remembering the items written)",
            )
        out: list[ArrayShape] = []
        if a.min_items > 0:
            out.append(ArrayShape(max_items=a.min_items - 1))
        if a.max_items is not None:
            out.append(ArrayShape(min_items=a.max_items + 1))
        for i, e in enumerate(a.prefix):
            if e != TRUE:
                pre = tuple(TRUE for _ in range(i)) + (not_expr(e),)
                out.append(ArrayShape(prefix=pre, min_items=i + 1))
        if a.items != TRUE:
            out.append(ArrayShape(contains=not_expr(a.items), contains_from=len(a.prefix), min_contains=1))
        return out

    def _complement_objects(self, objects: tuple[ObjectShape, ...], where: str) -> tuple[ObjectShape, ...]:
        if not objects:
            return (ANY_OBJECT,)
        if ANY_OBJECT in objects:
            return ()
        comps = [self._complement_object(o, where) for o in objects]
        if not all(comps):
            return ()
        out: list[ObjectShape] | None = None
        for comp in comps:  # capped at every step: the product of the complements grows geometrically
            if out is not None:
                comp = list(self._cap(tuple(self.and_object(p, q) for p, q in product(out, comp)), "objects"))
            out = comp
        return self._cap(tuple(out or ()), "objects")

    def _complement_object(self, o: ObjectShape, where: str) -> list[ObjectShape]:
        """¬O as a union of object shapes: an object is outside O iff it misses a required key, has a
        declared key with a value outside its schema, an undeclared key whose value breaks a rule
        (an ``exists`` entry), a key outside ``propertyNames``, a dependency unmet, too few or too
        many members, or no member meeting one of O's ``exists`` entries (a rule)."""
        out: list[ObjectShape] = []
        named = o.named_dict()
        declared = CodepointDFA.literals(sorted(named)) if named else None
        for r in sorted(o.required):
            out.append(ObjectShape(named=((r, FALSE),)))
        for k, e in o.named:
            if e != TRUE:
                out.append(ObjectShape(named=((k, not_expr(e)),), required=frozenset({k})))
        for lang, e in o.rules:
            region = lang if declared is None else lang.difference(declared)
            if e != TRUE and not region.is_empty():
                out.append(ObjectShape(exists=((region, not_expr(e)),)))
        if o.key_lang is not None and not o.key_lang.is_universal():
            out.append(ObjectShape(exists=((o.key_lang.complement(), TRUE),)))
        for t, d in o.dependent_required:
            out.extend(ObjectShape(named=((x, FALSE),), required=frozenset({t})) for x in sorted(d))
        for lang, e in o.exists:
            out.append(ObjectShape(rules=((lang, not_expr(e)),)))
        if o.min_props > 0:
            out.append(ObjectShape(max_props=o.min_props - 1))
        if o.max_props is not None:
            out.append(ObjectShape(min_props=o.max_props + 1))
        return out

    def disjoint(self, a: Shape, b: Shape, depth: int = 3) -> bool:
        """A sound (never wrongly True) test that no value is in both shapes."""
        if a.null and b.null or (a.boolean & b.boolean):
            return False
        if not a.number.and_(b.number).is_empty():
            return False
        if not a.string.intersection(b.string).is_empty():
            return False
        for p, q in product(a.arrays, b.arrays):
            if not self._arrays_disjoint(p, q, depth):
                return False
        return all(self._objects_disjoint(p2, q2, depth) for p2, q2 in product(a.objects, b.objects))

    def _arrays_disjoint(self, p: ArrayShape, q: ArrayShape, depth: int) -> bool:
        lo, hi = max(p.min_items, q.min_items), _min_opt(p.max_items, q.max_items)
        if hi is not None and lo > hi:
            return True
        if depth <= 0:
            return False
        for i in range(min(lo, max(len(p.prefix), len(q.prefix)))):
            if self.disjoint(self.shape(p.at(i)), self.shape(q.at(i)), depth - 1):
                return True
        return False

    def _objects_disjoint(self, p: ObjectShape, q: ObjectShape, depth: int) -> bool:
        lo, hi = max(p.min_props, q.min_props), _min_opt(p.max_props, q.max_props)
        if hi is not None and lo > hi:
            return True
        if depth <= 0:
            return False
        for k in sorted(p.required | q.required):
            ek = and_exprs([p.eff(k), q.eff(k)])
            if ek == FALSE or not (p.key_allowed(k) and q.key_allowed(k)):
                return True
            if (
                k in p.required
                and k in q.required
                and self.disjoint(self.shape(p.eff(k)), self.shape(q.eff(k)), depth - 1)
            ):
                return True
        return False

    def is_empty(self, s: Shape) -> bool:
        """Sound emptiness for scalars only; containers are decided by the grammar's productivity."""
        return (
            not s.null
            and not s.boolean
            and s.number.is_empty()
            and s.string.is_empty()
            and not s.arrays
            and not s.objects
        )


def const_expr(v: Any) -> Expr:
    return ("const", json.dumps(v, sort_keys=True, separators=(",", ":")))


_NO_SCOPE = "reached without its dynamic scope (refdecoder/_dynamic.py), so its target is not known"


def _loc_name(loc: Loc) -> str:
    doc, ptr = loc
    return f"{doc}#{ptr}" if doc != "urn:maskcert:root" else f"#{ptr}"


def _where(expr: Expr) -> str:
    if isinstance(expr, tuple) and expr and expr[0] == "loc":
        return str(expr[2]) or "/"
    return ""


def _esc(k: str) -> str:
    return k.replace("~", "~0").replace("/", "~1")


def _dedup(xs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(xs))


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _num(v: Any, kw: str, where: str = "") -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SpecError(f"'{kw}' must be a number", where or "/", "a JSON number")
    if isinstance(v, float) and not math.isfinite(v):
        raise SpecError(f"'{kw}' must be finite", where or "/", "a finite JSON number")
    # Schema constants are read as exact decimals (their shortest repr), never as binary floats.
    return Fraction(v) if isinstance(v, int) else Fraction(repr(v))


def _nonneg_int(v: Any, kw: str, where: str) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SpecError(f"'{kw}' must be a non-negative integer", where, "an integer >= 0")
    return v


def _bounded(v: Any, kw: str, ctx: Ctx) -> int:
    """A count the matcher counts up to: refused past ``Limits.repeat_bound`` before any work."""
    n = _nonneg_int(v, kw, ctx.at(kw))
    check_bound(kw, n, ctx.at(kw))
    return n


# ---------------------------------------------------------------------------------------------
# Keywords: one function each (docs/style.md §3). ``ctx`` knows where we are; each returns the Shape the
# keyword alone allows (None: no constraint of its own, e.g. read by a sibling keyword).
# ---------------------------------------------------------------------------------------------
@dataclass
class Ctx:
    c: Compiler
    doc: str
    ptr: str
    schema: dict[str, Any]
    scope: Scope | None = None  # the dynamic scope, when tracked (refdecoder/_dynamic.py)

    def at(self, *parts: str | int) -> str:
        p = self.ptr
        for part in parts:
            p += "/" + _esc(str(part))
        return p

    def sub(self, *parts: str | int) -> Expr:
        """The expression of the subschema at ``ptr/parts`` (the ``descend`` of docs/style.md §3)."""
        p = self.at(*parts)
        s = self.c.schema_at(self.doc, p)
        if s is True:
            return TRUE
        if s is False:
            return FALSE
        if not isinstance(s, dict):
            raise SpecError("subschema must be an object or a boolean", p, "a JSON object or true/false")
        if self.scope is None:
            return ("loc", self.doc, p)
        return ("loc", self.doc, p, self.c.entered(self.scope, self.doc, p))

    def subs(self, kw: str) -> list[Expr]:
        v = self.schema[kw]
        if not isinstance(v, list) or not v:
            raise SpecError(f"'{kw}' must be a non-empty array", self.at(kw), "an array of schemas")
        return [self.sub(kw, i) for i in range(len(v))]


Keyword = Callable[[Ctx, Any, dict[str, Any]], Union[Shape, None]]


def type_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    names = value if isinstance(value, list) else [value]
    if not names or not all(isinstance(n, str) and n in JSON_TYPES for n in names):
        raise SpecError("bad 'type'", ctx.at("type"), f"one of {JSON_TYPES} or a list of them")
    e = empty_shape()
    number = NumberPredicate.none()
    if "number" in names:
        number = NumberPredicate.any()
    elif "integer" in names:
        number = NumberPredicate.from_keywords(integer=True)
    return Shape(
        "null" in names,
        frozenset({True, False}) if "boolean" in names else frozenset(),
        number,
        CodepointDFA.any_string() if "string" in names else e.string,
        (ANY_ARRAY,) if "array" in names else (),
        (ANY_OBJECT,) if "object" in names else (),
    )


def enum(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, list):
        raise SpecError("'enum' must be an array", ctx.at("enum"), "an array of JSON values")
    if len(value) > ctx.c.limits.enum_size:
        raise LimitExceeded("enum_size", len(value), ctx.c.limits.enum_size, ctx.at("enum"))
    out = empty_shape()
    strings: list[str] = []
    for v in value:
        if isinstance(v, str):
            strings.append(v)  # gathered into one DFA below: a union per string would be slow
        else:
            out = ctx.c.union(out, ctx.c.shape_of_value(v))
    if strings:
        out = replace(out, string=out.string.union(CodepointDFA.literals(strings)))
    return out


def const(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return ctx.c.shape_of_value(value)


# -- numbers --------------------------------------------------------------------------------------
def _numeric(kw: str, arg: str) -> Keyword:
    def keyword(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
        x = _num(value, kw, ctx.at(kw))
        if kw == "multipleOf" and x <= 0:
            raise SpecError("'multipleOf' must be > 0", ctx.at(kw), "a number greater than 0")
        return only(number=NumberPredicate.from_keywords(**{arg: x}))  # type: ignore[arg-type]

    keyword.__name__ = kw
    return keyword


minimum = _numeric("minimum", "minimum")
maximum = _numeric("maximum", "maximum")
exclusiveMinimum = _numeric("exclusiveMinimum", "exclusive_minimum")
exclusiveMaximum = _numeric("exclusiveMaximum", "exclusive_maximum")
multipleOf = _numeric("multipleOf", "multiple_of")


# -- strings --------------------------------------------------------------------------------------
def minLength(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    n = _nonneg_int(value, "minLength", ctx.at("minLength"))
    return only(string=CodepointDFA.any_string().length_between(n, None))


def maxLength(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    n = _nonneg_int(value, "maxLength", ctx.at("maxLength"))
    return only(string=CodepointDFA.any_string().length_between(0, n))


def pattern(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(string=_ecma_search(ctx, value, ctx.at("pattern")))


def format_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    if ctx.c.profile.formats == "annotation":
        return None
    from ._formats import UNSUPPORTED, format_dfa

    dfa = format_dfa(value) if isinstance(value, str) else None
    if dfa is None:
        why = (
            UNSUPPORTED.get(value, "it has no exact implementation")
            if isinstance(value, str)
            else "not a string"
        )
        raise Unsupported(
            "format",
            ctx.at("format"),
            f"format {value!r} is refused in assertion mode: {why}; "
            "use JsonProfile(formats='annotation') to treat it as an annotation",
        )
    return only(string=dfa)


# -- arrays ---------------------------------------------------------------------------------------
def prefixItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(arrays=(ArrayShape(prefix=tuple(ctx.subs("prefixItems"))),))


def items(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if isinstance(value, list):
        raise Unsupported(
            "items",
            ctx.at("items"),
            "array-form 'items' is draft 2019-09 and earlier; use 'prefixItems' (draft 2020-12), or "
            'declare the draft ("$schema", or JsonProfile(draft=...))',
        )
    n = len(schema.get("prefixItems", []) or [])
    return only(arrays=(ArrayShape(prefix=(TRUE,) * n, items=ctx.sub("items")),))


def minItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(arrays=(ArrayShape(min_items=_bounded(value, "minItems", ctx)),))


def maxItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(arrays=(ArrayShape(max_items=_nonneg_int(value, "maxItems", ctx.at("maxItems"))),))


def contains(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    lo = _bounded(schema.get("minContains", 1), "minContains", ctx)
    hi = schema.get("maxContains")
    hi = None if hi is None else _bounded(hi, "maxContains", ctx)
    return only(arrays=(ArrayShape(contains=ctx.sub("contains"), min_contains=lo, max_contains=hi),))


def uniqueItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Pairwise distinct items (2020-12 Validation §6.4.3), JSON equality: the array remembers the
    values it has written and each item excludes them (refdecoder/_valuememory.py); the emitter
    refuses the item shapes where that is not decided."""
    if not isinstance(value, bool):
        raise SpecError("'uniqueItems' must be a boolean", ctx.at("uniqueItems"), "true or false")
    if value is False:
        return None
    return only(arrays=(ArrayShape(unique=ctx.at("uniqueItems")),))


# -- objects --------------------------------------------------------------------------------------
def properties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    props = _props_dict(ctx, "properties")
    named = tuple((k, ctx.sub("properties", k)) for k in props)
    return only(objects=(ObjectShape(named=named),))


def patternProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    pats = _props_dict(ctx, "patternProperties")
    rules = tuple(
        (_ecma_search(ctx, p, ctx.at("patternProperties", p)), ctx.sub("patternProperties", p)) for p in pats
    )
    return only(objects=(ObjectShape(rules=rules),))


def additionalProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(objects=(_additional(ctx, ctx.sub("additionalProperties")),))


def _additional(ctx: Ctx, expr: Expr) -> ObjectShape:
    """The rule for keys neither in this schema's ``properties`` nor matching its patterns."""
    lang = CodepointDFA.any_string()
    names = list(_props_dict(ctx, "properties"))
    if names:
        lang = lang.difference(CodepointDFA.literals(names))
    for p in _props_dict(ctx, "patternProperties"):
        lang = lang.difference(_ecma_search(ctx, p, ctx.at("patternProperties", p)))
    return ObjectShape(rules=((lang, expr),))


def required(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise SpecError("'required' must be an array of strings", ctx.at("required"), "an array of strings")
    return only(objects=(ObjectShape(required=frozenset(value)),))


def minProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(objects=(ObjectShape(min_props=_bounded(value, "minProperties", ctx)),))


def maxProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    return only(
        objects=(ObjectShape(max_props=_nonneg_int(value, "maxProperties", ctx.at("maxProperties"))),)
    )


def propertyNames(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    s = ctx.c.shape(ctx.sub("propertyNames"))
    return only(objects=(ObjectShape(key_lang=s.string),))


def dependentRequired(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in value.values()
    ):
        raise SpecError("bad 'dependentRequired'", ctx.at("dependentRequired"), "an object of string arrays")
    deps = tuple(sorted((k, frozenset(v)) for k, v in value.items() if v))
    return only(objects=(ObjectShape(dependent_required=deps),))


def dependentSchemas(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    # "if key k is present, the object must also validate against S" = (k absent) ∪ (k present ∩ S).
    if not isinstance(value, dict):
        raise SpecError(
            "'dependentSchemas' must be an object", ctx.at("dependentSchemas"), "an object of schemas"
        )
    out = any_shape()
    for k in value:
        s = ctx.c.shape(ctx.sub("dependentSchemas", k))
        absent = only(objects=(ObjectShape(named=((k, FALSE),)),))
        present = ctx.c.intersect(only(objects=(ObjectShape(required=frozenset({k})),)), s)
        out = ctx.c.intersect(out, ctx.c.union(absent, present))
    return out


# -- applicators ----------------------------------------------------------------------------------
def ref(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if not isinstance(value, str):
        raise SpecError("'$ref' must be a string", ctx.at("$ref"), "a URI reference")
    return ctx.c.shape(ctx.c.resolve_ref(value, ctx.doc, ctx.ptr, ctx.scope))


def dynamicRef(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """A ``$ref`` whose target a ``$dynamicAnchor`` in the dynamic scope may override (2020-12 Core
    §8.2.3.2; ``Compiler.resolve_dynamic_ref``)."""
    if not isinstance(value, str):
        raise SpecError("'$dynamicRef' must be a string", ctx.at("$dynamicRef"), "a URI reference")
    return ctx.c.shape(ctx.c.resolve_dynamic_ref(value, ctx.doc, ctx.ptr, ctx.scope))


def allOf(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    out = any_shape()
    for e in ctx.subs("allOf"):
        out = ctx.c.intersect(out, ctx.c.shape(e))
    return out


def anyOf(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    out = empty_shape()
    for e in ctx.subs("anyOf"):
        out = ctx.c.union(out, ctx.c.shape(e))
    return out


def oneOf(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """Exactly one branch. Scalars: exact boolean algebra. Containers: the branches' container parts
    must be pairwise provably disjoint (then exactly-one = any-of), else the schema is refused."""
    c = ctx.c
    shapes = [c.shape(e) for e in ctx.subs("oneOf")]
    # Scalars: ∪_i (S_i ∩ ⋂_{j≠i} ¬S_j), computed per scalar type.
    null = sum(1 for s in shapes if s.null) == 1
    boolean = frozenset(b for b in (True, False) if sum(1 for s in shapes if b in s.boolean) == 1)
    number = NumberPredicate.none()
    string = CodepointDFA.empty()
    for i, s in enumerate(shapes):
        n_i, s_i = s.number, s.string
        for j, t in enumerate(shapes):
            if j != i:
                n_i = n_i.and_(t.number.not_())
                s_i = s_i.difference(t.string)
        number = number.or_(n_i)
        string = string.union(s_i)
    arrays = _exactly_one(
        c, [replace(empty_shape(), arrays=s.arrays) for s in shapes], ctx.at("oneOf"), "arrays"
    ).arrays
    objects = _exactly_one(
        c, [replace(empty_shape(), objects=s.objects) for s in shapes], ctx.at("oneOf"), "objects"
    ).objects
    return Shape(null, boolean, number, string, arrays, objects)


def _exactly_one(c: Compiler, parts: list[Shape], where: str, what: str) -> Shape:
    """Exactly one of ``parts`` (container-only shapes): any-of when the non-empty parts are provably
    pairwise disjoint (the small, common case: branches told apart by a discriminating key), else the
    exact formula ``∪_i (P_i ∩ ⋂_{j≠i} ¬P_j)`` when the parts can be complemented within the
    alternatives limit, else refuse."""
    live = [p for p in parts if p.arrays or p.objects]
    if len(live) <= 1:
        return live[0] if live else empty_shape()
    if all(c.disjoint(live[i], live[j]) for i in range(len(live)) for j in range(i + 1, len(live))):
        out = empty_shape()
        for p in live:
            out = c.union(out, p)
        return out
    try:
        out = empty_shape()
        for i, p in enumerate(live):
            acc = p
            for j, q in enumerate(live):
                if j != i:
                    acc = c.intersect(acc, c.complement(q, where))
            out = c.union(out, acc)
        return out
    except Unsupported as e:
        why = f"complementing them is refused ({e.keyword}: {e.reason})"
    except LimitExceeded as e:
        if e.limit != "alternatives":
            raise
        why = f"complementing them passes the {e.limit} limit ({e.value} > {e.bound}; --limit alternatives=N)"
    raise Unsupported(
        "oneOf",
        where,
        f"two branches both admit {what}, maskcert cannot prove them disjoint and {why}, "
        "so 'exactly one' is undecided",
    )


def not_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    if isinstance(value, dict) and "not" in value and not set(value) - ANNOTATIONS - {"not"}:
        return ctx.c.shape(ctx.sub("not", "not"))  # ¬¬Z = Z: no complement to take
    return ctx.c.complement(ctx.c.shape(ctx.sub("not")), ctx.at("not"))


def if_(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    c = ctx.c
    cond = c.shape(ctx.sub("if"))
    then = c.shape(ctx.sub("then")) if "then" in schema else any_shape()
    else_ = c.shape(ctx.sub("else")) if "else" in schema else any_shape()
    if "then" not in schema and "else" not in schema:
        return any_shape()
    return c.union(c.intersect(cond, then), c.intersect(c.complement(cond, ctx.at("if")), else_))


def unevaluatedProperties(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Members no sibling or validating in-place subschema evaluated satisfy the schema (2020-12 Core
    §11.3, 2019-09 Core §9.3.2.4): a case analysis in refdecoder/_unevaluated.py."""
    from ._unevaluated import unevaluated_properties

    return unevaluated_properties(ctx, value, schema)


def unevaluatedItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape | None:
    """Items no sibling or validating in-place subschema evaluated satisfy the schema (2020-12 Core
    §11.2, 2019-09 Core §9.3.1.3): a case analysis in refdecoder/_unevaluated.py."""
    from ._unevaluated import unevaluated_items

    return unevaluated_items(ctx, value, schema)


REFUSED = {
    "$recursiveRef": "draft 2019-09 recursive references are not implemented",
    "dependencies": "'dependencies' is a keyword of drafts 4-7, not of 2020-12; declare that draft "
    "(\"$schema\", or JsonProfile(draft='draft-07')) or use dependentRequired/dependentSchemas",
}

KEYWORDS: dict[str, Keyword] = {
    "type": type_,
    "enum": enum,
    "const": const,
    "minimum": minimum,
    "maximum": maximum,
    "exclusiveMinimum": exclusiveMinimum,
    "exclusiveMaximum": exclusiveMaximum,
    "multipleOf": multipleOf,
    "minLength": minLength,
    "maxLength": maxLength,
    "pattern": pattern,
    "format": format_,
    "prefixItems": prefixItems,
    "items": items,
    "minItems": minItems,
    "maxItems": maxItems,
    "contains": contains,
    "uniqueItems": uniqueItems,
    "properties": properties,
    "patternProperties": patternProperties,
    "additionalProperties": additionalProperties,
    "required": required,
    "minProperties": minProperties,
    "maxProperties": maxProperties,
    "propertyNames": propertyNames,
    "dependentRequired": dependentRequired,
    "dependentSchemas": dependentSchemas,
    "$ref": ref,
    "$dynamicRef": dynamicRef,
    "allOf": allOf,
    "anyOf": anyOf,
    "oneOf": oneOf,
    "not": not_,
    "if": if_,
    "unevaluatedProperties": unevaluatedProperties,
    "unevaluatedItems": unevaluatedItems,
}


# ---------------------------------------------------------------------------------------------
# Older drafts (4, 6, 7, 2019-09): what each keyword that changed meant there, one function per
# difference, and each draft's keyword table. refdecoder/_drafts.py says which draft a location is
# read in and lists the differences with their sections; these functions are built from the shapes
# above, so they live with them (the front-end dispatches to them: no import cycle).
# ---------------------------------------------------------------------------------------------
def shape_of_older_draft(c: Compiler, ctx: Ctx, draft: str) -> Shape:
    """The shape of the schema object ``ctx.schema`` read in ``draft`` (not 2020-12; refdecoder/_drafts.py)."""
    schema = ctx.schema
    if draft == UNKNOWN:
        doc, ptr = ctx.doc, ctx.ptr
        while (doc, ptr) not in c.unknown_meta and ptr:  # a location the index skipped: its ancestor's
            ptr = ptr.rsplit("/", 1)[0]
        meta, where = c.unknown_meta[(doc, ptr)]
        raise Unsupported(
            "$schema",
            where,
            f"meta-schema {meta!r} names no draft the reference knows ({', '.join(JSON_SCHEMA_DRAFTS)}: "
            "the json-schema.org meta-schema URIs) and may declare other vocabularies",
        )
    if draft in REF_ALONE and "$ref" in schema:
        return ref_alone(ctx, schema["$ref"], schema)
    out = any_shape()
    if (
        not c.profile.additional_properties_default
        and "additionalProperties" not in schema
        and ("properties" in schema or "patternProperties" in schema)
    ):
        # The profile reads an absent additionalProperties as false (engines' "strict" mode).
        out = c.intersect(out, only(objects=(_additional(ctx, FALSE),)))
    if (
        not c.profile.additional_items_default
        and isinstance(schema.get("items"), list)
        and "additionalItems" not in schema
    ):
        # The profile reads an absent additionalItems next to array-form items as false.
        n = len(schema["items"])
        out = c.intersect(out, only(arrays=(ArrayShape(prefix=(TRUE,) * n, items=FALSE),)))
    table = KEYWORDS_BY_DRAFT[draft]
    refused = REFUSED_BY_DRAFT.get(draft, {})
    for kw in sorted(schema):
        fn = table.get(kw)
        if fn is None:
            if kw in refused:
                raise Unsupported(kw, ctx.at(kw), refused[kw])
            continue  # not a keyword of this draft: an annotation
        part = fn(ctx, schema[kw], schema)
        if part is not None:
            out = c.intersect(out, part)
    return out


# ---------------------------------------------------------------------------------------------
# Keywords of the older drafts: one function per difference (docs/style.md §3)
# ---------------------------------------------------------------------------------------------
def ref_alone(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """Drafts 4-7: the object is its reference; every sibling is ignored (draft-07 Core §8.3)."""
    return ref(ctx, value, schema)


def type_draft04(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """``integer`` is a number without a fraction or exponent part (draft-zyp-json-schema-04 §3.5)."""
    shape = type_(ctx, value, schema)
    names = value if isinstance(value, list) else [value]
    if "integer" in names and "number" not in names:
        shape = replace(shape, number=NumberPredicate.spelled("integer"))
    return shape


def _bound_draft04(kw: str, flag: str, inclusive: str, exclusive: str) -> Keyword:
    def keyword(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
        x = _num(value, kw, ctx.at(kw))
        strict = schema.get(flag, False)
        if not isinstance(strict, bool):
            raise SpecError(f"'{flag}' must be a boolean in draft-04", ctx.at(flag), "true or false")
        return only(number=NumberPredicate.from_keywords(**{exclusive if strict else inclusive: x}))  # type: ignore[arg-type]

    keyword.__name__ = f"{kw}_draft04"
    keyword.__doc__ = f"``{kw}``, exclusive when ``{flag}`` is true (draft-04 Validation §5.1.2-5.1.3)."
    return keyword


def _flag_draft04(flag: str) -> Keyword:
    def keyword(ctx: Ctx, value: Any, schema: dict[str, Any]) -> None:
        if not isinstance(value, bool):
            raise SpecError(f"'{flag}' must be a boolean in draft-04", ctx.at(flag), "true or false")
        return None  # read by its sibling; without it, nothing (draft-04 Validation §5.1.2-5.1.3)

    keyword.__name__ = f"{flag}_draft04"
    return keyword


minimum_draft04 = _bound_draft04("minimum", "exclusiveMinimum", "minimum", "exclusive_minimum")
maximum_draft04 = _bound_draft04("maximum", "exclusiveMaximum", "maximum", "exclusive_maximum")
exclusiveMinimum_draft04 = _flag_draft04("exclusiveMinimum")
exclusiveMaximum_draft04 = _flag_draft04("exclusiveMaximum")


def items_array_form(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """An array of schemas: one per position, ``additionalItems`` after them; a schema: every item
    (draft-07 Validation §6.4.1-6.4.2; 2019-09 Core §9.3.1.1-9.3.1.2)."""
    if isinstance(value, list):
        rest = ctx.sub("additionalItems") if "additionalItems" in schema else TRUE
        return only(arrays=(ArrayShape(prefix=tuple(ctx.subs("items")), items=rest),))
    return only(arrays=(ArrayShape(items=ctx.sub("items")),))


def additionalItems(ctx: Ctx, value: Any, schema: dict[str, Any]) -> None:
    """Read by its sibling array-form ``items``; ignored otherwise (draft-07 Validation §6.4.2)."""
    return None


def contains_draft06(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """At least one item is valid (draft-06 Validation §6.14, draft-07 §6.4.6); no min/maxContains."""
    return only(arrays=(ArrayShape(contains=ctx.sub("contains")),))


def dependencies(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """Per property present: the names it requires (an array) or a schema the whole object must
    satisfy (draft-04 Validation §5.4.5, draft-07 §6.5.7): ``dependentRequired`` and
    ``dependentSchemas`` in one keyword."""
    if not isinstance(value, dict):
        raise SpecError("'dependencies' must be an object", ctx.at("dependencies"), "an object")
    c = ctx.c
    out = any_shape()
    names: list[tuple[str, frozenset[str]]] = []
    for k, dep in value.items():
        if isinstance(dep, list):
            if not all(isinstance(x, str) for x in dep):
                raise SpecError(
                    "bad 'dependencies'", ctx.at("dependencies", k), "an array of property names or a schema"
                )
            if dep:
                names.append((k, frozenset(dep)))
            continue
        # "if k is present, the object must also validate against S" = (k absent) ∪ (k present ∩ S).
        s = c.shape(ctx.sub("dependencies", k))
        absent = only(objects=(ObjectShape(named=((k, FALSE),)),))
        present = c.intersect(only(objects=(ObjectShape(required=frozenset({k})),)), s)
        out = c.intersect(out, c.union(absent, present))
    if names:
        out = c.intersect(out, only(objects=(ObjectShape(dependent_required=tuple(sorted(names))),)))
    return out


def recursiveRef(ctx: Ctx, value: Any, schema: dict[str, Any]) -> Shape:
    """``"#"`` against the current resource, or the outermost resource with ``$recursiveAnchor: true``
    in the dynamic scope when the current one has it too (2019-09 Core §8.2.4.2;
    ``Compiler.resolve_recursive_ref``, refdecoder/_dynamic.py)."""
    if value != "#":
        raise Unsupported(
            "$recursiveRef",
            ctx.at("$recursiveRef"),
            "only the value '#' is defined (2019-09 Core §8.2.4.2.1)",
        )
    return ctx.c.shape(ctx.c.resolve_recursive_ref(ctx.doc, ctx.ptr, ctx.scope))


def _pick(*names: str) -> dict[str, Keyword]:
    return {kw: KEYWORDS[kw] for kw in names}


# The draft-04 keywords whose meaning 2020-12 kept (draft-04 Validation §5).
_SAME_SINCE_04 = _pick(
    *("enum", "multipleOf", "minLength", "maxLength", "pattern", "format"),
    *("minItems", "maxItems", "uniqueItems", "properties", "patternProperties", "additionalProperties"),
    *("required", "minProperties", "maxProperties", "allOf", "anyOf", "oneOf", "not"),
)
_DRAFT04: dict[str, Keyword] = {
    **_SAME_SINCE_04,
    "type": type_draft04,
    "minimum": minimum_draft04,
    "maximum": maximum_draft04,
    "exclusiveMinimum": exclusiveMinimum_draft04,
    "exclusiveMaximum": exclusiveMaximum_draft04,
    "items": items_array_form,
    "additionalItems": additionalItems,
    "dependencies": dependencies,
    "$ref": ref_alone,
}
_DRAFT06: dict[str, Keyword] = {
    **_SAME_SINCE_04,
    **_pick("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "const", "propertyNames"),
    "contains": contains_draft06,
    "items": items_array_form,
    "additionalItems": additionalItems,
    "dependencies": dependencies,
    "$ref": ref_alone,
}
_DRAFT07: dict[str, Keyword] = {**_DRAFT06, **_pick("if")}
_DRAFT2019: dict[str, Keyword] = {
    **{kw: fn for kw, fn in KEYWORDS.items() if kw not in ("prefixItems", "$dynamicRef")},
    "items": items_array_form,
    "additionalItems": additionalItems,
    "$recursiveRef": recursiveRef,
}

#: Each older draft's keywords (those that constrain, or that a sibling reads); others are annotations.
KEYWORDS_BY_DRAFT: dict[str, dict[str, Keyword]] = {
    "draft-04": _DRAFT04,
    "draft-06": _DRAFT06,
    "draft-07": _DRAFT07,
    "2019-09": _DRAFT2019,
}
REFUSED_BY_DRAFT: dict[str, dict[str, str]] = {
    "2019-09": {
        "dependencies": "'dependencies' is a keyword of drafts 4-7, not of 2019-09; declare that draft "
        '("$schema") or use dependentRequired/dependentSchemas',
    },
}
