"""The hostile-spec catalog: inputs built to hang, exhaust or crash a spec compiler.

:data:`CATALOG` is the fixed suite of :class:`~maskcert.hostile_runner.HostileInput` s (JSON Schema
files, number bounds, regexes, GBNF files, tokenizer files), each with the typed outcomes it may have;
``tests/test_hostile.py`` runs it through :func:`maskcert.hostile_runner.run_batch`.
:mod:`maskcert.fuzz` generates more (``maskcert fuzz --target hostile``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from maskcert.hostile_runner import HostileInput, Kind

__all__ = ["CATALOG"]

LIMIT = frozenset({"LimitExceeded"})
FILE = frozenset({"SpecFileError"})
UNSUP = frozenset({"Unsupported"})
INVALID = frozenset({"SpecError"})
VOCAB = frozenset({"VocabularyError"})
OK = frozenset({"supported"})
DUPS = {"allow_duplicate_keys": True}


def _j(value: Any) -> bytes:
    return json.dumps(value).encode()


def _ref_chain(n: int) -> dict[str, Any]:
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def _nest(key: str, n: int, leaf: Any, wrap: Callable[[Any], Any] | None = None) -> bytes:
    """``{"key": {"key": ... leaf}}`` n deep, written as text (no recursion in json.dumps)."""
    if wrap is None:
        head, tail = f'{{"{key}":'.encode(), b"}"
    else:
        h, t = wrap(key)
        head, tail = h.encode(), t.encode()
    return head * n + _j(leaf) + tail * n


def _schemas() -> Iterable[HostileInput]:
    S: Kind = "schema-file"  # noqa: N806
    yield HostileInput("minLength-1e9", S, _j({"type": "string", "minLength": 10**9}), LIMIT)
    yield HostileInput("maxLength-1e9", S, _j({"type": "string", "maxLength": 10**9}), LIMIT)
    yield HostileInput("minLength-1e5", S, _j({"type": "string", "minLength": 10**5}), LIMIT)
    yield HostileInput("minLength-float-1e9", S, _j({"type": "string", "minLength": 1e9}), LIMIT)
    # counted in the lexeme's state (no product automaton): decided exactly, quickly
    yield HostileInput(
        "length-window-huge", S, _j({"type": "string", "minLength": 40_000, "maxLength": 50_000}), OK
    )
    yield HostileInput(
        "minItems-1e9-integers",
        S,
        _j({"type": "array", "minItems": 10**9, "items": {"type": "integer"}}),
        LIMIT,
    )
    yield HostileInput("minItems-1e9-any", S, _j({"type": "array", "minItems": 10**9}), LIMIT, DUPS)
    yield HostileInput(
        "maxItems-1e9", S, _j({"type": "array", "maxItems": 10**9, "items": {"type": "integer"}}), OK
    )
    yield HostileInput(
        "not-maxItems-1e9",
        S,
        _j({"type": "array", "items": {"type": "integer"}, "not": {"maxItems": 10**9}}),
        LIMIT,
    )
    yield HostileInput(
        "minContains-1e9",
        S,
        _j({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "minContains": 10**9}),
        LIMIT,
    )
    yield HostileInput(
        "maxContains-1e9-unsatisfiable",
        S,
        _j(
            {
                "type": "array",
                "items": {"type": "integer"},
                "maxItems": 10**9,
                "contains": {"type": "string"},
                "maxContains": 3,
            }
        ),
        OK | UNSUP,
    )
    yield HostileInput("minProperties-1e9", S, _j({"type": "object", "minProperties": 10**9}), LIMIT, DUPS)
    yield HostileInput(
        "not-maxProperties-1e9", S, _j({"type": "object", "not": {"maxProperties": 10**9}}), LIMIT, DUPS
    )
    yield HostileInput("integer-minimum-1e308", S, _j({"type": "integer", "minimum": 1e308}), OK)
    yield HostileInput(
        "integer-range-1e300",
        S,
        b'{"type": "integer", "minimum": -1' + b"0" * 300 + b', "maximum": 1' + b"0" * 300 + b"}",
        OK,
    )
    yield HostileInput("multipleOf-1e-300", S, _j({"type": "number", "multipleOf": 1e-300}), OK | LIMIT)
    yield HostileInput(
        "multipleOf-4000-digits",
        S,
        b'{"type": "number", "multipleOf": 0.' + b"0" * 3990 + b"7}",
        LIMIT | INVALID,
    )
    yield HostileInput("integer-literal-5000-digits", S, b'{"const": ' + b"7" * 5000 + b"}", FILE)
    yield HostileInput("file-nested-items-10000", S, _nest("items", 10_000, {"type": "integer"}), FILE)
    yield HostileInput(
        "file-nested-anyOf-3000", S, _nest("anyOf", 3000, True, lambda k: (f'{{"{k}":[', "]}")), FILE
    )
    yield HostileInput("file-nested-const-300", S, b'{"const": ' + b"[" * 300 + b"]" * 300 + b"}", FILE)
    yield HostileInput(
        "file-brackets-in-strings", S, _j({"description": "[" * 100_000, "type": "string"}), OK
    )
    yield HostileInput("file-not-utf8", S, b'{"type": "str\xffing"}', FILE)
    yield HostileInput("file-utf16", S, '{"type": "string"}'.encode("utf-16"), FILE)
    yield HostileInput("file-truncated-json", S, b'{"type": "string",\n "pattern": ', FILE)
    yield HostileInput("file-empty", S, b"", FILE)
    yield HostileInput("file-3MB", S, b'{"type": "string"}' + b" " * 3_000_000, FILE, seconds=2.0)
    yield HostileInput("file-NaN", S, b'{"type": "number", "minimum": NaN}', INVALID)
    yield HostileInput("ref-chain-5000", S, _j(_ref_chain(5000)), LIMIT, seconds=2.0)
    yield HostileInput("ref-chain-250", S, _j(_ref_chain(250)), LIMIT | OK)
    yield HostileInput("ref-self", S, _j({"$ref": "#"}), UNSUP)
    yield HostileInput(
        "ref-mutual",
        S,
        _j({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        UNSUP,
    )
    yield HostileInput("ref-remote", S, _j({"$ref": "https://example.com/schema.json"}), UNSUP)
    yield HostileInput("ref-file", S, _j({"$ref": "file:///etc/passwd"}), UNSUP)
    yield HostileInput("enum-100k", S, _j({"enum": list(range(100_000))}), LIMIT, seconds=2.0)
    yield HostileInput("const-1.5MB-string", S, _j({"const": "x" * 1_500_000}), LIMIT, seconds=2.0)
    yield HostileInput(
        "pattern-blowup-25", S, _j({"type": "string", "pattern": "^[ab]*a[ab]{25}$"}), LIMIT, seconds=3.0
    )
    yield HostileInput("pattern-a1e6", S, _j({"type": "string", "pattern": "a{1000000}"}), LIMIT)
    yield HostileInput(
        "pattern-nested-repeats", S, _j({"type": "string", "pattern": "((a{100}){100}){100}"}), LIMIT
    )
    yield HostileInput(
        "pattern-5000-digit-count", S, _j({"type": "string", "pattern": "a{" + "9" * 5000 + "}"}), LIMIT
    )
    yield HostileInput(
        "required-1000", S, _j({"type": "object", "required": [f"k{i}" for i in range(1000)]}), LIMIT
    )
    yield HostileInput(
        "oneOf-200-objects",
        S,
        _j(
            {
                "oneOf": [
                    {"type": "object", "properties": {f"p{i}": {"const": i}}, "required": [f"p{i}"]}
                    for i in range(200)
                ]
            }
        ),
        LIMIT | UNSUP,
        seconds=3.0,
    )
    yield HostileInput(
        "allOf-30-blowup-patterns",
        S,
        _j({"type": "string", "allOf": [{"pattern": f"^[ab]*a[ab]{{{k}}}$"} for k in range(5, 35)]}),
        LIMIT,
        seconds=1.5,
        limits={"compile_fuel": 200_000},
    )
    yield HostileInput(  # the same, stopped by the clock instead of the fuel
        "allOf-30-blowup-patterns-clock",
        S,
        _j({"type": "string", "allOf": [{"pattern": f"^[ab]*a[ab]{{{k}}}$"} for k in range(5, 35)]}),
        LIMIT,
        seconds=1.5,
        limits={"compile_fuel": 10**12, "compile_seconds": 0.5},
    )
    yield HostileInput("uniqueItems", S, _j({"type": "array", "uniqueItems": True}), OK)  # value memory
    yield HostileInput(
        "uniqueItems-structured-items",
        S,
        _j({"type": "array", "items": {"type": "object"}, "uniqueItems": True}),
        UNSUP,
    )
    yield HostileInput(
        "format-date-time-minLength-1e5",
        S,
        _j({"type": "string", "format": "date-time", "minLength": 10**5}),
        LIMIT,
    )
    yield HostileInput(
        "anyOf-nested-200-types",
        S,
        _nest("anyOf", 120, {"type": "integer"}, lambda k: (f'{{"{k}":[{{"type":"string"}},', "]}")),
        OK | LIMIT,
    )
    yield HostileInput(
        "defs-50k-unused",
        S,
        _j({"$defs": {f"d{i}": {"type": "integer"} for i in range(50_000)}, "type": "null"}),
        OK | LIMIT,
        seconds=2.0,
    )
    yield HostileInput(
        "property-name-1MB",
        S,
        _j({"type": "object", "properties": {"k" * 1_000_000: {"type": "null"}}}),
        LIMIT,
        seconds=2.0,
    )
    yield HostileInput(
        "prefixItems-20000",
        S,
        _j({"type": "array", "prefixItems": [{"type": "integer"}] * 20_000, "items": False}),
        LIMIT,
        seconds=3.0,  # indexing and size checks are linear in the file, before any fuel is spent
        limits={"compile_fuel": 200_000},
    )


def _numbers() -> Iterable[HostileInput]:
    S: Kind = "schema-file"  # noqa: N806
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]
    cases: list[tuple[str, Any, frozenset[str]]] = [
        (
            "int-multipleOf-7-range-1e300",
            {"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 10**300},
            OK,
        ),
        (
            "num-multipleOf-1e-5-range",
            {"type": "number", "multipleOf": 1e-5, "minimum": 0, "maximum": 1e10},
            OK,
        ),
        (
            "int-allOf-25-prime-multiples",
            {"type": "integer", "allOf": [{"multipleOf": p} for p in primes]},
            OK,
        ),
        (
            "int-not-multipleOf-10-primes",
            {"type": "integer", "allOf": [{"not": {"multipleOf": p}} for p in primes[:10]]},
            LIMIT,
        ),
        (
            "int-multipleOf-1e9+7",
            {"type": "integer", "multipleOf": 10**9 + 7, "minimum": -(10**50), "maximum": 10**50},
            OK,
        ),
        (
            "num-tiny-window-1e-17",
            {
                "type": "number",
                "exclusiveMinimum": 0.1,
                "exclusiveMaximum": 0.1000000000000001,
                "multipleOf": 1e-17,
            },
            OK | LIMIT,
        ),
        (
            "int-anyOf-200-ranges",
            {
                "anyOf": [
                    {"type": "integer", "minimum": i * 1000, "maximum": i * 1000 + 7} for i in range(200)
                ]
            },
            LIMIT | OK,
        ),
    ]
    for name, schema, expect in cases:
        yield HostileInput(name, S, _j(schema), expect, seconds=2.0)


def _regexes() -> Iterable[HostileInput]:
    R: Kind = "regex"  # noqa: N806

    def r(name: str, pattern: str, expect: frozenset[str], seconds: float = 1.0) -> HostileInput:
        return HostileInput(name, R, pattern.encode("utf-8"), expect, seconds=seconds)

    yield r("regex-backtracking-bomb", "(a|aa)*b", OK)
    yield r("regex-star-of-star", "(a*)*b", OK)
    yield r("regex-blowup-25", "[ab]*a[ab]{25}", LIMIT, seconds=3.0)
    yield r("regex-a1e6", "a{1000000}", LIMIT)
    yield r("regex-nested-repeats", "((a{100}){100}){100}", LIMIT)
    yield r("regex-dot-20000", ".{20000}", LIMIT, seconds=3.0)
    yield r("regex-count-overflow", "a{99999999999999999999}", INVALID | LIMIT)
    yield r("regex-backreference", r"(a)\1", UNSUP)
    yield r("regex-lookahead", "(?=a)a", UNSUP)
    yield r("regex-nested-parens-5000", "(" * 5000 + "a" + ")" * 5000, INVALID | LIMIT)
    yield r("regex-unbalanced", "(" * 10, INVALID)
    yield r("regex-20000-words", "|".join(f"w{i:05d}" for i in range(20_000)), OK | LIMIT, seconds=5.0)
    yield r("regex-nonascii-1000", "[^\\x00-\\x7f]{1000}", OK | LIMIT)
    yield HostileInput(
        "regex-alternation-of-blowups",
        R,
        "|".join(f"[ab]*a[ab]{{{k}}}" for k in range(8, 20)).encode(),
        LIMIT,
        seconds=1.5,
        limits={"compile_fuel": 200_000},
    )


def _gbnfs() -> Iterable[HostileInput]:
    G: Kind = "gbnf-file"  # noqa: N806

    def g(name: str, text: bytes, expect: frozenset[str], seconds: float = 1.0) -> HostileInput:
        return HostileInput(name, G, text, expect, seconds=seconds)

    yield g("gbnf-random-bytes", bytes(range(256)) * 4, FILE)
    yield g("gbnf-not-utf8", b'root ::= "\xc3\x28"', FILE)
    yield g("gbnf-empty", b"", INVALID)
    yield g("gbnf-3MB", b'root ::= "a"\n' + b"#" * 3_000_000, FILE)
    # left recursion is rewritten (refdecoder/_gbnf_rewrite.py); a ring whose rewrite would pass the
    # size bound is refused
    yield g("gbnf-left-recursion", b'root ::= root "a" | "a"', OK)
    yield g("gbnf-mutual-left-recursion", b'root ::= a\na ::= b "x" | "z"\nb ::= a "y"', OK)
    # a ring whose substitution doubles at each rule: refused at the rewrite's size bound
    ring = "".join(f'r{i} ::= r{(i + 1) % 24} "a" | r{(i + 1) % 24} "b" | "c"\n' for i in range(24))
    yield g("gbnf-left-recursion-doubling-ring", f"root ::= r0\n{ring}".encode(), UNSUP, seconds=5.0)
    yield g("gbnf-undefined-rule", b"root ::= nowhere", INVALID)
    yield g("gbnf-count-1e11", b'root ::= "a"{0,99999999999}', LIMIT)
    yield g("gbnf-count-5000-digits", b'root ::= "a"{' + b"9" * 5000 + b"}", LIMIT)
    yield g("gbnf-count-1e6", b'root ::= "a"{1000000}', OK | LIMIT)
    yield g("gbnf-nested-groups-300", b"root ::= " + b"(" * 300 + b'"a"' + b")" * 300, LIMIT)
    yield g("gbnf-nested-groups-100000", b"root ::= " + b"(" * 100_000 + b'"a"' + b")" * 100_000, LIMIT)
    yield g("gbnf-postfix-300", b'root ::= "a"' + b"?" * 300, LIMIT)
    yield g(
        "gbnf-rule-chain-10000",
        b"\n".join(
            [b"root ::= r0"] + [f"r{i} ::= r{i + 1}".encode() for i in range(10_000)] + [b'r10000 ::= "a"']
        ),
        OK | LIMIT | UNSUP,
        seconds=3.0,
    )
    yield g(
        "gbnf-blowup-class",
        b'root ::= [ab]* "a" [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab]',
        OK | LIMIT,
    )
    yield g("gbnf-ambiguous-star", b'root ::= ("a" | "a" | "aa")* "b"', OK | LIMIT)
    yield g("gbnf-bad-escape", b'root ::= "\\x"', INVALID)
    yield g("gbnf-codepoint-overflow", b'root ::= "\\U99999999"', INVALID | UNSUP)


def _tokenizers() -> Iterable[HostileInput]:
    T: Kind = "tokenizer-file"  # noqa: N806

    def t(name: str, data: bytes, filename: str = "tokenizer.json", seconds: float = 1.0) -> HostileInput:
        return HostileInput(name, T, data, VOCAB, filename=filename, seconds=seconds)

    yield t("tok-random-bytes", bytes(range(256)) * 16, "tokenizer.bin")
    yield t("tok-json-not-utf8", b'{"model": "\xff"}')
    yield t("tok-json-nested-100000", b'{"model":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    yield t("tok-json-truncated", b'{"model": {"type": "BPE", "vocab": {"a": 0')
    yield t("tok-json-vocab-not-a-map", _j({"model": {"type": "BPE", "vocab": "x", "merges": []}}))
    yield t("tok-json-huge-id", _j({"model": {"type": "BPE", "vocab": {"a": 10**12, "b": 0}, "merges": []}}))
    yield t("tok-json-negative-id", _j({"model": {"type": "BPE", "vocab": {"a": -5}, "merges": []}}))
    yield t("tok-json-empty", b"")
    yield t("tok-sp-random", b"\n" + bytes(range(1, 256)) * 8, "tokenizer.model")
    yield t("tok-sp-huge-varint", b"\n\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "tokenizer.model")
    yield t("tok-tiktoken-bad-base64", b"!!!! 0\nYQ== 1\n", "cl100k_base.tiktoken")
    yield t("tok-tiktoken-huge-rank", b"YQ== 999999999999999\nYg== 1\n", "cl100k_base.tiktoken")
    yield t("tok-tekken-wrong-fields", _j({"config": {}, "vocab": 5}), "tekken.json")


CATALOG: tuple[HostileInput, ...] = tuple([*_schemas(), *_numbers(), *_regexes(), *_gbnfs(), *_tokenizers()])
