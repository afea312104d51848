"""``compile(spec)``: dispatch a spec to its front-end and wrap the checked network in a Grammar."""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from ._ir import Network
from ._limits import budget_scope
from .errors import LimitExceeded, SpecError
from .grammar import Choice, Gbnf, Grammar, JsonProfile, JsonSchema, Lark, Limits, Regex, Spec, StructuralTag

__all__ = [
    "compile",
    "compile_network",
    "compile_json_schema",
    "compile_regex",
    "compile_gbnf",
    "compile_choice",
]


# The last few grammars compiled, by (spec, limits). A Grammar is a pure value (its tables are memos),
# so handing the same one to two callers is safe, and callers that compile one spec twice — certify
# compiles it for the reference and, when the backend is the reference, again for the backend —
# then share its byte-step memo instead of running the parser twice.
_RECENT: OrderedDict[tuple[str, Limits], Grammar] = OrderedDict()
_RECENT_SIZE = 8


#: The collector's third threshold while a compile runs: no full collection starts (CPython's rule: one
#: runs after this many collections of the middle generation).
NO_FULL_COLLECTIONS = 1 << 30
_collector_lock = threading.Lock()
_compiles_running = 0
_saved_threshold = 10


@contextlib.contextmanager
def no_full_collections() -> Iterator[None]:
    """Python's cyclic garbage collector makes no full collection while a compile runs (the young
    generations are still collected). A compile builds many objects that live to its end (rules,
    automata, IR nodes), and each full collection traverses all of them, so compile time grew faster
    than the grammar: doubling a 5,000-literal alternation cost 2.7x, doubling the rule chain 2.4x
    (``tests/bench_compile.py``); without full collections, 1.9-2.2x. The first compile to start
    raises the threshold and the last one to end restores it, so nested and concurrent compiles
    leave it as they found it. Inside, ``_fsa._gc_paused`` still switches the collector off entirely
    around the automaton builds that make no cyclic garbage; a whole compile may make some, so it
    keeps the young collections."""
    global _compiles_running, _saved_threshold
    with _collector_lock:
        if _compiles_running == 0:
            first, second, _saved_threshold = gc.get_threshold()
            gc.set_threshold(first, second, NO_FULL_COLLECTIONS)
        _compiles_running += 1
    try:
        yield
    finally:
        with _collector_lock:
            _compiles_running -= 1
            if _compiles_running == 0:
                first, second, third = gc.get_threshold()
                if third == NO_FULL_COLLECTIONS:  # not set by someone else meanwhile
                    gc.set_threshold(first, second, _saved_threshold)


def compile(spec: Spec, limits: Limits | None = None) -> Grammar:  # noqa: A001 - the documented name
    """Compile ``spec`` within ``limits`` (its structural limits and one compile budget of time and
    fuel, refdecoder/_limits.py); every refusal is typed (``Unsupported``, ``LimitExceeded``,
    ``SpecError``). The same spec and limits compiled again give the same (immutable) Grammar."""
    limits = limits or Limits()
    try:
        key = (spec.canonical(), limits)
    except (AttributeError, TypeError, ValueError, RecursionError):
        key = None  # not a spec, or one too odd to key: _compile refuses it with a typed error
    if key is not None and key in _RECENT:
        _RECENT.move_to_end(key)
        return _RECENT[key]
    try:
        with budget_scope(limits), no_full_collections():
            grammar = _compile(spec, limits)
    except RecursionError:  # a backstop: the structural limits should refuse such a spec first
        raise LimitExceeded(
            "nesting_depth",
            f"a nest of subschemas, $refs or groups deeper than Python's recursion limit "
            f"({sys.getrecursionlimit()}) allows",
        ) from None
    if key is not None:
        _RECENT[key] = grammar
        if len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)
    return grammar


def _compile(spec: Spec, limits: Limits) -> Grammar:
    return Grammar(compile_network(spec, limits), spec, limits)


def compile_network(spec: Spec, limits: Limits) -> Network:
    """``spec``'s checked network, inside the caller's compile budget (front-ends that embed one
    spec in another, e.g. a Lark ``%json``, call this)."""
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
    elif isinstance(spec, Lark):
        from ._lark import compile_lark_network

        network = compile_lark_network(spec, limits, compile_network)
    elif isinstance(spec, StructuralTag):
        from ._structural_tag import compile_structural_tag_network

        network = compile_structural_tag_network(spec, limits, compile_network)
    else:
        raise SpecError(
            "unknown spec", type(spec).__name__, "JsonSchema, Regex, Gbnf, Choice, Lark or StructuralTag"
        )
    return network


def compile_json_schema(
    schema: dict[str, Any] | bool, limits: Limits | None = None, **profile_options: Any
) -> Grammar:
    return compile(JsonSchema(schema, JsonProfile(**profile_options)), limits)


def compile_regex(pattern: str, limits: Limits | None = None) -> Grammar:
    return compile(Regex(pattern), limits)


def compile_gbnf(
    text: str, root: str = "root", limits: Limits | None = None, dialect: str = "llama.cpp"
) -> Grammar:
    """A GBNF grammar: llama.cpp's dialect, or ``dialect="xgrammar"`` for xgrammar's EBNF."""
    return compile(Gbnf(text, root, dialect=dialect), limits)


def compile_choice(options: list[str], limits: Limits | None = None) -> Grammar:
    return compile(Choice(options), limits)
