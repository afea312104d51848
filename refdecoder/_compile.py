"""``compile(spec)``: dispatch a spec to its front-end and wrap the checked network in a Grammar."""

from __future__ import annotations

import sys
from typing import Any

from ._limits import budget_scope
from .errors import LimitExceeded, SpecError
from .grammar import Choice, Gbnf, Grammar, JsonProfile, JsonSchema, Limits, Regex, Spec

__all__ = ["compile", "compile_json_schema", "compile_regex", "compile_gbnf", "compile_choice"]


def compile(spec: Spec, limits: Limits | None = None) -> Grammar:  # noqa: A001 - the documented name
    """Compile ``spec`` within ``limits`` (its structural limits and one compile budget of time and
    fuel, refdecoder/_limits.py); every refusal is typed (``Unsupported``, ``LimitExceeded``,
    ``SpecError``)."""
    limits = limits or Limits()
    try:
        with budget_scope(limits):
            return _compile(spec, limits)
    except RecursionError:  # a backstop: the structural limits should refuse such a spec first
        raise LimitExceeded(
            "python_recursion",
            f"a nest of subschemas, $refs or groups deeper than Python's recursion limit "
            f"({sys.getrecursionlimit()}) allows",
        ) from None


def _compile(spec: Spec, limits: Limits) -> Grammar:
    if isinstance(spec, JsonSchema):
        from ._jsonschema_emit import compile_json_schema_network

        network = compile_json_schema_network(spec, limits)
    elif isinstance(spec, Regex):
        from ._regex_spec import compile_regex_network

        network = compile_regex_network(spec, limits)
    elif isinstance(spec, Gbnf):
        from ._gbnf import compile_gbnf_network

        network = compile_gbnf_network(spec, limits)
    elif isinstance(spec, Choice):
        from ._choice import compile_choice_network

        network = compile_choice_network(spec, limits)
    else:
        raise SpecError("unknown spec", type(spec).__name__, "JsonSchema, Regex, Gbnf or Choice")
    return Grammar(network, spec, limits)


def compile_json_schema(
    schema: dict[str, Any] | bool, limits: Limits | None = None, **profile_options: Any
) -> Grammar:
    return compile(JsonSchema(schema, JsonProfile(**profile_options)), limits)


def compile_regex(pattern: str, limits: Limits | None = None) -> Grammar:
    return compile(Regex(pattern), limits)


def compile_gbnf(text: str, root: str = "root", limits: Limits | None = None) -> Grammar:
    return compile(Gbnf(text, root), limits)


def compile_choice(options: list[str], limits: Limits | None = None) -> Grammar:
    return compile(Choice(options), limits)
