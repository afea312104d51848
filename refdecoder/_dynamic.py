"""Dynamic references (2020-12 ``$dynamicRef``, 2019-09 ``$recursiveRef``) and the known meta-schemas.

Theory of operation
-------------------
The **dynamic scope** is the sequence of schema resources entered on the evaluation path, the root's
first (2020-12 Core §7.1, 2019-09 Core §7.1): a resource is entered by following a reference into it
or by descending into a subschema that has its own ``$id``. Two keywords read it:

* ``$dynamicRef`` (2020-12 Core §8.2.3.2): the reference is first resolved as a ``$ref``. If the
  fragment of that initial target names a ``$dynamicAnchor``, the target is replaced by the
  ``$dynamicAnchor`` of the same name in the **outermost** resource of the dynamic scope that declares
  one; otherwise (a JSON pointer, a plain ``$anchor``) it is a ``$ref``.
* ``$recursiveRef: "#"`` (2019-09 Core §8.2.4.2): ``"#"`` against the current base URI; if that
  resource sets ``$recursiveAnchor: true``, the outermost resource of the dynamic scope setting it.

The scope is unbounded, but what these two rules read of it is finite: per dynamic anchor name, the
first resource of the scope that declares it, and the first resource with ``$recursiveAnchor: true``.
:class:`Scope` is exactly that, and the front-end (``_jsonschema``) carries it in the schema expression
(``("loc", document, pointer, scope)``), so a subschema reached with two different relevant scopes is
two expressions, each with its own exact shape. There are finitely many resources, so finitely many
scopes, and recursion stays finite. Only names that can change a resolution are tracked
(:func:`DynamicIndex.build`): a name declared by one reachable resource only always resolves to its
initial target, and a schema with no such name keeps the scope-free ``("loc", document, pointer)``.

The independent validator
~~~~~~~~~~~~~~~~~~~~~~~~~
The language must also be the one ``jsonschema`` (with ``referencing``) accepts, and its resolver keeps
another scope: a stack of base URIs, pushed only when a reference is *followed* (``Resolver._evolve``:
the current base is pushed unless the stack is non-empty and the reference stays in the current
resource, and never when it is the empty base of a root without ``$id``); descending into a subschema
with ``$id`` changes the base without pushing. ``$dynamicRef`` takes the oldest stacked resource that
declares the anchor (``DynamicAnchor.resolve``), ``$recursiveRef`` the oldest of the run of
``$recursiveAnchor: true`` resources on top of the stack (``lookup_recursive_ref``), and a ``$ref`` to a
``$dynamicAnchor`` resolves dynamically too. :class:`Scope` therefore carries both readings, and the
front-end **refuses** a reference where they name different targets: the reference never picks one
reading over the other.

Meta-schemas
~~~~~~~~~~~~
The json-schema.org meta-schemas of drafts 4, 6, 7, 2019-09 and 2020-12 (with their vocabulary
meta-schemas) are package data (``refdecoder/metaschemas/``, README there): a reference to one of
their URIs resolves to the file (:func:`meta_schema`), never fetched.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

__all__ = ["META_SCHEMAS", "Loc", "Scope", "DynamicIndex", "meta_schema"]

#: A schema resource, named by the location of its root: ``(document, JSON pointer)``.
Loc = tuple[str, str]

_V2019 = ("applicator", "content", "core", "format", "meta-data", "validation")
_V2020 = (
    "applicator",
    "content",
    "core",
    "format-annotation",
    "format-assertion",
    "meta-data",
    "unevaluated",
    "validation",
)

#: Meta-schema URI (its ``$id`` without the empty fragment) -> file in ``refdecoder/metaschemas``.
META_SCHEMAS: dict[str, str] = {
    "http://json-schema.org/draft-04/schema": "draft-04.json",
    "http://json-schema.org/draft-06/schema": "draft-06.json",
    "http://json-schema.org/draft-07/schema": "draft-07.json",
    "https://json-schema.org/draft/2019-09/schema": "2019-09.json",
    **{f"https://json-schema.org/draft/2019-09/meta/{v}": f"2019-09-meta-{v}.json" for v in _V2019},
    "https://json-schema.org/draft/2020-12/schema": "2020-12.json",
    **{f"https://json-schema.org/draft/2020-12/meta/{v}": f"2020-12-meta-{v}.json" for v in _V2020},
}


def meta_schema(uri: str) -> Any | None:
    """The meta-schema document at ``uri`` (no fragment), or None when ``uri`` names none."""
    name = META_SCHEMAS.get(uri)
    return None if name is None else json.loads(_meta_text(name))


@functools.cache
def _meta_text(name: str) -> str:
    return (resources.files(__package__) / "metaschemas" / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Scope:
    """What a dynamic reference can observe of the dynamic scope, read two ways (module docstring).

    ``spec[i]``: the outermost resource of the dynamic scope declaring ``$dynamicAnchor`` named
    ``DynamicIndex.names[i]`` (None: none yet); ``js[i]``: the oldest such resource on ``jsonschema``'s
    resolver stack; ``started``: that stack is not empty; ``spec_rec``: the outermost resource with
    ``$recursiveAnchor: true``; ``js_rec``: the oldest of the ``$recursiveAnchor: true`` resources on
    top of the stack (None: the top one does not set it, or the stack is empty)."""

    spec: tuple[Loc | None, ...]
    js: tuple[Loc | None, ...]
    started: bool = False
    spec_rec: Loc | None = None
    js_rec: Loc | None = None


@dataclass(frozen=True)
class DynamicIndex:
    """The resources a dynamic reference can land in, and the transitions of :class:`Scope`."""

    names: tuple[str, ...]  # the tracked $dynamicAnchor names
    declares: Mapping[Loc, frozenset[str]]  # resource -> tracked names it declares
    recursive: frozenset[Loc] | None  # resources with $recursiveAnchor: true (None: not tracked)
    unstacked: Loc | None  # the root resource when it has no $id (its base URI is "": never stacked)

    def initial(self, root: Loc) -> Scope:
        """The scope at the root: the root resource entered, nothing stacked."""
        none = (None,) * len(self.names)
        return self.enter(Scope(spec=none, js=none), root)

    def enter(self, s: Scope, res: Loc) -> Scope:
        """The dynamic scope after entering ``res`` (by a reference or a subschema with ``$id``)."""
        names = self.declares.get(res, frozenset())
        spec = tuple(
            first if first is not None or n not in names else res for n, first in zip(self.names, s.spec)
        )
        rec = s.spec_rec
        if rec is None and self.recursive is not None and res in self.recursive:
            rec = res
        return replace(s, spec=spec, spec_rec=rec)

    def stack(self, s: Scope, base: Loc, same_resource: bool) -> Scope:
        """``jsonschema``'s resolver following a reference from the resource ``base``: it pushes
        ``base`` unless the stack is non-empty and the reference stays in ``base``
        (``referencing._core.Resolver._evolve``), or ``base`` is the root without ``$id``."""
        if base == self.unstacked or (s.started and same_resource):
            return s
        names = self.declares.get(base, frozenset())
        js = tuple(
            first if first is not None or n not in names else base for n, first in zip(self.names, s.js)
        )
        rec: Loc | None = None
        if self.recursive is not None and base in self.recursive:
            rec = s.js_rec if s.js_rec is not None else base
        return replace(s, js=js, started=True, js_rec=rec)

    def first(self, s: Scope, name: str) -> tuple[Loc | None, Loc | None]:
        """``(spec, jsonschema)``: the outermost resource declaring ``name`` in each reading."""
        i = self.names.index(name)
        return s.spec[i], s.js[i]
