"""What a JSON Schema keyword function sees: :class:`Ctx` and the compiler behind it, as a Protocol.

A keyword function (``_jsonschema.KEYWORDS``, the ``unevaluated*`` analysis in ``_unevaluated``) takes
``ctx: Ctx``: the schema object it sits in, where that is (document URI and JSON pointer), and the
dynamic scope when one is tracked. ``ctx.c`` is the compiler, typed by :class:`SchemaCompiler`, so that
the keyword modules never import the module that builds it (as jsonschema's keyword functions take a
``protocols.Validator``): shape normalization (``c.shape``), the shape algebra (``c.algebra``,
``_shape_algebra``), reference resolution (``c.refs``, ``_resolve``) and the compilation's limits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, Union

from ._dynamic import Scope
from ._fsa import CodepointDFA
from ._limits import Limits
from ._regex import compile_regex_dfa
from ._resolve import Resolver, escape_pointer_token
from ._shape_algebra import ShapeAlgebra
from ._shapes import FALSE, TRUE, Expr, Shape
from .errors import SpecError
from .grammar import JsonProfile

__all__ = ["Ctx", "Keyword", "SchemaCompiler", "ecma_search", "props_dict"]


class SchemaCompiler(Protocol):
    """The compiler as keyword functions use it (``_jsonschema.Compiler`` implements it)."""

    profile: JsonProfile
    limits: Limits
    refs: Resolver
    algebra: ShapeAlgebra
    #: the ``unevaluated*`` analysis' memo of cases per location (``_unevaluated.Analysis``), owned by
    #: the compiler so that it lives exactly as long as one compilation
    unevaluated_memo: dict[Any, list[Any]]

    def shape(self, expr: Expr) -> Shape: ...

    def shape_of_value(self, v: Any) -> Shape: ...

    def ctx(self, doc: str, ptr: str, schema: dict[str, Any], scope: Scope | None = None) -> Ctx: ...


@dataclass
class Ctx:
    c: SchemaCompiler
    doc: str
    ptr: str
    schema: dict[str, Any]
    scope: Scope | None = None  # the dynamic scope, when tracked (refdecoder/_dynamic.py)

    def at(self, *parts: str | int) -> str:
        p = self.ptr
        for part in parts:
            p += "/" + escape_pointer_token(str(part))
        return p

    def sub(self, *parts: str | int) -> Expr:
        """The expression of the subschema at ``ptr/parts`` (the ``descend`` of docs/style.md §3)."""
        p = self.at(*parts)
        s = self.c.refs.schema_at(self.doc, p)
        if s is True:
            return TRUE
        if s is False:
            return FALSE
        if not isinstance(s, dict):
            raise SpecError("subschema must be an object or a boolean", p, "a JSON object or true/false")
        if self.scope is None:
            return ("loc", self.doc, p)
        return ("loc", self.doc, p, self.c.refs.entered(self.scope, self.doc, p))

    def subs(self, kw: str) -> list[Expr]:
        v = self.schema[kw]
        if not isinstance(v, list) or not v:
            raise SpecError(f"'{kw}' must be a non-empty array", self.at(kw), "an array of schemas")
        return [self.sub(kw, i) for i in range(len(v))]


Keyword = Callable[[Ctx, Any, dict[str, Any]], Union[Shape, None]]


def ecma_search(ctx: Ctx, value: Any, where: str) -> CodepointDFA:
    """The strings an ECMA-262 ``pattern`` finds a match in (a keyword's ``pattern`` or a
    ``patternProperties`` key)."""
    if not isinstance(value, str):
        raise SpecError("pattern must be a string", where, "an ECMA-262 regular expression")
    return compile_regex_dfa(value, flavor="ecma", mode="search", where=where)


def props_dict(ctx: Ctx, kw: str) -> dict[str, Any]:
    """The object of names to subschemas a keyword such as ``properties`` holds."""
    v = ctx.schema.get(kw, {})
    if not isinstance(v, dict):
        raise SpecError(f"'{kw}' must be an object", ctx.at(kw), "an object mapping names to schemas")
    return v
