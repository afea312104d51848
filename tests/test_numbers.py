"""NumberPredicate and NumberLexeme against the obvious definition, by brute force.

The oracle is independent of the code under test: a text is in the language when it matches the
RFC 8259 number grammar (a regex) and its exact value ``Fraction(Decimal(text))`` satisfies the
predicate, evaluated straight from a small spec tree (keywords, ``and``/``or``/``not``).

Exhaustive checks enumerate every string over an alphabet up to a length and check
(a) ``is_final`` is exact, (b) every live prefix's ``witness`` completes it into the language,
(c) a prefix the lexeme kills has no completion in the language *up to a bounded total length*
(``GOOD_LEN``; (b) proves the other direction exactly). Hand-picked cases cover prefixes whose only
completions are long.
"""

from __future__ import annotations

import functools
import itertools
import re
import tracemalloc
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from refdecoder import Limits, _numbers
from refdecoder._lexeme import Lexeme
from refdecoder._numbers import (
    NumberConstraint,
    NumberLexeme,
    NumberPredicate,
)
from refdecoder.errors import LimitExceeded, SpecError

NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
EXAMPLES = settings().max_examples  # the loaded profile's (conftest.py)


def value_of(text: str) -> Fraction | None:
    """The exact value of a JSON number text, ``None`` if it is not one."""
    if NUMBER.fullmatch(text) is None:
        return None
    return Fraction(Decimal(text))


@functools.cache
def q(x: str) -> Fraction:
    return Fraction(Decimal(x))


# -- predicate specs: a tiny tree with an obvious meaning -----------------------------------------
# ("kw", {from_keywords args}) | ("conj", {NumberConstraint.make args}) | ("and", a, b) | ("or", a, b)
# | ("not", a). Constants are decimal strings.


def build(spec: tuple[Any, ...]) -> NumberPredicate:
    tag = spec[0]
    if tag == "kw":
        return NumberPredicate.from_keywords(**spec[1])
    if tag == "conj":
        return NumberPredicate.of([NumberConstraint.make(**spec[1])])
    if tag == "and":
        return build(spec[1]).and_(build(spec[2]))
    if tag == "or":
        return build(spec[1]).or_(build(spec[2]))
    assert tag == "not"
    return build(spec[1]).not_()


def is_int(v: Fraction) -> bool:
    return v.denominator == 1


def divides(m: str, v: Fraction) -> bool:
    return is_int(v / q(m))


def holds(spec: tuple[Any, ...], v: Fraction) -> bool:
    tag = spec[0]
    if tag == "kw":
        k = spec[1]
        checks = [
            not k.get("integer") or is_int(v),
            k.get("minimum") is None or v >= q(k["minimum"]),
            k.get("exclusive_minimum") is None or v > q(k["exclusive_minimum"]),
            k.get("maximum") is None or v <= q(k["maximum"]),
            k.get("exclusive_maximum") is None or v < q(k["exclusive_maximum"]),
            k.get("multiple_of") is None or divides(k["multiple_of"], v),
        ]
        return all(checks)
    if tag == "conj":
        k = spec[1]
        lo, hi = k.get("lo"), k.get("hi")
        checks = [
            lo is None or v > q(lo) or (v == q(lo) and not k.get("lo_excl")),
            hi is None or v < q(hi) or (v == q(hi) and not k.get("hi_excl")),
            k.get("integer") is None or is_int(v) == k["integer"],
            all(divides(m, v) for m in k.get("multiple_of", ())),
            not any(divides(m, v) for m in k.get("not_multiple_of", ())),
        ]
        return all(checks)
    if tag == "and":
        return holds(spec[1], v) and holds(spec[2], v)
    if tag == "or":
        return holds(spec[1], v) or holds(spec[2], v)
    return not holds(spec[1], v)


CONSTS = st.sampled_from(["0", "1", "-3", "2.5", "0.1", "10", "100", "0.01", "7", "-0.5", "-1", "3"])
MULTS = st.sampled_from(["1", "2", "0.5", "3", "0.25", "10", "0.01"])

keywords = st.fixed_dictionaries(
    {},
    optional={
        "integer": st.booleans(),
        "minimum": CONSTS,
        "exclusive_minimum": CONSTS,
        "maximum": CONSTS,
        "exclusive_maximum": CONSTS,
        "multiple_of": MULTS,
    },
).map(lambda k: ("kw", k))

conjunctions = st.fixed_dictionaries(
    {},
    optional={
        "lo": CONSTS,
        "lo_excl": st.booleans(),
        "hi": CONSTS,
        "hi_excl": st.booleans(),
        "integer": st.sampled_from([True, False]),
        "multiple_of": st.lists(MULTS, max_size=2).map(tuple),
        "not_multiple_of": st.lists(MULTS, max_size=2).map(tuple),
    },
).map(lambda k: ("conj", k))

specs = st.recursive(
    st.one_of(keywords, conjunctions),
    lambda sub: st.one_of(
        st.tuples(st.just("and"), sub, sub),
        st.tuples(st.just("or"), sub, sub),
        st.tuples(st.just("not"), sub),
    ),
    max_leaves=3,
)


def build_or_reject(spec: tuple[Any, ...]) -> NumberPredicate:
    try:
        return build(spec)
    except LimitExceeded:
        assume(False)
        raise


# -- brute force --------------------------------------------------------------------------------


def numbers_upto(digits: str, maxlen: int, exp_digits: int = 2) -> list[str]:
    """Every RFC 8259 number text over ``digits`` (plus ``-.eE+``) of length <= maxlen whose
    exponent has at most ``exp_digits`` digits (longer exponents only slow the oracle down; the
    hand-picked and long-number tests cover them)."""
    nonzero = [d for d in digits if d != "0"]
    runs = {n: ["".join(p) for p in itertools.product(digits, repeat=n)] for n in range(maxlen)}
    out = []
    for sign in ("", "-"):
        room = maxlen - len(sign)
        ints = (["0"] if "0" in digits else []) + [
            f + s for n in range(room) for f in nonzero for s in runs[n]
        ]
        for i in ints:
            r1 = room - len(i)
            fracs = [""] + ["." + s for n in range(1, r1) for s in runs[n]]
            for fr in fracs:
                r2 = r1 - len(fr)
                exps = [""] + [
                    e + sg + s
                    for e in "eE"
                    for sg in ("", "+", "-")
                    for n in range(1, min(r2 - len(sg), exp_digits + 1))
                    for s in runs[n]
                ]
                out += [sign + i + fr + ex for ex in exps]
    return out


@functools.cache
def valued_numbers(digits: str, maxlen: int) -> tuple[tuple[str, Fraction], ...]:
    out = []
    for text in numbers_upto(digits, maxlen):
        v = value_of(text)
        assert v is not None
        out.append((text, v))
    return tuple(out)


def check_witness(lex: NumberLexeme, spec: tuple[Any, ...], prefix: str, state: Any) -> None:
    suffix = lex.witness(state).decode()
    if not suffix and lex.is_final(state):
        return  # finality is checked against the oracle separately
    text = prefix + suffix
    v = value_of(text)
    assert v is not None, f"witness {text!r} for {prefix!r} is not a number"
    assert holds(spec, v), f"witness {text!r} for {prefix!r} does not satisfy the predicate"


def exhaustive(spec: tuple[Any, ...], digits: str, lex_len: int, good_len: int) -> None:
    pred = build_or_reject(spec)
    if pred.is_empty():
        with pytest.raises(ValueError):
            NumberLexeme(pred)
        for text in numbers_upto(digits, min(good_len, 4)):
            v = value_of(text)
            assert v is not None and not holds(spec, v), f"{text!r} satisfies an empty predicate"
        return
    lex = NumberLexeme(pred)
    verdict: dict[Fraction, bool] = {}
    good = set()
    for text, v in valued_numbers(digits, good_len):
        ok = verdict.get(v)
        if ok is None:
            ok = verdict[v] = holds(spec, v)
        if ok:
            good.add(text)
    live = {g[:i] for g in good for i in range(len(g) + 1)}
    alphabet = "-" + digits + ".eE+"
    stack: list[tuple[str, Any]] = [("", lex.start())]
    while stack:
        prefix, state = stack.pop()
        v = value_of(prefix)
        assert lex.is_final(state) == (v is not None and holds(spec, v)), f"is_final({prefix!r})"  # (a)
        check_witness(lex, spec, prefix, state)  # (b)
        for ch in alphabet:
            text = prefix + ch
            nxt = lex.step(state, ord(ch))
            if nxt is None:
                assert text not in live, f"{text!r} was killed but {text!r}... is in the language"  # (c)
            else:
                hash(nxt)
                assert lex.step(state, ord(ch)) == nxt
                if len(text) <= lex_len:
                    stack.append((text, nxt))


@settings(max_examples=EXAMPLES)
@given(spec=specs, extra=st.lists(st.sampled_from("123456789"), min_size=1, max_size=2, unique=True))
def test_exhaustive_small_alphabet(spec: tuple[Any, ...], extra: list[str]) -> None:
    """All strings of length <= 4 over ``-0XY.eE+``; completions searched up to length 6."""
    exhaustive(spec, "0" + "".join(sorted(extra)), lex_len=4, good_len=6)


FIXED = [
    ("kw", {}),
    ("kw", {"integer": True}),
    ("kw", {"multiple_of": "0.25", "exclusive_minimum": "-1", "maximum": "10"}),
    ("conj", {"not_multiple_of": ("2", "3"), "lo": "-10", "hi": "10"}),
    ("not", ("kw", {"multiple_of": "0.5", "minimum": "-3", "maximum": "7"})),
]


@pytest.mark.parametrize("spec", FIXED, ids=repr)
def test_exhaustive_full_alphabet(spec: tuple[Any, ...]) -> None:
    """All strings of length <= 3 over ``-0123456789.eE+``, completions up to length 4."""
    exhaustive(spec, "0123456789", lex_len=3, good_len=4)


number_like = st.from_regex(r"-?(0|[1-9][0-9]{0,10})(\.[0-9]{1,10})?([eE][+-]?[0-9]{1,4})?", fullmatch=True)


@settings(max_examples=EXAMPLES)
@given(spec=specs, text=st.one_of(st.text(st.sampled_from("-0123456789.eE+"), max_size=14), number_like))
def test_random_walks_stay_trim(spec: tuple[Any, ...], text: str) -> None:
    """Along longer random texts, every live prefix has a valid witness and finality is exact."""
    pred = build_or_reject(spec)
    assume(not pred.is_empty())
    lex = NumberLexeme(pred)
    state: Any = lex.start()
    for i, ch in enumerate(text):
        state = lex.step(state, ord(ch))
        if state is None:
            return
        prefix = text[: i + 1]
        check_witness(lex, spec, prefix, state)
        v = value_of(prefix)
        assert lex.is_final(state) == (v is not None and holds(spec, v))


def _walk(
    pred: NumberPredicate, canonical: bool, texts: list[str], share: bool, wide: bool = True
) -> list[list[Any]]:
    """The states of each text read by one lexeme from fresh memo tables, one text after another (so
    later texts read what earlier ones memoized), steps shared by future or not, wide intervals
    decided without a search or not."""
    _numbers._MEMOS.clear()
    lex = NumberLexeme(pred, canonical, share_futures=share, decide_wide=wide)
    walks: list[list[Any]] = []
    for text in texts:
        out: list[Any] = []
        state: Any = lex.start()
        for ch in text:
            state = lex.step(state, ord(ch))
            out.append(state if state is None else (state, lex.is_final(state)))
            if state is None:
                break
        walks.append(out)
    _numbers._MEMOS.clear()
    return walks


digit_heavy = st.from_regex(r"-?[1-9][0-9]{0,30}(\.[0-9]{0,6})?([eE][+-]?[0-9]{0,3})?", fullmatch=True)


@settings(max_examples=EXAMPLES)
@given(spec=specs, canonical=st.booleans(), texts=st.lists(st.one_of(digit_heavy, number_like), max_size=4))
def test_steps_shared_by_future_equal_steps_per_state(
    spec: tuple[Any, ...], canonical: bool, texts: list[str]
) -> None:
    """The fast path (alive sets memoized by ``future_key``, one table per key) against the slow one
    (every state decides its own successors): the same states, finality included, along every text."""
    pred = build_or_reject(spec)
    assume(not pred.is_empty())
    assert _walk(pred, canonical, texts, share=True) == _walk(pred, canonical, texts, share=False)


@settings(max_examples=EXAMPLES)
@given(spec=specs, canonical=st.booleans(), texts=st.lists(st.one_of(digit_heavy, number_like), max_size=4))
def test_wide_intervals_skip_the_search_with_the_same_steps(
    spec: tuple[Any, ...], canonical: bool, texts: list[str]
) -> None:
    """The shortcut of ``_every_mantissa_viable`` against the search it skips: the same states,
    finality included, along every text."""
    pred = build_or_reject(spec)
    assume(not pred.is_empty())
    assert _walk(pred, canonical, texts, share=False, wide=True) == _walk(
        pred, canonical, texts, share=False, wide=False
    )


@settings(max_examples=EXAMPLES)
@given(spec=specs, mantissas=st.lists(st.integers(1, 10**25), min_size=1, max_size=8))
def test_wide_intervals_have_a_point_for_every_mantissa(spec: tuple[Any, ...], mantissas: list[int]) -> None:
    """Where the shortcut says every mantissa has completions, the search finds a point for each
    drawn one, in every variant the lexeme asks (closed or open on the left; integer texts with no
    exponent below 0)."""
    pred = build_or_reject(spec)
    assume(not pred.is_empty())
    lex = NumberLexeme(pred)
    for i in range(len(lex._conjs)):
        for neg in (False, True):
            pos = lex._pos[i][neg]
            integer = lex._spell[i] == "integer"
            if not _numbers._every_mantissa_viable(lex._lats[i], pos, integer):
                continue
            assert pos is not None
            for D in mantissas:
                variants = [{"e_floor": 0}] if integer else [{}, {"open_left": True}]
                for kw in variants:
                    assert _numbers._mantissa_find(lex._lats[i], pos, D, pick=False, **kw) is not None, (
                        D,
                        kw,
                    )


@pytest.mark.parametrize(
    "kw",
    [
        {"integer": True, "multiple_of": "3"},
        {"multiple_of": "0.5", "minimum": "7"},
        {"minimum": "-1.5", "exclusive_maximum": "100"},
        {"exclusive_minimum": "0", "maximum": "1e21"},
    ],
    ids=repr,
)
def test_wide_intervals_read_long_mantissas_without_a_search(kw: dict[str, Any], monkeypatch: Any) -> None:
    """The shortcut is taken: a 30-digit mantissa of a number whose interval holds a whole decade
    (or has no upper bound) is read without one mantissa search."""
    _numbers._MEMOS.clear()
    calls: list[int] = []
    real = _numbers._mantissa_find

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_numbers, "_mantissa_find", counted)
    values: dict[str, Any] = {k: v if k == "integer" else q(v) for k, v in kw.items()}
    lex = NumberLexeme(NumberPredicate.from_keywords(**values))
    state: Any = lex.start()
    for ch in "123456789" * 3 + "012":
        state = lex.step(state, ord(ch))
        assert state is not None
    assert calls == []


BOUNDED = [
    ("kw", {"integer": True, "maximum": "100"}),
    ("kw", {"integer": True, "minimum": "-50", "maximum": "5000"}),
    ("kw", {"multiple_of": "3", "minimum": "5"}),
    ("kw", {"multiple_of": "0.5", "exclusive_maximum": "1000"}),
    ("kw", {"exclusive_minimum": "10", "maximum": "12345"}),
    ("conj", {"not_multiple_of": ("2", "3"), "lo": "-10", "hi": "10"}),
    ("kw", {"integer": True}),
    ("kw", {}),
    ("kw", {"minimum": "1.5", "maximum": "1.6"}),
    ("kw", {"multiple_of": "0.5", "minimum": "0.1", "maximum": "3"}),
]
WALKS = [
    *("1111", "99999", "100", "101", "-1234", "-51", "12.5e3", "1e2", "123456789", "4999", "5001", "33"),
    *("15", "1.55", "16e-1", "2", "25e-1", "7"),
]


@pytest.mark.parametrize("canonical", [False, True])
@pytest.mark.parametrize("spec", BOUNDED, ids=repr)
def test_steps_shared_by_future_on_bounded_integer_parts(spec: tuple[Any, ...], canonical: bool) -> None:
    """The same comparisons on bounds that digits can pass (where a wrong future key or a wrong wide
    interval would show)."""
    pred = build_or_reject(spec)
    slow = _walk(pred, canonical, WALKS, share=False, wide=False)
    assert _walk(pred, canonical, WALKS, share=True) == slow
    assert _walk(pred, canonical, WALKS, share=False, wide=True) == slow


def test_free_integer_parts_are_decided_once_per_byte() -> None:
    """The fast path is taken: an unbounded number reads a 40-digit integer part with one alive-set
    decision per (sign, alive set, byte) once the part is free of its digits, and the memo tables are
    those of every lexeme with the same key."""
    _numbers._MEMOS.clear()
    lex = NumberLexeme(NumberPredicate.any())
    state: Any = lex.start()
    for ch in "1234567890" * 4:
        state = lex.step(state, ord(ch))
    assert state is not None and lex.is_final(state)
    assert 0 < len(lex._by_future) <= 10
    assert NumberLexeme(NumberPredicate.any())._step_cache is lex._step_cache
    assert NumberLexeme(NumberPredicate.any(), canonical=True)._step_cache is not lex._step_cache


# -- the boolean algebra ------------------------------------------------------------------------

values = st.builds(lambda n, k: Fraction(n, 10**k), st.integers(-1200, 1200), st.integers(0, 3))


@settings(max_examples=EXAMPLES)
@given(a=specs, b=specs, vs=st.lists(values, min_size=20, max_size=40))
def test_boolean_operations_pointwise(a: tuple[Any, ...], b: tuple[Any, ...], vs: list[Fraction]) -> None:
    pa, pb = build_or_reject(a), build_or_reject(b)
    try:
        both, either, neither = pa.and_(pb), pa.or_(pb), pa.not_()
    except LimitExceeded:
        assume(False)
        raise
    for v in [*vs, Fraction(0), q("2.5"), q("-3"), q("0.01"), q("100")]:
        ha, hb = holds(a, v), holds(b, v)
        assert pa.contains(v) == ha
        assert both.contains(v) == (ha and hb)
        assert either.contains(v) == (ha or hb)
        assert neither.contains(v) == (not ha)
        if ha:
            assert not pa.is_empty()
    for spec, pred in ((a, pa), (("and", a, b), both), (("not", a), neither)):
        if not pred.is_empty():  # exact emptiness: a non-empty predicate has a number in it
            lex = NumberLexeme(pred)
            check_witness(lex, spec, "", lex.start())


def test_any_none_and_double_negation() -> None:
    assert NumberPredicate.any().not_().is_empty()
    assert NumberPredicate.none().not_() == NumberPredicate.any()
    p = NumberPredicate.from_keywords(minimum=1, maximum=5, multiple_of="0.5")
    assert p.not_().not_() == p
    assert p.and_(p.not_()).is_empty()
    assert p.or_(p.not_()).not_().is_empty()


def test_emptiness_is_exact() -> None:
    assert NumberPredicate.from_keywords(integer=True, minimum="0.5", maximum="0.7").is_empty()
    assert not NumberPredicate.from_keywords(integer=True, minimum="0.5", maximum="1").is_empty()
    nonint = NumberPredicate.of([NumberConstraint.make(lo=5, hi=5, integer=False)])
    assert nonint.is_empty()
    both = NumberPredicate.of([NumberConstraint.make(multiple_of=["0.5"], not_multiple_of=["0.25"])])
    assert both.is_empty()  # every multiple of 0.5 is a multiple of 0.25
    # Multiples of 2 in [2, 12] that avoid 4 and 6 and 10: only 2.
    odd = NumberConstraint.make(lo=2, hi=12, multiple_of=[2], not_multiple_of=[4, 6, 10])
    assert odd is not None and not NumberPredicate.of([odd]).is_empty()
    assert NumberConstraint.make(lo=3, hi=12, multiple_of=[2], not_multiple_of=[4, 6, 10]) is None
    # multipleOf 0.5 and 0.3 is multipleOf 1.5.
    lcm = NumberPredicate.from_keywords(multiple_of=["0.5", "0.3"])
    assert lcm.conjunctions[0].multiple_of == q("1.5")


def test_simplification_merges_and_canonicalizes() -> None:
    a = NumberPredicate.from_keywords(minimum=0, maximum=5)
    b = NumberPredicate.from_keywords(exclusive_minimum=5, maximum=9)
    assert a.or_(b) == NumberPredicate.from_keywords(minimum=0, maximum=9)
    c = NumberPredicate.from_keywords(integer=True, minimum="0.5", exclusive_maximum=4)
    assert c == NumberPredicate.from_keywords(integer=True, minimum=1, maximum=3)
    assert a.or_(a.and_(b)) == a
    hash(a.or_(b))


def test_limits() -> None:
    many = NumberPredicate.none()
    for k in range(Limits().number_predicate_conjunctions // 2 + 1):
        many = many.or_(NumberPredicate.from_keywords(minimum=3 * k, maximum=3 * k + 1))
    with pytest.raises(LimitExceeded):
        many.or_(many.not_().and_(NumberPredicate.from_keywords(multiple_of="0.5"))).not_().not_()
    with pytest.raises(LimitExceeded):
        NumberConstraint.make(not_multiple_of=[2, 3, 5, 7, 11, 13, 17, 19, 23])


def test_constants_are_exact_decimals() -> None:
    p = NumberPredicate.from_keywords(maximum=0.1)  # the float 0.1 means the decimal 0.1
    assert p.contains(q("0.1")) and not p.contains(q("0.10000000000000001"))
    assert NumberPredicate.from_keywords(multiple_of=Decimal("0.01")).contains(q("19.99"))
    for bad in (float("inf"), float("nan"), Decimal("NaN"), Fraction(1, 3), True, "abc"):
        with pytest.raises(SpecError):
            NumberPredicate.from_keywords(minimum=bad)
    for bad_m in (0, -1, "-0.5"):
        with pytest.raises(SpecError):
            NumberPredicate.from_keywords(multiple_of=bad_m)


# -- the lexeme: hand-picked cases --------------------------------------------------------------


def run(lex: NumberLexeme, text: str) -> tuple[str, Any]:
    state: Any = lex.start()
    for ch in text:
        state = lex.step(state, ord(ch))
        if state is None:
            return "dead", None
    return ("final" if lex.is_final(state) else "live"), state


E20 = Fraction(10**20)
HARD = [
    # (keywords, [(prefix, verdict)]) where the only completions can be long.
    (
        {"minimum": E20},
        [
            ("1", "live"),
            ("-", "dead"),
            ("1e1", "live"),
            ("1e-", "dead"),
            ("0", "live"),
            ("1e2", "live"),
            ("0.000", "live"),
        ],
    ),
    (
        {"minimum": E20, "maximum": E20},
        [
            ("1", "live"),
            ("1000", "live"),
            ("2", "dead"),
            ("1e", "live"),
            ("1e2", "live"),
            ("1e3", "dead"),
            ("1e20", "final"),
            ("1e200", "dead"),
            ("1e020", "final"),
            ("0.1e21", "final"),
            ("10.0", "live"),
            ("10.01", "dead"),
            ("100000000000000000000", "final"),
            ("1e+20", "final"),
            ("1E+020", "final"),
            ("1e-", "dead"),
            ("0.0", "live"),
        ],
    ),
    (
        {"exclusive_minimum": 0},
        [("-", "dead"), ("0.000", "live"), ("0", "live"), ("0e", "dead"), ("0.0001e-99", "final")],
    ),
    (
        {"integer": True, "multiple_of": "0.3"},
        [
            ("1", "live"),
            ("0.1", "live"),
            ("1e", "dead"),
            ("1.5e", "live"),
            ("1.5e0", "live"),
            ("1.5e-", "dead"),
            ("3.3e1", "final"),
            ("0", "final"),
            ("7", "live"),
            ("0.3", "live"),
            ("0.3e", "live"),
            ("0.3e0", "live"),
            ("0.3e1", "final"),
            ("-0.0", "final"),
        ],
    ),
    (
        {"maximum": "-1e-30"},
        [
            ("-0.000", "live"),
            ("0", "dead"),
            ("-1e-30", "final"),
            ("-1e-31", "dead"),
            ("-1e-3", "final"),
            ("-1e-300", "dead"),
            ("-", "live"),
        ],
    ),
    (
        {"multiple_of": "7", "minimum": 1, "maximum": 10},
        [("7", "final"), ("70e-1", "final"), ("0.7e", "live"), ("8", "dead"), ("1", "dead")],
    ),
    (
        {"multiple_of": "0.0001"},
        [("0.0075", "final"), ("0.00751", "live"), ("0.00751e", "live"), ("0.00751e-", "dead")],
    ),
    (
        {"maximum": 100},
        [
            ("1e2", "final"),
            ("1000e-1", "final"),
            ("1.0000001e2", "dead"),
            ("1.0000001e", "live"),
            ("101", "live"),
            ("1e3", "dead"),
            ("1e0", "final"),
        ],
    ),
]


@pytest.mark.parametrize("kw,cases", HARD, ids=lambda x: repr(x)[:40])
def test_hand_picked_prefixes(kw: dict[str, Any], cases: list[tuple[str, str]]) -> None:
    lex = NumberLexeme(NumberPredicate.from_keywords(**kw))
    spec = ("kw", {k: str(v) if isinstance(v, Fraction) else v for k, v in kw.items()})
    for prefix, expected in cases:
        got, state = run(lex, prefix)
        assert got == expected, f"{prefix!r}: {got}, expected {expected}"
        if state is not None:
            check_witness(lex, spec, prefix, state)


def test_not_multiple_of_on_tight_intervals() -> None:
    spec = ("conj", {"lo": "4", "hi": "4.5", "not_multiple_of": ("2",)})
    lex = NumberLexeme(build(spec))
    for prefix, expected in [
        ("4", "live"),
        ("4.5", "final"),
        ("4.6", "dead"),
        ("4e", "dead"),
        ("45e-1", "final"),
        ("4.0", "live"),
        ("4.00", "live"),
        ("-", "dead"),
    ]:
        got, state = run(lex, prefix)
        assert got == expected, prefix
        if state is not None:
            check_witness(lex, spec, prefix, state)
    point = ("conj", {"lo": "5", "hi": "5", "not_multiple_of": ("2",)})
    lex = NumberLexeme(build(point))
    assert [run(lex, t)[0] for t in ("5", "50e-1", "0.5e1", "5.1", "4")] == [
        "final",
        "final",
        "final",
        "dead",
        "dead",
    ]


# -- JSON Schema Test Suite style cases ---------------------------------------------------------

SUITE = [
    ({"integer": True}, "1.0", True),
    ({"integer": True}, "1e2", True),
    ({"integer": True}, "-0", True),
    ({"integer": True}, "1.5e1", True),
    ({"integer": True}, "1.5", False),
    ({"integer": True}, "1e-1", False),
    ({"multiple_of": "0.0001"}, "0.0075", True),
    ({"multiple_of": "0.0001"}, "0.00751", False),
    ({"multiple_of": "1.5"}, "4.5", True),
    ({"multiple_of": "1.5"}, "35", False),
    ({"maximum": 100}, "1e2", True),
    ({"maximum": 100}, "1000e-1", True),
    ({"maximum": 100}, "1.0000001e2", False),
    ({"integer": True, "multiple_of": "0.123456789"}, "1e308", False),  # "float division = inf"
    ({"integer": True, "multiple_of": "1e-8"}, "12391239123", True),
    ({"exclusive_maximum": 3}, "3.0", False),
    ({"exclusive_minimum": "1.1"}, "1.1", False),
    ({"minimum": "-2"}, "-2.0001", False),
    ({"minimum": "-2"}, "-2", True),
]


@pytest.mark.parametrize("kw,text,ok", SUITE)
def test_suite_style(kw: dict[str, Any], text: str, ok: bool) -> None:
    pred = NumberPredicate.from_keywords(**kw)
    assert pred.contains(q(text)) == ok
    got, _ = run(NumberLexeme(pred), text)
    assert (got == "final") == ok


# -- protocol, canonical states, cost -----------------------------------------------------------


def test_lexeme_protocol_and_states() -> None:
    pred = NumberPredicate.from_keywords(minimum=1)
    lex = NumberLexeme(pred)
    assert isinstance(lex, Lexeme)
    assert lex.key == NumberLexeme(NumberPredicate.from_keywords(minimum=1)).key
    assert lex.key != NumberLexeme(NumberPredicate.from_keywords(minimum=2)).key
    assert run(lex, "1e+5")[1] == run(lex, "1e5")[1]
    assert run(lex, "1.50e")[1] == run(lex, "1.5e")[1]
    assert run(lex, "1.5e")[1] != run(lex, "15e")[1]
    with pytest.raises(ValueError):
        NumberLexeme(NumberPredicate.none())
    for bad in ("+1", ".5", "01", "1.", "--1", "1e", "1.e5", "1e+"):
        got, _ = run(lex, bad)
        assert got != "final", bad


def test_long_numbers_are_cheap() -> None:
    """Thousands of digits: per-byte work stays near-linear, no huge power of ten is built."""
    pred = NumberPredicate.from_keywords(multiple_of=7, maximum=Fraction(10**1200))
    lex = NumberLexeme(pred)
    got, state = run(lex, "7" * 1000)
    assert got == "final"
    assert lex.witness(state) == b""
    # After "1" and k zeros the reachable integers are 10^(k+E) + [0, 10^E): a multiple of 7 at most
    # 10^1200 exists exactly while k <= 1198 (E = 1 gives ten consecutive integers).
    prefix = "1" + "0" * 1198
    got, state = run(lex, prefix)
    assert got == "live"
    v = value_of(prefix + lex.witness(state).decode())
    assert v is not None and v % 7 == 0 and v <= 10**1200
    assert run(lex, "1" + "0" * 1199)[0] == "dead"
    huge = NumberPredicate.from_keywords(minimum=1)
    assert run(NumberLexeme(huge), "1e" + "9" * 3000)[0] == "final"
    capped = NumberLexeme(NumberPredicate.from_keywords(maximum="1e400"))
    assert run(capped, "1e" + "9" * 3000)[0] == "dead"
    assert run(capped, "1e-" + "9" * 3000)[0] == "final"
    # Cheap: an exponent is judged as it is read (dead by its third digit, the rest never read), and
    # no huge power of ten is built (the longest walks' peak memory stays a few MiB).
    assert run(capped, "1e999")[0] == "dead"
    tracemalloc.start()
    try:
        run(NumberLexeme(pred), "7" * 1000)
        run(NumberLexeme(huge), "1e" + "9" * 3000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


def test_huge_constants_are_refused_cheaply() -> None:
    with pytest.raises(LimitExceeded) as big:
        NumberPredicate.from_keywords(minimum="1e999999999")
    with pytest.raises(LimitExceeded) as fine:
        NumberPredicate.from_keywords(multiple_of=Decimal("1e-999999999"))
    # Cheaply: refused from the written length, before 10**exponent is built (not from its bit size).
    for e in (big.value, fine.value):
        assert e.limit == "number_constant_bits" and "is too long" in str(e.value), e


@pytest.mark.parametrize("kw,cases", HARD, ids=lambda x: repr(x)[:40])
def test_bytes_outside_the_alphabet_are_never_read(kw: dict[str, Any], cases: list[tuple[str, str]]) -> None:
    """``NumberLexeme.alphabet`` (the parser's live-byte shortcut) holds every byte ``step`` reads."""
    lex = NumberLexeme(NumberPredicate.from_keywords(**kw))
    outside = [b for b in range(256) if b not in lex.alphabet]
    for prefix, _ in cases:
        for cut in range(len(prefix) + 1):
            got, state = run(lex, prefix[:cut])
            if state is not None:
                assert all(lex.step(state, b) is None for b in outside), prefix[:cut]


# -- token tables: the alphabet sub-trie against the plain trie walk ----------------------------


@functools.cache
def _number_tries() -> tuple[Any, ...]:
    """Tries dense in number bytes: every string of up to three of ``0 1 9 - + . e E``, the same with
    a byte outside the number alphabet appended or inside (``7,`` ``1a2`` ``e "``), and the toy
    tokenizers' own vocabularies."""
    import tokenizers_matrix as tm
    from refdecoder._tokens import token_trie

    chars = "019-+.eE"
    strings = ["".join(p) for n in (1, 2, 3) for p in itertools.product(chars, repeat=n)]
    strings += [s + t for s in strings[:80] for t in (",", "a", " ", "}")] + [
        "1a2",
        '0"',
        "x",
        "é",
        "7\u00e9",
    ]

    dense = tm.from_tokens(list(dict.fromkeys(strings)), name="number-dense")
    return tuple(token_trie(v) for v in (dense, tm.get("bpe"), tm.get("sp-bpe-bytefallback")))


@settings(max_examples=EXAMPLES)
@given(
    spec=specs,
    canonical=st.booleans(),
    text=st.one_of(digit_heavy, number_like).map(lambda s: s[: len(s) // 2]),
    which=st.integers(0, 2),
)
def test_token_tables_from_the_alphabet_subtrie_are_the_walks(
    spec: tuple[Any, ...], canonical: bool, text: str, which: int
) -> None:
    """``_LexemeTables._build_lexeme`` walks only the nodes whose bytes are all in the number
    alphabet and finds the other uncertain roots by their parents; the plain preorder walk of the
    whole trie (``_build_lexeme_walk``) is the definition: the same accepted tokens, uncertain
    intervals and count, from the start state and from a state inside a number."""
    pred = build_or_reject(spec)
    assume(not pred.is_empty())
    lex = NumberLexeme(pred, canonical)
    state: Any = lex.start()
    for ch in text:
        nxt = lex.step(state, ord(ch))
        if nxt is None:
            break
        state = nxt
    tables = _number_tries()[which].lexeme_tables
    fast, slow = tables._build_lexeme(lex, state), tables._build_lexeme_walk(lex, state)
    assert fast.accepted.tobytes() == slow.accepted.tobytes()
    assert fast.uncertain == slow.uncertain
    assert fast.num_uncertain == slow.num_uncertain
