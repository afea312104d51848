"""Key memory (refdecoder/_keymemory.py): the default profile excludes repeated keys exactly.

The oracle is independent of the reference: an object is in the language iff its members, parsed as a
list of pairs (``json.loads(object_pairs_hook=list)``), have pairwise distinct decoded names and the
object (as a dict) is valid for ``jsonschema``. Viable prefixes are checked through completions: every
prefix the matcher keeps alive must have a completion the matcher accepts (no dead ends), and every
prefix of a member must stay alive.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder
from refdecoder._fsa import CodepointDFA
from refdecoder._keymemory import KeyLexeme, language_size

from ._data import assert_live_prefixes_complete


def _compile(schema: dict[str, Any], **profile: Any) -> refdecoder.Grammar:
    return refdecoder.compile_json_schema(schema, **profile)


def _oracle(schema: dict[str, Any], text: bytes) -> bool:
    try:
        pairs = json.loads(text, object_pairs_hook=lambda kv: ("pairs", kv))
    except ValueError:
        return False

    def distinct(v: Any) -> bool:
        if isinstance(v, tuple) and v and v[0] == "pairs":
            names = [k for k, _ in v[1]]
            return len(names) == len(set(names)) and all(distinct(x) for _, x in v[1])
        if isinstance(v, list):
            return all(distinct(x) for x in v)
        return True

    if not distinct(pairs):
        return False
    return bool(jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)))


# -- hand cases --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (b'{"a":1,"b":2}', True),
        (b'{"a":1,"a":2}', False),
        (b'{"a":1,"\\u0061":2}', False),  # the same name, spelled with an escape
        (b'{"\\u0041":1,"A":2}', False),
        (b'{"a":1,"ab":2,"b":3}', True),
        (b'{"a":{"a":1},"b":{"a":2}}', True),  # nested objects remember their own keys
        (b'{"a":{"x":1,"x":2}}', False),
    ],
)
def test_plain_object_excludes_repeated_keys(text: bytes, ok: bool) -> None:
    g = _compile({"type": "object"})
    assert g.accepts(text) is ok
    assert _oracle({"type": "object"}, text) is ok


def test_repeated_key_dies_at_the_closing_quote() -> None:
    g = _compile({"type": "object"})
    s = g.advance(g.initial(), b'{"a":1,"a')
    assert s is not None  # "ab" is still possible
    assert g.advance(s, b'"') is None
    assert g.advance(s, b'b"') is not None


def test_declared_and_undeclared_keys_never_collide() -> None:
    schema = {"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    g = _compile(schema)
    assert g.accepts(b'{"a":1,"b":"x"}')
    assert not g.accepts(b'{"a":1,"a":2}')
    assert not g.accepts(b'{"b":"x","b":"y"}')


def test_finite_region_counts_towards_min_properties() -> None:
    # two undeclared keys exist ("x", "y"), so three members are impossible and the third comma dies
    schema = {"patternProperties": {"^[xy]$": {}}, "additionalProperties": False, "minProperties": 2}
    g = _compile(schema)
    assert g.accepts(b'{"x":0,"y":0}')
    assert not g.accepts(b'{"x":0}')
    assert not g.accepts(b'{"x":0,"x":0}')
    s = g.advance(g.initial(), b'{"x":0,"')
    assert s is not None and g.live_bytes(s) == b"\\y"  # "x" is used up: y, raw or escaped
    schema3 = dict(schema, minProperties=3)
    g3 = _compile(schema3)
    assert g3.advance(g3.initial(), b"{") is None  # the language is empty


def test_schema_order_with_regions() -> None:
    g = _compile(
        {"properties": {"a": {}, "b": {}}, "additionalProperties": {"type": "integer"}},
        property_order="schema",
    )
    assert g.accepts(b'{"a":1,"b":2,"c":3,"d":4}')
    assert not g.accepts(b'{"c":3,"a":1}')
    assert not g.accepts(b'{"a":1,"c":3,"c":4}')


def test_completion_after_keys_used_up() -> None:
    g = _compile({"patternProperties": {"^[ab]$": {"type": "null"}}, "additionalProperties": False})
    s = g.advance(g.initial(), b'{"a":null,"b":null')
    assert s is not None
    word = g.completion(s)
    assert word is not None and g.accepts(b'{"a":null,"b":null' + word)
    s2 = g.advance(g.initial(), b'{"b":null,')
    assert s2 is not None
    word2 = g.completion(s2)
    assert word2 is not None and g.accepts(b'{"b":null,' + word2)


def test_token_masks_inside_keys_match_bruteforce() -> None:
    from tokenizers_matrix import get

    vocab = get("bpe")
    g = _compile({"type": "object", "additionalProperties": {"type": "integer"}})
    tg = refdecoder.TokenGrammar(g, vocab)
    for prefix in (b'{"a":1,"', b'{"a":1,"a', b'{"ab":1,"a":2,"a', b"{"):
        s = g.advance(g.initial(), prefix)
        assert s is not None
        assert (tg.mask(s) == tg.mask_bruteforce(s)).all(), prefix


def test_language_size() -> None:
    assert language_size(CodepointDFA.literals(["a", "b", "cd"]), 100) == 3
    assert language_size(CodepointDFA.any_string(), 100) is None
    assert language_size(CodepointDFA.from_intervals([(0x61, 0x7A)]), 10) == 10  # saturated
    assert language_size(CodepointDFA.empty(), 10) == 0


def test_key_lexeme_excludes_its_entry_set() -> None:
    lex = KeyLexeme(CodepointDFA.literals(["a", "b"]), True, 10_000)
    s: Any = lex.entry(frozenset({"a"}))
    for b in b'"a':
        s = lex.step(s, b)
        if s is None:
            break
    assert s is None  # after '"a' only the closing of a key other than "a" could follow: none
    s = lex.entry(frozenset({"a"}))
    for b in b'"b"':
        s = lex.step(s, b)
        assert s is not None
    assert lex.is_final(s) and KeyLexeme.name(s) == "b"


# -- the property ------------------------------------------------------------------------------
_NAMES = ["a", "b", "ab", "x", "y"]
_SPELL = {"a": ['"a"', '"\\u0061"'], "b": ['"b"', '"\\u0062"'], "ab": ['"ab"', '"a\\u0062"']}


@st.composite
def _schemas(draw: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if draw(st.booleans()):
        schema["properties"] = {k: {"type": "integer"} for k in draw(st.sets(st.sampled_from(["a", "x"])))}
    if draw(st.booleans()):
        schema["patternProperties"] = {
            draw(st.sampled_from(["^[ab]$", "^a", "b$", "^[xy]$"])): {"type": "integer"}
        }
    schema["additionalProperties"] = draw(st.sampled_from([True, False, {"type": "integer"}]))
    if draw(st.booleans()):
        schema["minProperties"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        schema["maxProperties"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        schema["required"] = sorted(draw(st.sets(st.sampled_from(["a", "b"]), max_size=2)))
    return schema


@st.composite
def _objects(draw: Any) -> bytes:
    names = draw(st.lists(st.sampled_from(_NAMES), max_size=4))
    parts = []
    for name in names:
        spelled = draw(st.sampled_from(_SPELL.get(name, [json.dumps(name)])))
        parts.append(f"{spelled}:{draw(st.sampled_from(['0', '1', 'null']))}")
    return ("{" + ",".join(parts) + "}").encode()


@settings(max_examples=300, deadline=None)
@given(_schemas(), _objects())
def test_verdicts_equal_the_oracle(schema: dict[str, Any], text: bytes) -> None:
    g = _compile(schema)
    assert g.accepts(text) == _oracle(schema, text), (schema, text)


@settings(max_examples=200, deadline=None)
@given(_schemas(), _objects())
def test_every_live_prefix_completes(schema: dict[str, Any], text: bytes) -> None:
    assert_live_prefixes_complete(_compile(schema), text, lambda t: _oracle(schema, t), schema)
