"""xgrammar's EBNF dialect (``Gbnf(text, dialect="xgrammar")``) against xgrammar itself.

The independent oracle is xgrammar's own matcher on a byte vocabulary (256 one-byte tokens and a stop
token): a text is a member iff every byte is accepted and then the stop token is. Byte by byte,
xgrammar never consults lookahead assertions (they only prune the bytes of a multi-byte token that lie
beyond a rule's end), so its byte-level language is the grammar's without them; the reference accepts
an assertion only where the grammar already implies it, where that is the same language. Grammars: the
dialect's constructs, grammars from xgrammar's own tests (``tests/python/test_grammar_matcher_ebnf.py``
in its 0.2.9 sdist, Apache-2.0) and its built-in JSON grammar (``Grammar.builtin_json_grammar()``).
"""

from __future__ import annotations

import functools
import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder
from refdecoder import Gbnf, Grammar, LimitExceeded, SpecError, Unsupported
from refdecoder.grammar import GBNF_DIALECTS

from .test_gbnf_rewrite import random_left_recursive, render, words

xgr = pytest.importorskip("xgrammar")


def ref(text: str, root: str = "root") -> Grammar:
    return refdecoder.compile(Gbnf(text, root, dialect="xgrammar"))


_VOCAB = [bytes([i]) for i in range(256)] + [b""]
_STOP = 256


@functools.cache
def _xg_compiler() -> Any:
    info = xgr.TokenizerInfo(_VOCAB, xgr.VocabType.RAW, stop_token_ids=[_STOP])
    return xgr.GrammarCompiler(info)


@functools.cache
def _xg_compiled(text: str, root: str) -> Any:
    return _xg_compiler().compile_grammar(text, root_rule_name=root)


def xg_accepts(text: str, data: bytes, root: str = "root") -> bool:
    m = xgr.GrammarMatcher(_xg_compiled(text, root))
    return all(m.accept_token(b) for b in data) and bool(m.accept_token(_STOP))


def agree(text: str, data: bytes, root: str = "root") -> bool:
    """The reference's verdict, asserted equal to xgrammar's."""
    mine = ref(text, root).accepts(data)
    theirs = xg_accepts(text, data, root)
    assert mine == theirs, f"{data!r}: reference {mine}, xgrammar {theirs} on {text!r}"
    return mine


# -- the dialect's constructs -------------------------------------------------------------------------------

CONSTRUCTS: list[tuple[str, str, list[str], list[str]]] = [
    ("layout", 'root ::= "a" |\n  "b"\n  r2\nr2 ::= "c"', ["a", "bc"], ["b", "ac"]),
    ("dotted-names", 'root ::= a.b _c-d\na.b ::= "x"\n_c-d ::= "y"', ["xy"], ["x"]),
    ("empty-string-and-group", 'root ::= "" "a" ( ) ""*', ["a"], ["", "aa"]),
    ("c-escapes", r'root ::= "\a\b\f\v\e\0\'\?\/"', ["\a\b\f\v\x1b\x00'?/"], ["\\a"]),
    ("long-hex", r'root ::= "\x1F600" [\x41-\x0043]', ["😀A", "😀C"], ["😀D"]),
    ("class-escapes", r"root ::= [\^\$\.\*\+\?\(\)\[\]\{\}\|\/\-]+", ["^$.*+?()[]{}|/-"], ["a", ""]),
    ("class-dash", "root ::= [-a] [a-] [--/]", ["-a-", "aa."], ["bbb"]),
    ("any-class", "root ::= [^] [^a]", ["\nb", "ab", "😀😀"], ["aa", "a"]),
    ("empty-class", 'root ::= [] | "a"', ["a"], ["", "b"]),
    ("spaced-counts", 'root ::= "a" {2, 3} "b"{0} "c"{1,-1}', ["aac", "aaaccc"], ["ac", "aabc"]),
    ("count-min", 'root ::= ("ab" | "c"){2,}', ["abc", "cccc"], ["ab", ""]),
    ("left-recursion", 'root ::= root "a" | "a"', ["a", "aaa"], ["", "b"]),
    ("comments", 'root ::= "a" # no "b"\n  # nothing\n  "c"', ["ac"], ["abc"]),
]


@pytest.mark.parametrize("text,good,bad", [c[1:] for c in CONSTRUCTS], ids=[c[0] for c in CONSTRUCTS])
def test_construct(text: str, good: list[str], bad: list[str]) -> None:
    for s in good:
        assert agree(text, s.encode()), s
    for s in bad:
        assert not agree(text, s.encode()), s


SPEC_ERRORS = [
    ('root ::= "a"++', "expecting an element"),
    ("root ::= [z-a]", "lower bound above upper bound"),
    ('root ::= "a" x ::= "b"', "must start its line"),
    ('true ::= "a"\nroot ::= "b"', "not after a rule name"),
    (r"root ::= [\d]", "class escape"),
    ('root ::= "a\nb"', "unterminated string"),
    ('root ::= "a" (= "b" | "c")', "choices in a lookahead"),
    ('root ::= "a"{3,2}', "max < min"),
    (r'root ::= "\q"', "invalid escape"),
]


@pytest.mark.parametrize("text,what", SPEC_ERRORS)
def test_spec_errors_where_xgrammar_errs(text: str, what: str) -> None:
    with pytest.raises(SpecError) as ei:
        ref(text)
    assert what in ei.value.what, ei.value.what
    with pytest.raises(RuntimeError):  # xgrammar refuses each of them too
        _xg_compiled(text, "root")


@pytest.mark.parametrize(
    "text,keyword",
    [
        ('root ::= Regex("[a-z]+")', "xgrammar-macro"),
        ("root ::= Token(1, 2)", "xgrammar-macro"),
        ('root[max_tokens=3] ::= "a"', "xgrammar-rule-option"),
        ('root ::= x\nx[lazy] ::= "a"', "xgrammar-rule-option"),
    ],
)
def test_token_level_features_are_refused(text: str, keyword: str) -> None:
    with pytest.raises(Unsupported) as ei:
        ref(text)
    assert ei.value.keyword == keyword


def test_dialect_option() -> None:
    assert GBNF_DIALECTS == ("llama.cpp", "xgrammar")
    text = 'root ::= "a"'
    assert Gbnf(text).canonical() == 'gbnf:["root ::= \\"a\\"", "root"]'  # default fingerprints unchanged
    assert Gbnf(text, dialect="xgrammar").canonical() != Gbnf(text).canonical()
    with pytest.raises(SpecError):
        Gbnf(text, dialect="lark")
    # llama.cpp's dialect keeps its own rules: a rule ends at a newline there, not in xgrammar's
    two_lines = 'root ::= "a"\n  "b"'
    with pytest.raises(SpecError):
        refdecoder.compile(Gbnf(two_lines))
    assert ref(two_lines).accepts(b"ab")


# -- lookahead assertions ----------------------------------------------------------------------------------

IMPLIED = [
    # (grammar with an assertion the grammar implies, members, non-members)
    ('root ::= a [ ]* "}"\na ::= "x" (= [ ]* "}")', ["x}", "x  }"], ["x", "x]"]),
    ('root ::= a ("," a)* ";"\na ::= [0-9]+ (= [,;])', ["1;", "1,22;"], ["1", ";"]),
    ('root ::= a\na ::= "x" (= "y")', ["x"], ["xy"]),  # nothing follows: the text ends (consistent)
    ('root ::= "[" a "]"\na ::= "x" a? (= "]")', ["[x]", "[xx]"], ["[]"]),
]


@pytest.mark.parametrize("text,good,bad", IMPLIED)
def test_implied_lookahead_is_accepted_with_the_same_language(
    text: str, good: list[str], bad: list[str]
) -> None:
    for s in good:
        assert agree(text, s.encode()), s
    for s in bad:
        assert not agree(text, s.encode()), s


NOT_IMPLIED = [
    ('root ::= a "z" | a "y"\na ::= "x" (= "y")', "a", "root"),
    ('root ::= b "z"\nb ::= a "w"? | "q"\na ::= "x" (= "w")', "a", "b"),
    ('root ::= a ("," a)* ("." | ";")\na ::= [0-9]+ (= [,;])', "a", "root"),
]


@pytest.mark.parametrize("text,rule,used_in", NOT_IMPLIED)
def test_lookahead_the_grammar_does_not_imply_is_refused(text: str, rule: str, used_in: str) -> None:
    with pytest.raises(Unsupported) as ei:
        ref(text)
    e = ei.value
    assert (e.keyword, e.where) == ("lookahead", rule)
    assert f"rule {used_in!r}" in e.reason


def test_lookahead_steps_is_a_limits_field() -> None:
    text = 'root ::= a ("," a)* ";"\na ::= [0-9]+ (= [,;])'
    assert ref(text).accepts(b"1,22;")  # the default proves it
    with pytest.raises(Unsupported) as ei:  # out of steps: no proof, hence a refusal
        refdecoder.compile(Gbnf(text, dialect="xgrammar"), limits=refdecoder.Limits(lookahead_steps=1))
    assert (ei.value.keyword, ei.value.where) == ("lookahead", "a")


# -- xgrammar's own test grammars ---------------------------------------------------------------------------

XG_TEST_JSON = r"""
root ::= basic_array | basic_object
basic_any ::= basic_number | basic_string | basic_boolean | basic_null | basic_array | basic_object
basic_integer ::= ("0" | "-"? [1-9] [0-9]*) ".0"?
basic_number ::= ("0" | "-"? [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
basic_string ::= (([\"] basic_string_1 [\"]))
basic_string_1 ::= "" | [^"\\\x00-\x1F] basic_string_1 | "\\" escape basic_string_1
escape ::= ["\\/bfnrt] | "u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]
basic_boolean ::= "true" | "false"
basic_null ::= "null"
basic_array ::= "[" ("" | ws basic_any (ws "," ws basic_any)*) ws "]"
basic_object ::= "{" ("" | ws basic_string ws ":" ws basic_any ( ws "," ws basic_string ws ":" ws basic_any)*) ws "}"
ws ::= [ \n\t]*
"""

XG_TESTS: list[tuple[str, str, list[tuple[str, bool]]]] = [
    # (grammar, root, [(input, accepted)]) as test_grammar_matcher_ebnf.py states them
    (
        'root ::= rule1 rule2\nrule1 ::= (rule2 | rule3) "a"\nrule2 ::= "b"\nrule3 ::= "c"\n',
        "root",
        [("bab", True), ("abb", False), ("cab", True)],
    ),
    (
        'root ::= rule {2, 3}\nrule ::= ("a" | [bc] {4,})',
        "root",
        [("aaa", True), ("abcbc", True), ("bcbcbcbcbc", True), ("bcbcbcbcbcbcbcb", True)]
        + [("d", False), ("aaaa", False)],
    ),
    (
        'root ::= rule {2, 3} "d"?\nrule ::= ("a" | [bc] {4,}) | ""',
        "root",
        [("aaa", True), ("abcbc", True), ("bcbcbcbcbc", True), ("bcbcbcbcbcbcbcb", True), ("aaaa", False)]
        + [("", True), ("a", True), ("d", True)],
    ),
    ("root ::= [，]+", "root", [("，", True), ("，，，", True), ("", False)]),
    (XG_TEST_JSON, "basic_string", [(r'"abc\r\n"', True), ('{"name": "John" }', False)]),
    (XG_TEST_JSON, "root", [('{"name": "John"}', True), ("[1, 2.5, true, null]", True), ("{1}", False)]),
]


@pytest.mark.parametrize("text,root,cases", XG_TESTS)
def test_xgrammar_test_suite_grammars(text: str, root: str, cases: list[tuple[str, bool]]) -> None:
    for s, want in cases:
        assert agree(text, s.encode(), root) == want, s


# -- xgrammar's built-in JSON grammar ------------------------------------------------------------------------


def builtin_json() -> str:
    return str(xgr.Grammar.builtin_json_grammar())


def without_lookahead(text: str, rule: str) -> str:
    """The grammar with ``rule``'s lookahead assertion removed (the printer puts it at the end of the line)."""
    lines = text.splitlines()
    out = [re.sub(r" \(=.*\)$", "", ln) if ln.startswith(rule + " ::=") else ln for ln in lines]
    assert out != lines
    return "\n".join(out)


def test_builtin_json_lookahead_the_grammar_does_not_imply_is_refused() -> None:
    # characters_and_embrace ::= ... (=([ \n\r\t]* [},])) closes an object's last string value, and an
    # object can be the last element of an array: after '[{"a":"b"}' comes ']'. (xgrammar's own masks
    # indeed forbid the token '"}]' after '[{"a":"b' on a vocabulary that has it: a valid JSON text.)
    with pytest.raises(Unsupported) as ei:
        ref(builtin_json())
    assert (ei.value.keyword, ei.value.where) == ("lookahead", "characters_and_embrace")
    assert xg_accepts(builtin_json(), b'[{"a":"b"}]')


JSON_TEXT = without_lookahead(builtin_json(), "characters_and_embrace")  # 7 assertions remain, all implied

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, seed=st.integers(0, 2**32 - 1))
def test_builtin_json_grammar_agrees_with_xgrammar(value: Any, seed: int) -> None:
    """Serializations of JSON values (compact, spaced, indented) and mutants of them: the reference
    (the grammar with its seven implied lookaheads) and xgrammar agree on each."""
    rng = random.Random(seed)
    texts = [
        json.dumps(value, separators=(",", ":")),
        json.dumps(value, indent=rng.choice([None, 1, 2]), ensure_ascii=rng.random() < 0.5),
    ]
    for t in list(texts):
        for _ in range(3):
            i = rng.randrange(len(t) + 1)
            c = rng.choice(' \n\t,:[]{}"\\0-e.1tn')
            texts.append(t[:i] + c + t[i + rng.randrange(2) :])
    for t in texts:
        agree(JSON_TEXT, t.encode())


# -- random left-recursive grammars: xgrammar's Earley parser takes left recursion natively ----------------


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_left_recursive_grammars_agree_with_xgrammar(seed: int) -> None:
    """The rewritten grammar (``refdecoder._gbnf_rewrite``) and xgrammar, which parses left recursion
    itself, agree on every word over {a, b} up to length 5 (both grammars are in both dialects)."""
    text = render(random_left_recursive(random.Random(seed)))
    g = ref(text)
    for w in words(5):
        try:
            mine = g.accepts(w.encode())
        except LimitExceeded as e:  # a highly ambiguous grammar may exceed the parser's stack budget
            assert e.limit == "parser_stacks"
            return
        assert mine == xg_accepts(text, w.encode()), f"{text!r} on {w!r}: reference {mine}"
