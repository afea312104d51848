"""``format: "regex"``: the reference's ECMA-262 pattern checker (``refdecoder/_ecma_pattern.py``), the
lexeme that reads it inside JSON strings (``refdecoder/_jsonstring_checked.py``) and the JSON Schema
front-end around it, each compared with an independent reading:

* the identifier tables with a second derivation (``regex``'s newer Unicode, restricted to code points
  assigned at 14.0): they differ exactly in the code points UAX #31 changed since (:data:`CHANGED`);
* the checker with ``props.corpus.ecma_pattern_check`` (a recursive-descent parser written apart) on
  seeded and Hypothesis-drawn patterns: the same verdicts, every live prefix completed by
  :meth:`PatternChecker.complete` into a pattern the other parser accepts, and :meth:`allowed` equal
  to what :meth:`step` takes;
* the lexeme with the checker on every JSON spelling, and its witnesses from every live byte prefix;
* schemas with the JSON-Schema-Test-Suite's ``regex`` groups, and the refusals around the format.
"""

from __future__ import annotations

import json
import random
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
from props.corpus.ecma_pattern_check import ecma_pattern_valid
from refdecoder import JsonProfile, JsonSchema, Unsupported
from refdecoder._cpset import contains, normalize
from refdecoder._ecma_pattern import PATTERN, UNICODE_VERSION, PatternState, derive_identifier_sets
from refdecoder._ecma_tables import ID_CONTINUE, ID_START
from refdecoder._jsonstring_checked import CheckedJsonStringLexeme

from ._data import require_shared, serializations

#: Code points whose identifier properties changed after Unicode 14.0 (15.1 added them to
#: Other_ID_Continue): the independent parser's ``regex`` tables are newer, so comparisons avoid them.
CHANGED = frozenset({0x200C, 0x200D, 0x30FB, 0xFF65})

# Characters the grammar tells apart: syntax, escapes' letters, digits, hex, ID_Start and ID_Continue
# outside ASCII (é, Ω, combining grave, middle dot), astral ones (𝒜 is ID_Start, 😀 is not), others.
ALPHABET = "ab()[]{}|*+?^$.\\-,:=!<>019cdfknuxABDkPpSwW_é\u0300·Ω𝒜😀 "


def state_of(pattern: str) -> PatternState | None:
    s: PatternState | None = PATTERN.start()
    for ch in pattern:
        assert s is not None
        s = PATTERN.step(s, ord(ch))
        if s is None:
            return None
    return s


def ref_valid(pattern: str) -> bool:
    return PATTERN.accepts(pattern)


def corpus(n: int, seed: int = 0) -> list[str]:
    """Random strings over :data:`ALPHABET`, and patterns built from the grammar's pieces (mostly
    well formed, so the early errors are reached)."""
    rng = random.Random(seed)
    pieces = [
        "a", "(", ")", "(?:", "(?=", "(?<=", "(?<!", "(?<n>", "(?<m>", "\\k<n>", "\\k<m>", "\\1", "\\2",
        "[", "]", "[^", "a-z", "z-a", "\\d-z", "\\u0041", "\\x4", "\\cA", "\\0", "*", "+?", "{2,1}",
        "{1,2}", "{3}", "|", "^", "$", ".", "\\b", "é", "😀", "-", "\\-", "\\$", "\\a",
    ]  # fmt: skip
    out = []
    for i in range(n):
        k = rng.randint(0, 12)
        if i % 2:
            out.append("".join(rng.choice(ALPHABET) for _ in range(k)))
        else:
            out.append("".join(rng.choice(pieces) for _ in range(k)))
    return out


# -- identifier tables ----------------------------------------------------------------------------------
def test_tables_are_the_derivation_and_differ_from_a_newer_unicode_where_uax31_changed() -> None:
    start, cont = normalize(ID_START), normalize(ID_CONTINUE)
    if unicodedata.unidata_version == UNICODE_VERSION:
        assert derive_identifier_sets() == (start, cont)
    regex = pytest.importorskip("regex")
    ps, pc = regex.compile(r"\p{ID_Start}"), regex.compile(r"\p{ID_Continue}")
    differ = set()
    for cp in range(0x110000):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(ch) == "Cn":
            continue
        if bool(ps.match(ch)) != contains(start, cp) or bool(pc.match(ch)) != contains(cont, cp):
            differ.add(cp)
    if unicodedata.unidata_version == UNICODE_VERSION:
        assert differ == CHANGED
    else:  # another Python assigns other code points; the known changes still differ
        assert differ >= CHANGED


# -- the checker against the independent parser ----------------------------------------------------------
SUITE = {
    r"([abc])+\s+$": True, "^(abc]": False, r"\a": False, "(?P<name>x)": False,
    "(?P<n>a)(?P=n)": False, "(?#comment)a": False, "(?i)abc": False, "(?ims)abc": False,
    "(?<name>x)": True, r"(?<n>a)\k<n>": True, "(?<=a+)b": True, "[]": True, "[^]": True, r"\cA": True,
    "": True, "a{2,1}": False, "a{1,2}": True, r"\1()": True, r"\2()": False, r"\k<x>(?<x>)": True,
    "(?<a>)(?<a>)": False, "(?=a)*": False, "[😀-😂]": False, "(?<𝒜>.)": True, r"(?<\ud835\udc9c>.)": True,
    r"[\d-z]": False, "[--]": True, "[a--]": False, r"\0": True, r"\01": False, "\\\u200c": True,
}  # fmt: skip


def test_suite_cases() -> None:
    for pattern, valid in SUITE.items():
        assert ref_valid(pattern) == valid, pattern
        if not set(map(ord, pattern)) & CHANGED:
            assert ecma_pattern_valid(pattern) == valid, pattern


def _agree(pattern: str) -> None:
    assert not set(map(ord, pattern)) & CHANGED
    assert ref_valid(pattern) == ecma_pattern_valid(pattern), pattern
    s: PatternState | None = PATTERN.start()
    for i in range(len(pattern) + 1):
        assert s is not None
        rest = "".join(map(chr, PATTERN.complete(s)))
        assert ecma_pattern_valid(pattern[:i] + rest), (pattern[:i], rest)
        if i == len(pattern):
            break
        s = PATTERN.step(s, ord(pattern[i]))
        if s is None:  # dead: no completion, so none of these either
            dead = pattern[: i + 1]
            for tail in ("", ")", "]", ">)", "}", "0}", "]))", "(?<n>)(?<m>)()()", "a"):
                assert not ecma_pattern_valid(dead + tail), (dead, tail)
            break


def test_agrees_with_the_independent_parser_on_a_seeded_corpus() -> None:
    for pattern in corpus(2500):
        _agree(pattern)


@given(st.text(alphabet=ALPHABET, max_size=16))
def test_agrees_with_the_independent_parser(pattern: str) -> None:
    _agree(pattern)


def test_allowed_is_what_step_takes() -> None:
    rng = random.Random(1)
    probes = [*range(0x80), 0xE9, 0x300, 0xB7, 0x3A9, 0x200C, 0x200D, 0x2028, 0xFFFF, 0xD7FF, 0xE000]
    probes += [0x1D49C, 0x1F600, 0x10000, 0x10FFFF, 0x10400, 0x1D7CE]
    seen = 0
    for pattern in corpus(600, seed=2):
        s: PatternState | None = PATTERN.start()
        for ch in pattern + "":
            assert s is not None
            allowed = PATTERN.allowed(s)
            cps = probes + [rng.randrange(0x80, 0x110000) for _ in range(20)]
            if s.cls is not None and s.cls[0] == "dash" and s.cls[1] >= 0:  # around the threshold
                cps += [max(0, s.cls[1] - 1), s.cls[1], s.cls[1] + 1]
            for cp in cps:
                if 0xD800 <= cp <= 0xDFFF:
                    continue
                assert contains(allowed, cp) == (PATTERN.step(s, cp) is not None), (pattern, s, hex(cp))
            seen += 1
            s = PATTERN.step(s, ord(ch))
            if s is None:
                break
    assert seen > 2000


def test_deep_nesting_and_long_numbers() -> None:
    assert ref_valid("(" * 3000 + ")" * 3000)
    assert not ref_valid("(" * 3000)
    assert PATTERN.complete(state_of("(" * 50) or PATTERN.start()) == [ord(")")] * 50
    assert ref_valid("a{" + "9" * 5000 + "}")
    assert not ref_valid("a{" + "9" * 50 + ",1" + "0" * 40 + "}")


# -- the lexeme ----------------------------------------------------------------------------------------------
def _reads(lexeme: CheckedJsonStringLexeme, data: bytes) -> bool:
    s = lexeme.start()
    for b in data:
        s = lexeme.step(s, b)
        if s is None:
            return False
    return lexeme.is_final(s)


@pytest.mark.parametrize("escapes", [True, False, "controls"])
def test_lexeme_reads_the_checker_in_every_spelling(escapes: bool | str) -> None:
    lexeme = CheckedJsonStringLexeme(PATTERN, escapes, min_length=0)  # type: ignore[arg-type]
    longer = CheckedJsonStringLexeme(PATTERN, escapes, min_length=4)  # type: ignore[arg-type]
    for pattern in [*SUITE, *corpus(300, seed=3)]:
        if not escapes and any(ord(c) < 0x20 and c not in "\b\f\n\r\t" for c in pattern):
            continue
        spellings = {json.dumps(pattern, ensure_ascii=False)}
        if escapes is True:
            spellings.add(json.dumps(pattern))
        for text in spellings:
            data = text.encode()
            assert _reads(lexeme, data) == ref_valid(pattern), text
            assert _reads(longer, data) == (ref_valid(pattern) and len(pattern) >= 4), text
            for lx in (lexeme, longer):  # every live byte prefix has a witness the lexeme reads
                s = lx.start()
                for i, b in enumerate(data):
                    w = lx.witness(s)
                    assert w is not None and _reads(lx, data[:i] + w), (text, i, w)
                    s = lx.step(s, b)
                    if s is None:
                        break


# -- the JSON Schema front-end -------------------------------------------------------------------------------
ASSERT = JsonProfile(formats="assert", allow_duplicate_keys=True)


@pytest.mark.parametrize("name", ["regex.json", "ecmascript-regex.json"])
def test_suite_format_groups(name: str) -> None:
    path: Path = require_shared(f"json-schema-test-suite/tests/draft2020-12/optional/format/{name}")
    for group in json.loads(path.read_text()):
        g = refdecoder.compile(JsonSchema(group["schema"], ASSERT))
        for t in group["tests"]:
            for text in serializations(t["data"], reorder=True, escapes=True):
                assert g.accepts(text.encode()) == t["valid"], (group["description"], text)


def test_format_regex_beside_other_keywords() -> None:
    g = refdecoder.compile(JsonSchema({"type": "string", "format": "regex", "minLength": 3}, ASSERT))
    assert [g.accepts(t) for t in (b'"a+"', b'"ab+"', b'"a{2"')] == [False, True, False]
    g = refdecoder.compile(JsonSchema({"format": "regex", "enum": ["a(", "a+", 1]}, ASSERT))
    assert [g.accepts(t) for t in (b'"a("', b'"a+"', b"1")] == [False, True, True]
    g = refdecoder.compile(JsonSchema({"properties": {"r": {"format": "regex"}}}, ASSERT))
    assert g.accepts(b'{"r":"[a-z]+"}') and not g.accepts(b'{"r":"[z-a]"}') and g.accepts(b'{"r":5}')
    after = g.advance(g.initial(), b'{"r":"(?<n>x)\\\\k<')
    assert after is not None
    completion = g.completion(after)
    assert completion is not None and ecma_pattern_valid(json.loads(b'{"r":"(?<n>x)\\\\k<' + completion)["r"])
    for schema in (
        {"format": "regex", "maxLength": 5},
        {"format": "regex", "pattern": "^a"},
        {"not": {"format": "regex"}},
        {"oneOf": [{"format": "regex"}, {"type": "string", "minLength": 2}]},
        {"propertyNames": {"format": "regex"}},
    ):
        with pytest.raises(Unsupported, match="format 'regex' is a context-free language"):
            refdecoder.compile(JsonSchema(schema, ASSERT))
    annotation = refdecoder.compile(JsonSchema({"format": "regex"}, JsonProfile()))
    assert annotation.accepts(b'"(("')
