"""JSON Schema reference resolution: documents, ``$id`` resources, anchors, ``$ref``, ``$dynamicRef``
and ``$recursiveRef``, and the dynamic scopes they read.

:class:`Resolver` indexes the schema and the documents it is given (``JsonSchema.resources``, and the
json-schema.org meta-schemas a reference names, loaded from the package's data by
``_dynamic.meta_schema``): every ``$id`` resource and ``$anchor``/``$dynamicAnchor`` with its base URI,
and the draft of every location (``_drafts``). It then answers, for a reference at a location, the
schema expression (``_shapes.Expr``) the reference names — with the dynamic scope after following it
when dynamic references can read that scope (``_dynamic``). It knows nothing of keywords or shapes
beyond the expression it returns: the front-end (``_jsonschema``) reaches it as ``Compiler.refs``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ._drafts import UNKNOWN, dialect_of, identifier, schema_members
from ._dynamic import DynamicIndex, Loc, Scope, meta_schema
from ._limits import Limits
from ._shapes import Expr
from .errors import LimitExceeded, SpecError, Unsupported
from .grammar import JsonSchema

__all__ = ["ROOT_URI", "Resolver", "escape_pointer_token"]

#: The URI the root schema is read under (a schema's own ``$id`` names a resource inside it).
ROOT_URI = "urn:maskcert:root"


class Resolver:
    """The documents of one schema, indexed; resolves references (see the module docstring)."""

    def __init__(self, spec: JsonSchema, limits: Limits) -> None:
        self.limits = limits
        self.root_uri = ROOT_URI
        self.resources: dict[str, Any] = {}  # absolute URI (no fragment) -> schema
        self.anchors: dict[str, tuple[str, str]] = {}  # uri#anchor -> (resource uri, pointer)
        self.base_of: dict[tuple[str, str], str] = {}  # (doc uri, pointer) -> base uri
        self.docs: dict[str, Any] = {}
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
        names: bool = False,
    ) -> None:
        """Record $id resources and $anchor names with their base URIs, and each location's draft
        (iteratively deep). ``unknown``: the ``$schema`` (URI, pointer) of an unknown dialect;
        ``names``: ``node`` is a map of schemas (``schema_members``), not a schema."""
        if isinstance(node, dict) and names:
            for k, v, _ in schema_members(node, names):
                self._index(v, doc, base, f"{ptr}/{escape_pointer_token(k)}", depth + 1, draft, unknown)
        elif isinstance(node, dict):
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
            for k, v, sub in schema_members(node, names):
                self._index(v, doc, base, f"{ptr}/{escape_pointer_token(k)}", depth + 1, draft, unknown, sub)
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
        stack: list[tuple[Any, bool]] = [(node, False)]
        while stack:
            n, names = stack.pop()
            if isinstance(n, dict):
                if not names and any(k in n for k in ("$ref", "$dynamicRef", "$recursiveRef", "$id", "id")):
                    return True
                stack.extend((v, sub) for _, v, sub in schema_members(n, names))
            elif isinstance(n, list):
                stack.extend((v, False) for v in n)
        return False

    def _refs_in(self, doc: str) -> list[tuple[str, str, str]]:
        """``(pointer, keyword, value)`` of every reference in a document (``_index``'s walk)."""
        out: list[tuple[str, str, str]] = []
        stack: list[tuple[Any, str, bool]] = [(self.docs[doc], "", False)]
        while stack:
            node, ptr, names = stack.pop()
            if isinstance(node, dict):
                for kw in ("$ref", "$dynamicRef", "$recursiveRef"):
                    if not names and isinstance(node.get(kw), str):
                        out.append((ptr, kw, node[kw]))
                stack.extend(
                    (v, f"{ptr}/{escape_pointer_token(k)}", sub) for k, v, sub in schema_members(node, names)
                )
            elif isinstance(node, list):
                stack.extend((v, f"{ptr}/{i}", False) for i, v in enumerate(node))
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


_NO_SCOPE = "reached without its dynamic scope (refdecoder/_dynamic.py), so its target is not known"


def _loc_name(loc: Loc) -> str:
    doc, ptr = loc
    return f"{doc}#{ptr}" if doc != ROOT_URI else f"#{ptr}"


def escape_pointer_token(k: str) -> str:
    """A key as one JSON pointer token (RFC 6901: ``~`` as ``~0``, ``/`` as ``~1``)."""
    return k.replace("~", "~0").replace("/", "~1")
