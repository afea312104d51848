"""Special tokens as grammar terminals (refdecoder/_special.py) and networks embedded in grammars.

The front-ends that name special tokens (Lark, structural tags) build on two pieces tested here on
hand-built syntax trees: ``SpecialE`` (one special token, read as its encoding) and ``EmbedE`` (a
compiled network as one symbol), and the vocabulary view that lifts such a grammar to token masks.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
from props.corpus import load_corpus, reference_spec
from refdecoder import _special
from refdecoder._compile import compile_network
from refdecoder._gbnf import compile_rules
from refdecoder._grammar_ast import EmbedE, Lit, ParsedGrammar, Ref, RepE, Rule, SeqE, SpecialE
from refdecoder._ir import Lex
from refdecoder._lexeme import ByteDFA
from refdecoder.grammar import Grammar, JsonProfile, JsonSchema, Limits, Spec
from tokenizers_matrix import Vocabulary

LIMITS = Limits()


def _grammar(rules: dict[str, object], label: str = "test") -> Grammar:
    parsed = ParsedGrammar({n: Rule(n, body, 1, 1) for n, body in rules.items()}, [], {})  # type: ignore[arg-type]
    network = compile_rules(parsed, "root", LIMITS)
    return Grammar(network, refdecoder.Regex(label), LIMITS)


def _lit(text: str) -> Lit:
    return Lit(tuple(map(ord, text)))


def _json(schema: object, **profile: object) -> EmbedE:
    spec = JsonSchema(schema, JsonProfile(**profile))  # type: ignore[arg-type]
    return EmbedE(compile_network(spec, LIMITS), "json")


# -- the encoding --------------------------------------------------------------------------------------


@given(st.lists(st.one_of(st.binary(max_size=6), st.integers(0, 300_000)), max_size=6))
def test_split_inverts_encoding(parts: list[bytes | int]) -> None:
    text = [p.replace(b"\xff", b"").replace(b"\xfe", b"") if isinstance(p, bytes) else p for p in parts]
    data = b"".join(_special.encode(p) if isinstance(p, int) else p for p in text)
    merged: list[bytes | int] = []
    for p in text:
        if isinstance(p, bytes):
            if not p:
                continue
            if merged and isinstance(merged[-1], bytes):
                merged[-1] += p
                continue
        merged.append(p)
    assert _special.split(data) == merged


def test_render_names_and_ids() -> None:
    data = b"call " + _special.encode(7) + b"{}" + _special.encode(9)
    assert _special.render(data, {7: "<|tool_call|>"}) == "call <|tool_call|>{}<[9]>"
    assert _special.split(b"\xff012\xfe") == [b"\xff012\xfe"]  # a leading zero is no encoding
    with pytest.raises(refdecoder.SpecError):
        _special.encode(-1)


def test_special_dfa_reads_exactly_the_encodings() -> None:
    dfa = _special.special_dfa({1, 12, 123})
    for i in (1, 12, 123):
        assert _run(dfa, _special.encode(i))
    for word in (_special.encode(2), b"\xff1", b"\xff12", _special.encode(1234), b"1"):
        assert not _run(dfa, word)


def _run(dfa: ByteDFA, word: bytes) -> bool:
    q: object = dfa.start()
    for b in word:
        q = dfa.step(q, b)
        if q is None:
            return False
    return dfa.is_final(q)


# -- grammars that name special tokens ------------------------------------------------------------------

CALL, END = 5, 6


def _tool_call_grammar() -> Grammar:
    # root ::= "say " [a-z]* <5> {"type": "object", ...} <6>   (text, then a call between special tokens)
    body = _json(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, whitespace="none"
    )
    return _grammar(
        {
            "root": SeqE(
                (_lit("say "), RepE(_lit("x"), 0, None), SpecialE(frozenset({CALL})), body, Ref("end", 1, 1))
            ),
            "end": SpecialE(frozenset({END})),
        }
    )


def test_special_token_is_not_its_text() -> None:
    g = _tool_call_grammar()
    assert g.reads_special_tokens
    call, end = _special.encode(CALL), _special.encode(END)
    assert g.accepts(b"say xx" + call + b'{"n":1}' + end)
    assert not g.accepts(b"say xx<|call|>" + b'{"n":1}' + end)  # the text is not the token
    assert not g.accepts(b"say " + _special.encode(7) + b'{"n":1}' + end)  # another special token
    assert g.advance(g.initial(), b"say " + call[:-1]) is not None  # a viable prefix, not a dead end
    assert g.advance(g.initial(), b"say \xff") is not None
    assert g.advance(g.initial(), b"say \xff" + b"7") is None
    assert not refdecoder.compile_regex("a.*").reads_special_tokens


def test_embedded_json_matches_the_schema_compiled_alone() -> None:
    """An embedded network accepts what the spec compiled alone accepts, prefix by prefix."""
    for case in list(load_corpus("builtin"))[:40]:
        spec = reference_spec(case.spec)
        if not isinstance(spec, JsonSchema):
            continue
        try:
            alone = refdecoder.compile(spec)
        except refdecoder.MaskcertError:
            continue
        inside = _grammar({"root": SeqE((_lit("<"), EmbedE(alone.network, "json"), _lit(">")))})
        for instance in list(case.valid)[:3] + list(case.invalid)[:3]:
            text = json.dumps(instance, ensure_ascii=False).encode()
            assert inside.accepts(b"<" + text + b">") == alone.accepts(text), (case.name, text)
            for cut in range(0, len(text) + 1, max(1, len(text) // 5)):
                got = inside.advance(inside.initial(), b"<" + text[:cut]) is not None
                assert got == (alone.advance(alone.initial(), text[:cut]) is not None), (case.name, cut)


def test_text_lexemes_never_read_the_marker() -> None:
    """The invariant the encoding rests on: no front-end's text lexeme reads byte 0xFF."""
    specs: list[Spec] = [reference_spec(c.spec) for c in load_corpus("builtin")]
    specs += [
        refdecoder.Regex(r"[^a]*"),
        refdecoder.Regex(r"(?s:.)*"),
        refdecoder.Gbnf('root ::= [^"]* "\\xff"'),
    ]
    checked = 0
    for spec in specs:
        try:
            network = refdecoder.compile(spec).network
        except refdecoder.MaskcertError:
            continue
        checked += 1
        for n in network.nodes:
            if isinstance(n, Lex) and isinstance(n.lexeme, ByteDFA):
                assert not n.lexeme.reads_byte(_special.MARK), spec
    assert checked > 40


# -- token masks -----------------------------------------------------------------------------------------


def _vocab() -> Vocabulary:
    pieces: list[bytes | None] = [bytes([b]) for b in range(256)]
    pieces += [b"say ", b'{"n":', b"<|call|>", b"\xff5\xfe", None, None, None]  # 256..262
    eos = len(pieces) - 1
    return Vocabulary(
        token_bytes=tuple(pieces),
        eos_ids=frozenset({eos}),
        special_ids=frozenset({260, 261, eos}),  # 260 is ordinary text that looks like an encoding
        kind="byte",
        name="bytes+specials",
        special_names=((260, "<|junk|>"), (261, "<|call|>"), (262, "<|eot|>")),
    )


def test_masks_name_special_tokens_exactly() -> None:
    vocab = _vocab()
    call = _special.encode(261)
    end = _special.encode(260)  # a grammar naming 261 then 260
    g = _grammar(
        {"root": SeqE((_lit("say "), SpecialE(frozenset({261})), _lit("ok"), SpecialE(frozenset({260}))))}
    )
    tg = refdecoder.TokenGrammar(g, vocab)
    s = tg.advance(tg.initial(), 256)  # "say "
    assert s is not None
    assert tg.allowed_ids(s) == [261]  # the special token, not its text, not a raw 0xFF
    assert not tg.is_allowed(s, 258) and not tg.is_allowed(s, 0xFF)
    assert "0xFF" in tg.check(s, 0xFF)[1]
    s2 = tg.advance(s, 261)
    assert s2 is not None and tg.allowed_ids(s2) == [ord("o")]
    s3 = tg.advance(tg.advance(s2, ord("o")), ord("k"))  # type: ignore[arg-type]
    assert s3 is not None and tg.allowed_ids(s3) == [260]
    assert g.advance(g.initial(), b"say " + call + b"ok" + end) is not None
    for state in (tg.initial(), s, s2, s3):
        assert (tg.mask(state) == tg.mask_bruteforce(state)).all()
        assert (tg.mask_walk(state) == tg.mask_bruteforce(state)).all()
    # a grammar without special tokens still sees them as never text
    plain = refdecoder.TokenGrammar(refdecoder.compile_regex("say ok"), vocab)
    assert not plain.reads_special_tokens and not plain.is_allowed(plain.advance(plain.initial(), 256), 261)  # type: ignore[arg-type]


def test_a_token_named_as_a_terminal_but_held_as_text_is_refused() -> None:
    """Id 5 is an ordinary byte token of this vocabulary (llguidance's ``<[5]>`` would allow it by id
    where named and as ``\x05`` in text): one token with two byte readings is refused, on this
    vocabulary only, naming the token; over a vocabulary where every named id is special it compiles."""
    vocab = _vocab()
    g = _grammar({"root": SeqE((_lit("say "), SpecialE(frozenset({261})), SpecialE(frozenset({CALL}))))})
    assert g.named_token_ids == frozenset({261, CALL})
    with pytest.raises(refdecoder.Unsupported) as e:
        refdecoder.TokenGrammar(g, vocab)
    assert e.value.keyword == "special token" and e.value.where == f"<[{CALL}]>"
    assert "ordinary text" in e.value.reason
    ok = _grammar({"root": SeqE((_lit("say "), SpecialE(frozenset({261, 260}))))})
    refdecoder.TokenGrammar(ok, vocab)
    refdecoder.TokenGrammar(ok, vocab.special_token_view)  # there 261 is spelled by its encoding: not text


def test_named_ids_of_a_lexeme() -> None:
    """The ids a lexeme names are read off its encodings; a digit loop (any special token) is None."""
    assert _special.named_ids(_special.special_dfa([1, 12, 300_000])) == frozenset({1, 12, 300_000})
    anything = ByteDFA.build(
        {
            0: {_special.MARK: 1},
            1: {d: 2 for d in range(0x30, 0x3A)},
            2: {**{d: 2 for d in range(0x30, 0x3A)}, _special.END: 3},
        },
        0,
        [3],
    )
    assert _special.named_ids(anything) is None
    text = ByteDFA.build({0: {ord("a"): 1}}, 0, [1])
    assert _special.named_ids(text) == frozenset()


def test_one_lifting_rule_for_vocabularies_and_masks() -> None:
    """``Vocabulary.special_token_view`` (what certify segments with) is refdecoder's ``SpecialView``,
    and token masks do not lift it a second time: a grammar gives the same masks over either."""
    from refdecoder._tokens import SpecialView, special_view

    vocab = _vocab()
    view = vocab.special_token_view
    assert view.token_bytes == SpecialView(vocab).token_bytes
    assert special_view(view) is view
    g = _grammar({"root": SeqE((_lit("say "), SpecialE(frozenset({261})), _lit("ok")))})
    over_vocab, over_view = refdecoder.TokenGrammar(g, vocab), refdecoder.TokenGrammar(g, view)
    s = over_vocab.initial()
    for token in (256, 261, ord("o")):
        assert (over_vocab.mask(s) == over_view.mask(s)).all()
        nxt = over_vocab.advance(s, token)
        assert nxt is not None
        s = nxt
