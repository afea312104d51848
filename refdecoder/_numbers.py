"""JSON numbers under numeric constraints, decided exactly: :class:`NumberPredicate`, :class:`NumberLexeme`.

Theory of operation
-------------------
**Values.** A JSON number text (RFC 8259 §6: ``[ "-" ] int [ frac ] [ exp ]``) denotes an exact decimal
rational; we compute with :class:`fractions.Fraction` and never with floats. Every schema constant is a
*decimal* rational too: floats are read from their shortest ``repr`` (``Fraction(repr(x))``), Decimals
and strings exactly; non-finite or non-decimal constants are refused (:class:`SpecError`). Because all
constants are decimals, "some rational satisfies the predicate" and "some JSON number satisfies it" are
the same statement, which is what :meth:`NumberPredicate.is_empty` decides.

**Predicates** are in disjunctive normal form. A :class:`NumberConstraint` (one conjunction) is an
interval, at most one required modulus ``m`` (``multipleOf``; several fold into their rational lcm
``lcm(a/b, c/d) = lcm(a, c)/gcd(b, d)``) and a few forbidden moduli ``f`` ("not a multiple of f").
``type: integer`` is "multiple of 1" and "non-integer" is "not a multiple of 1". Canonical form: with
``m`` the bounds are tightened to closed lattice points and each ``f`` is replaced by ``lcm(m, f)``
(within ``mZ`` they forbid the same points); a forbidden modulus that is a multiple of another one is
redundant. Emptiness is exact (:func:`_interval_find`): without ``m`` a non-degenerate interval always
has a non-multiple (non-multiples are dense), a point is checked directly; with ``m`` the points are
``k*m`` for ``k`` in an integer range, and "k divisible by no ``q_i = f_i/m``" is counted by
inclusion-exclusion over the ``q_i``.

**The lexeme** reads a number byte by byte. After a prefix, the values of its completions are:

* sign still open (nothing read): every decimal;
* mantissa digits ``D`` read, exponent not begun (``-``, ``0``, ``12``, ``12.``, ``1.25``; ``D`` is all
  mantissa digits as one integer): ``s * U(D)`` where ``U(D) = ⋃_{E ∈ Z} 10^E [D, D+1)`` (more
  digits, a fraction and any exponent), intersected with the decimals. The pieces are disjoint and
  increasing in ``E``. For ``D = 0`` (``0``, ``-``, ``0.00``) it is all of ``s * [0, ∞)``;
* exponent begun (``1.5e``, ``1.5e-``, ``1.5e-0``): ``s * M * 10^E`` for the fixed mantissa value
  ``M`` and ``E`` ranging over a set ``S``: all integers, all ``E >= 0`` or ``E <= 0``, or
  ``±{X*10^j + r : j >= 0, 0 <= r < 10^j}`` after exponent digits of value ``X`` (``X = 0``: all).

Per conjunction (mapped to ``x = |value| > 0`` by reflecting the interval when ``s = -1``; the value 0
is checked on its own):

* exponent phases: every atom is an interval in ``E``: ``lo <= M 10^E <= hi`` bounds ``E`` by exact
  integer logarithms; ``M 10^E ∈ mZ`` iff ``E >= t(M, m)`` where, with ``M/m = p/q`` reduced, there is
  no such ``E`` if ``q`` has a prime other than 2 and 5, else ``t = max(v2 q, v5 q) - min(v2 p, v5 p)``;
  a forbidden ``f`` gives ``E < t(M, f)``. So the question is whether an integer interval meets ``S``,
  answered by walking the ``j`` blocks of ``S`` (finitely many, the interval's ends are small numbers);
* mantissa phases: the pieces ``10^E [D, D+1)`` that meet the interval form a range ``E_lo..E_hi``.
  Without ``m`` a piece strictly inside the range is wholly inside the interval and non-degenerate,
  hence viable; otherwise only the two end pieces need the exact interval test. With ``m = μ 10^τ``
  (``μ`` not divisible by 10): for ``E <= τ`` the only multiple a piece can hold is its left end
  ``D 10^E`` (``k m 10^-E`` is an integer in ``[D, D+1)``), which is an ``E``-interval test as above;
  for ``E > τ`` the pieces are tested one by one and the walk stops once a whole piece spans
  ``(lcm(q_i) + 1) m``, because it then holds ``k ≡ 1 (mod lcm q_i)``. Each step is thus
  ``O(digits)`` big-integer work plus a constant number of pieces.

``witness(state)`` turns the element found by the same search into a suffix, and ``step`` returns
``None`` exactly when no conjunction can still be met (trimness).

**Spellings.** Draft-04's ``integer`` is "a JSON number without a fraction or exponent part"
(draft-zyp-json-schema-04 §3.5): a property of the text, so ``1.0`` is not one. A conjunction may
therefore require a spelling (``NumberConstraint.spelling``): ``"integer"`` texts read only a sign and
digits, and after digits ``D`` their values are the integers of the pieces ``10^E [D, D+1)`` with
``E >= 0`` (``_mantissa_find`` with ``e_floor=0``; the conjunction's modulus is an integer, so every
point it finds is one); ``"decimal"`` texts need a fraction or an exponent, which changes finality only
(every completion of an integer text has a decimal twin of the same value, ``D...`` and ``D....0``).
The Boolean algebra treats the spelling as one more atom: two spellings intersect to nothing, and the
complement of a spelled conjunction includes every text of the other spelling.

**Canonical spellings** (``NumberLexeme(p, canonical=True)``, ``JsonProfile.number_spelling``): no
minus on a zero, fraction digits ending in a non-zero digit, an exponent ``[eE]-?[1-9][0-9]*``, and
conjunctions whose modulus is an integer or that are one integer point spelled ``"integer"``
(:func:`integers_spelled`; ``const``/``enum`` numbers are points, so ``const: 5`` is written ``5``
and ``const: 1.50`` as ``1.5``, ``15e-1``, ...). This is not
a product with a DFA of canonical texts: that DFA's state is a function of ours (the last fraction
digit is ``D % 10``, a negative zero is ``neg`` with ``D == 0``), and a product of two trim automata
need not be trim (``1.50`` under ``minimum = maximum = 1.5``: the number wants to end, the spelling
wants a non-zero digit). So the rules enter the same decisions: a byte rule in ``step``
(:func:`_canonical_byte`: no ``+``, no leading exponent zero, no exponent after ``-0`` or after a
fraction ending in 0), finality (no ``-0``, ``-0.0``, ``1.0``), and viability on the values the
canonical completions still reach, which differ from the ones above in three places only:

* a zero mantissa (``-``, ``-0``, ``0.``, ``0.00``) reaches 0 only as ``0`` itself: elsewhere the search
  needs a non-zero point;
* after a point or a fraction ending in 0, some non-zero digit must follow: the values are
  ``10^E (D, D+1)``, the pieces without their left ends (``_mantissa_find(open_left=True)``); every
  other mantissa prefix reaches all of ``U(D)`` (``D``, then ``.`` and the digits of the rest if any,
  then ``e`` and the exponent if it is not 0);
* after ``e`` the exponent is not 0, after ``e-`` it is at most -1 (``_exp_pick(nonzero=True)``).

A ``"decimal"`` conjunction's twin of an integer text is ``T0e-1`` (``0e1`` for 0). Witnesses are
built from the same searches and are canonical: digits from ``_split`` never end in 0, exponents are
written only when not 0.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import cached_property
from typing import Any, NamedTuple, TypeAlias

from refdecoder._limits import current_limits
from refdecoder.errors import LimitExceeded, SpecError

__all__ = [
    "SPELLINGS",
    "NumberConstraint",
    "NumberPredicate",
    "NumberLexeme",
    "CANONICAL_NUMBER_REGEX",
    "integers_spelled",
    "any_number_dfa",
]

# Size caps, read from the running compilation's ``Limits`` (``current_limits``): conjunctions of a
# predicate after simplification (``number_predicate_conjunctions``; ``not_`` multiplies them out),
# moduli one conjunction may forbid (``number_not_multiple_of``; inclusion-exclusion costs ``2**n``
# terms), bits of the numerator and denominator of every constant and lcm (``number_constant_bits``).

Number: TypeAlias = "int | float | Decimal | Fraction | str"

#: The spellings a conjunction may require of a number text (``None``: any): ``"integer"`` — no fraction
#: and no exponent part (``-?(0|[1-9][0-9]*)``, draft-04's "integer": "a JSON number without a fraction
#: or exponent part", draft-zyp-json-schema-04 §3.5); ``"decimal"`` — a fraction or an exponent part.
SPELLINGS = ("integer", "decimal")

_ZERO = Fraction(0)
_ONE = Fraction(1)
_LOG10_2 = 0.30102999566398120


# -- exact decimal arithmetic -----------------------------------------------------------------------


def _v(n: int, p: int) -> int:
    """The exponent of prime ``p`` in ``n > 0``."""
    if p == 2:
        return (n & -n).bit_length() - 1
    k = 0
    while n % p == 0:
        n //= p
        k += 1
    return k


def _is_decimal(q: Fraction) -> bool:
    d = q.denominator
    d >>= _v(d, 2)
    while d % 5 == 0:
        d //= 5
    return d == 1


def _exact(value: Number, keyword: str, where: str) -> Fraction:
    """A schema constant as an exact decimal rational (floats through their shortest repr)."""
    if isinstance(value, bool):
        raise SpecError(f"{keyword} is the boolean {value!r}", where or "/", "a number")
    if isinstance(value, Fraction):
        q = value
    elif isinstance(value, int):
        q = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(f"{keyword} is {value!r}", where or "/", "a finite number")
        q = Fraction(repr(value))
    elif isinstance(value, (Decimal, str)):
        try:
            dec = Decimal(value)
        except InvalidOperation:
            raise SpecError(f"{keyword} is {value!r}", where or "/", "a number") from None
        if not dec.is_finite():
            raise SpecError(f"{keyword} is {value!r}", where or "/", "a finite number")
        sign, digits, exponent = dec.as_tuple()
        assert isinstance(exponent, int)
        max_bits = current_limits().number_constant_bits
        if len(digits) + abs(exponent) > max_bits // 3:  # before building 10**exponent
            raise LimitExceeded("number_constant_bits", f"{keyword} {value!r} is too long", max_bits)
        q = Fraction(dec)
    else:
        raise SpecError(f"{keyword} is {value!r}", where or "/", "a number")
    if not _is_decimal(q):
        raise SpecError(
            f"{keyword} is {q}, which has no finite decimal expansion",
            where or "/",
            "a decimal number (JSON numbers and schema constants are decimals)",
        )
    _check_size(q, keyword)
    return q


def _check_size(q: Fraction, what: str) -> None:
    bits = max(q.numerator.bit_length(), q.denominator.bit_length())
    max_bits = current_limits().number_constant_bits
    if bits > max_bits:
        raise LimitExceeded("number_constant_bits", f"{what} needs {bits} bits", max_bits)


def _lcm(a: Fraction, b: Fraction) -> Fraction:
    """The least positive rational whose integer multiples are exactly ``aZ ∩ bZ`` (a, b > 0)."""
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


def _is_multiple(x: Fraction, m: Fraction) -> bool:
    return (x / m).denominator == 1


def _floor(q: Fraction) -> int:
    return q.numerator // q.denominator


def _ceil(q: Fraction) -> int:
    return -((-q.numerator) // q.denominator)


def _pow10(e: int) -> Fraction:
    return Fraction(10**e) if e >= 0 else Fraction(1, 10**-e)


def _pow10_le(e: int, n: int, d: int) -> bool:
    """``10**e <= n/d``."""
    return 10**e * d <= n if e >= 0 else d <= n * 10**-e


def _max_exp_le(r: Fraction) -> int:
    """The largest integer ``E`` with ``10**E <= r`` (``r > 0``), by exact integer comparison."""
    n, d = r.numerator, r.denominator
    e = int((n.bit_length() - d.bit_length()) * _LOG10_2)
    while not _pow10_le(e, n, d):
        e -= 1
    while _pow10_le(e + 1, n, d):
        e += 1
    return e


def _is_pow10(e: int, r: Fraction) -> bool:
    if e >= 0:
        return r.denominator == 1 and r.numerator == 10**e
    return r.numerator == 1 and r.denominator == 10**-e


def _min_exp_ge(r: Fraction) -> int:
    """The smallest ``E`` with ``10**E >= r``."""
    e = _max_exp_le(r)
    return e if _is_pow10(e, r) else e + 1


def _min_exp_above(r: Fraction, strict: bool) -> int:
    """The smallest ``E`` with ``10**E > r`` (strict) or ``>= r``."""
    return _max_exp_le(r) + 1 if strict else _min_exp_ge(r)


def _max_exp_below(r: Fraction, strict: bool) -> int:
    """The largest ``E`` with ``10**E < r`` (strict) or ``<= r``."""
    return _min_exp_ge(r) - 1 if strict else _max_exp_le(r)


def _mult_threshold(mant: Fraction, m: Fraction) -> int | None:
    """The least ``t`` such that ``mant * 10**E`` is a multiple of ``m`` exactly when ``E >= t``.

    ``None`` when it never is (``mant/m = p/q`` reduced with a prime other than 2, 5 in ``q``).
    ``mant`` and ``m`` are non-zero.
    """
    r = mant / m
    p, q = abs(r.numerator), r.denominator
    a2 = _v(q, 2)
    rest = q >> a2
    a5 = 0
    while rest % 5 == 0:
        rest //= 5
        a5 += 1
    if rest != 1:
        return None
    if q > 1:
        return max(a2, a5)
    return -min(_v(p, 2), _v(p, 5))


def _split(x: Fraction) -> tuple[int, int]:
    """``x > 0`` decimal as ``(a, e)`` with ``x = a * 10**e`` and ``a`` not divisible by 10."""
    d = x.denominator
    k = max(_v(d, 2), _v(d, 5))
    a = x.numerator * 10**k // d
    e = -k
    while a % 10 == 0:
        a //= 10
        e += 1
    return a, e


def _render(x: Fraction) -> str:
    """A JSON number text for the decimal ``x >= 0`` (plain when short, else with an exponent)."""
    if x == 0:
        return "0"
    a, e = _split(x)
    digits = str(a)
    if 0 <= e <= 4:
        return digits + "0" * e
    if -8 <= e < 0:
        if len(digits) > -e:
            return digits[:e] + "." + digits[e:]
        return "0." + "0" * (-e - len(digits)) + digits
    return f"{digits}e{e}"


# -- lattices: multiples of m that avoid multiples of each f ---------------------------------------


class _Lattice:
    """The modular part of a conjunction, with what the searches need precomputed.

    ``m`` is the required modulus (or ``None``), ``fs`` the forbidden ones (canonical: each a multiple
    of ``m`` when ``m`` is set). With ``m``: ``qs = f/m`` are integers >= 2, ``terms`` the
    inclusion-exclusion terms ``(sign, lcm of a subset of qs)``, ``period = lcm(qs)``, and
    ``tau`` the largest ``t`` with ``m * 10**-t`` an integer.
    """

    __slots__ = ("m", "fs", "qs", "terms", "period", "tau")

    def __init__(self, m: Fraction | None, fs: tuple[Fraction, ...]) -> None:
        self.m = m
        self.fs = fs
        self.qs: tuple[int, ...] = ()
        self.terms: list[tuple[int, int]] = [(1, 1)]
        self.period = 1
        self.tau = 0
        if m is not None:
            qs: list[int] = []
            for f in fs:
                ratio = f / m
                assert ratio.denominator == 1 and ratio.numerator >= 2, "non-canonical forbidden modulus"
                qs.append(ratio.numerator)
            self.qs = tuple(qs)
            for q in qs:
                self.terms += [(-s, math.lcm(g, q)) for s, g in self.terms]
                self.period = math.lcm(self.period, q)
            t = _mult_threshold(m, _ONE)
            assert t is not None  # m is a decimal
            self.tau = -t

    def count(self, k1: int, k2: int) -> int:
        """How many ``k`` in ``[k1, k2]`` are divisible by none of ``qs``."""
        if k1 > k2:
            return 0
        return sum(s * (k2 // g - (k1 - 1) // g) for s, g in self.terms)

    def first(self, k1: int, k2: int) -> int:
        """The least ``k`` in ``[k1, k2]`` divisible by none of ``qs`` (one must exist)."""
        for k in range(k1, min(k2, k1 + 32) + 1):
            if all(k % q for q in self.qs):
                return k
        lo, hi = k1, k2
        while lo < hi:
            mid = (lo + hi) // 2
            if self.count(k1, mid) > 0:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def admits(self, x: Fraction) -> bool:
        """``x`` is a multiple of ``m`` (if set) and of no forbidden modulus."""
        if self.m is not None and not _is_multiple(x, self.m):
            return False
        return not any(_is_multiple(x, f) for f in self.fs)

    def pick_dense(self, a: Fraction | None, a_ex: bool, b: Fraction | None, b_ex: bool) -> Fraction:
        """A point of a non-degenerate interval that is a multiple of no ``f`` (no ``m`` here).

        Every multiple of every ``f`` lies in ``10**-K0 Z``; once ``10**-K`` (``K > K0``) is finer than a
        third of the interval, two consecutive points of ``10**-K Z`` lie inside and one of them is
        outside ``10**-K0 Z``. Closed ends and 0 are tried first for readable witnesses.
        """

        def inside(c: Fraction) -> bool:
            return (a is None or c > a or (c == a and not a_ex)) and (
                b is None or c < b or (c == b and not b_ex)
            )

        for c in (a if not a_ex else None, b if not b_ex else None, _ZERO):
            if c is not None and inside(c) and self.admits(c):
                return c
        base = a if a is not None else (b if b is not None else _ZERO) - 2
        k = 0
        while True:
            unit = _pow10(-k)
            c = (_floor(base / unit) + 1) * unit
            for cand in (c, c + unit):
                if inside(cand) and self.admits(cand):
                    return cand
            k += 1
            assert k < 100_000, "pick_dense did not terminate"


_EXISTS = Fraction(0)  # what the searches return for "there is one" when no point was asked for


def _interval_find(
    lat: _Lattice,
    a: Fraction | None,
    a_ex: bool,
    b: Fraction | None,
    b_ex: bool,
    pick: bool,
) -> Fraction | None:
    """A point of the interval (``None`` ends are unbounded) admitted by ``lat``, or ``None``.

    With ``pick=False`` only existence is decided and :data:`_EXISTS` stands for the point.
    """
    if a is not None and b is not None and (a > b or (a == b and (a_ex or b_ex))):
        return None
    m = lat.m
    if m is not None:
        k1 = k2 = None
        if a is not None:
            qa = a / m
            k1 = _ceil(qa) + (1 if a_ex and qa.denominator == 1 else 0)
        if b is not None:
            qb = b / m
            k2 = _floor(qb) - (1 if b_ex and qb.denominator == 1 else 0)
        if k1 is not None and k2 is not None:
            if lat.count(k1, k2) == 0:
                return None
            return lat.first(k1, k2) * m if pick else _EXISTS
        if not pick:
            return _EXISTS
        period = lat.period
        if k1 is None and k2 is None:
            k = 1 if lat.qs else 0
        elif k2 is None:
            assert k1 is not None
            k = k1 + (1 - k1) % period  # the least k >= k1 with k ≡ 1 (mod period)
        else:
            k = k2 - (k2 - 1) % period
        return k * m
    if a is not None and a == b:
        return a if lat.admits(a) else None
    return lat.pick_dense(a, a_ex, b, b_ex) if pick else _EXISTS


# -- conjunctions and predicates -----------------------------------------------------------------


@dataclass(frozen=True)
class NumberConstraint:
    """One conjunction: an interval, a required modulus and forbidden moduli, in canonical form.

    Build with :meth:`make` (which normalizes and returns ``None`` for an empty conjunction); the
    fields are then canonical: ``lo_excl``/``hi_excl`` are ``False`` on missing bounds; with
    ``multiple_of`` set, bounds are closed multiples of it and every ``not_multiple_of`` entry is a
    proper multiple of it; ``not_multiple_of`` is sorted, with no entry a multiple of another, and
    empty on a one-point interval. ``integer: true`` is ``multiple_of`` 1 (folded into the lcm).

    ``spelling`` restricts the *texts* rather than the values (one of :data:`SPELLINGS`, ``None``: any
    text of an admitted value). ``"integer"`` texts denote integers, so it implies ``multiple_of`` 1;
    every value has a ``"decimal"`` text (``1`` as ``1.0``), so that one never empties a conjunction.
    Values-only questions (:meth:`contains`, emptiness) ask whether some text of the value is admitted.
    """

    lo: Fraction | None = None
    lo_excl: bool = False
    hi: Fraction | None = None
    hi_excl: bool = False
    multiple_of: Fraction | None = None
    not_multiple_of: tuple[Fraction, ...] = ()
    spelling: str | None = None

    @staticmethod
    def make(
        *,
        lo: Number | None = None,
        lo_excl: bool = False,
        hi: Number | None = None,
        hi_excl: bool = False,
        integer: bool | None = None,
        multiple_of: Iterable[Number] = (),
        not_multiple_of: Iterable[Number] = (),
        spelling: str | None = None,
        where: str = "",
    ) -> NumberConstraint | None:
        """The canonical conjunction of the given atoms, or ``None`` if no number satisfies it.

        ``integer``: ``True`` = zero fractional part, ``False`` = non-zero fractional part.
        ``spelling``: one of :data:`SPELLINGS` or ``None`` (see the class).
        """
        if spelling is not None and spelling not in SPELLINGS:
            raise SpecError(f"number spelling {spelling!r}", where or "/", f"one of {SPELLINGS} or None")
        flo = None if lo is None else _exact(lo, "minimum", where)
        fhi = None if hi is None else _exact(hi, "maximum", where)
        req = [_positive(_exact(v, "multipleOf", where), "multipleOf", where) for v in multiple_of]
        forb = [_positive(_exact(v, "multipleOf", where), "not multipleOf", where) for v in not_multiple_of]
        if integer is True:
            req.append(_ONE)
        elif integer is False:
            forb.append(_ONE)
        m: Fraction | None = None
        for r in req:
            m = r if m is None else _lcm(m, r)
        if m is not None:
            _check_size(m, "the lcm of multipleOf values")
        return _normalize(flo, lo_excl, fhi, hi_excl, m, forb, spelling)

    # -- semantics ------------------------------------------------------------------------------
    def contains(self, value: Fraction) -> bool:
        v = value
        if self.lo is not None and (v < self.lo or (v == self.lo and self.lo_excl)):
            return False
        if self.hi is not None and (v > self.hi or (v == self.hi and self.hi_excl)):
            return False
        return self._lattice.admits(v)

    @cached_property
    def _lattice(self) -> _Lattice:
        return _Lattice(self.multiple_of, self.not_multiple_of)

    def _sort_key(self) -> tuple[object, ...]:
        return (
            self.lo is not None,
            self.lo if self.lo is not None else _ZERO,
            self.lo_excl,
            self.hi is None,
            self.hi if self.hi is not None else _ZERO,
            not self.hi_excl,
            self.multiple_of is not None,
            self.multiple_of if self.multiple_of is not None else _ZERO,
            self.not_multiple_of,
            self.spelling or "",
        )


def _positive(m: Fraction, keyword: str, where: str) -> Fraction:
    if m <= 0:
        raise SpecError(f"{keyword} is {m}", where or "/", "a number strictly greater than 0")
    return m


def _normalize(
    lo: Fraction | None,
    lo_excl: bool,
    hi: Fraction | None,
    hi_excl: bool,
    m: Fraction | None,
    forbidden: Iterable[Fraction],
    spelling: str | None = None,
) -> NumberConstraint | None:
    """The canonical form of a conjunction (see :class:`NumberConstraint`), ``None`` when empty."""
    if spelling == "integer":  # an integer text denotes an integer
        m = _ONE if m is None else _lcm(m, _ONE)
    if lo is None:
        lo_excl = False
    if hi is None:
        hi_excl = False
    if m is not None:
        if lo is not None:
            q = lo / m
            k = _ceil(q) + (1 if lo_excl and q.denominator == 1 else 0)
            lo, lo_excl = k * m, False
        if hi is not None:
            q = hi / m
            k = _floor(q) - (1 if hi_excl and q.denominator == 1 else 0)
            hi, hi_excl = k * m, False
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
        return None
    fs: set[Fraction] = set()
    for f in forbidden:
        if m is not None:
            f = _lcm(m, f)
            if f == m:
                return None
            _check_size(f, "a forbidden modulus")
        fs.add(f)
    minimal = sorted(f for f in fs if not any(g != f and _is_multiple(f, g) for g in fs))
    if lo is not None and lo == hi:
        point = _Lattice(m, tuple(minimal))
        if not point.admits(lo):
            return None
        minimal = []
    max_moduli = current_limits().number_not_multiple_of
    if len(minimal) > max_moduli:
        raise LimitExceeded("number_not_multiple_of", len(minimal), max_moduli)
    c = NumberConstraint(lo, lo_excl, hi, hi_excl, m, tuple(minimal), spelling)
    if _interval_find(c._lattice, lo, lo_excl, hi, hi_excl, pick=False) is None:
        return None
    return c


def _intersect(a: NumberConstraint, b: NumberConstraint) -> NumberConstraint | None:
    if a.spelling is not None and b.spelling is not None and a.spelling != b.spelling:
        return None  # no text is spelled both ways
    lo, lo_excl = a.lo, a.lo_excl
    if b.lo is not None and (lo is None or b.lo > lo or (b.lo == lo and b.lo_excl)):
        lo, lo_excl = b.lo, b.lo_excl
    hi, hi_excl = a.hi, a.hi_excl
    if b.hi is not None and (hi is None or b.hi < hi or (b.hi == hi and b.hi_excl)):
        hi, hi_excl = b.hi, b.hi_excl
    m = a.multiple_of
    if b.multiple_of is not None:
        m = b.multiple_of if m is None else _lcm(m, b.multiple_of)
        _check_size(m, "the lcm of multipleOf values")
    return _normalize(
        lo, lo_excl, hi, hi_excl, m, a.not_multiple_of + b.not_multiple_of, a.spelling or b.spelling
    )


def _complement(c: NumberConstraint) -> list[NumberConstraint]:
    """``not c`` as a disjunction of one-atom conjunctions."""
    atoms: list[NumberConstraint | None] = []
    if c.lo is not None:
        atoms.append(_normalize(None, False, c.lo, not c.lo_excl, None, ()))
    if c.hi is not None:
        atoms.append(_normalize(c.hi, not c.hi_excl, None, False, None, ()))
    if c.multiple_of is not None:
        atoms.append(_normalize(None, False, None, False, None, (c.multiple_of,)))
    for f in c.not_multiple_of:
        atoms.append(_normalize(None, False, None, False, f, ()))
    if c.spelling is not None:  # a text of the other spelling, whatever its value
        other = "decimal" if c.spelling == "integer" else "integer"
        atoms.append(_normalize(None, False, None, False, None, (), other))
    return [a for a in atoms if a is not None]


def _lower_within(inner: NumberConstraint, outer: NumberConstraint) -> bool:
    if outer.lo is None:
        return True
    if inner.lo is None:
        return False
    return inner.lo > outer.lo or (inner.lo == outer.lo and (inner.lo_excl or not outer.lo_excl))


def _upper_within(inner: NumberConstraint, outer: NumberConstraint) -> bool:
    if outer.hi is None:
        return True
    if inner.hi is None:
        return False
    return inner.hi < outer.hi or (inner.hi == outer.hi and (inner.hi_excl or not outer.hi_excl))


def _subsumes(outer: NumberConstraint, inner: NumberConstraint) -> bool:
    """A sufficient test for ``inner ⊆ outer`` (used only to drop redundant conjunctions)."""
    if outer.spelling is not None and outer.spelling != inner.spelling:
        return False
    if inner.lo is not None and inner.lo == inner.hi:
        return outer.contains(inner.lo)
    if not (_lower_within(inner, outer) and _upper_within(inner, outer)):
        return False
    mi, mo = inner.multiple_of, outer.multiple_of
    if mo is not None and (mi is None or not _is_multiple(mi, mo)):
        return False
    for f in outer.not_multiple_of:
        g = f if mi is None else _lcm(mi, f)
        if not any(_is_multiple(g, h) for h in inner.not_multiple_of):
            return False
    return True


def _merge_intervals(group: list[NumberConstraint]) -> list[NumberConstraint]:
    """Union of same-modulus conjunctions whose intervals overlap or touch."""
    group.sort(key=NumberConstraint._sort_key)
    out: list[NumberConstraint] = []
    for c in group:
        if out:
            p = out[-1]
            m = p.multiple_of
            if p.hi is None or c.lo is None:
                touches = True
            elif m is not None:
                touches = c.lo <= p.hi + m
            else:
                touches = c.lo < p.hi or (c.lo == p.hi and not (p.hi_excl and c.lo_excl))
            if touches:
                if _upper_within(c, p):
                    continue
                out[-1] = NumberConstraint(
                    p.lo, p.lo_excl, c.hi, c.hi_excl, p.multiple_of, p.not_multiple_of, p.spelling
                )
                continue
        out.append(c)
    return out


def _simplify(conjs: Iterable[NumberConstraint | None]) -> tuple[NumberConstraint, ...]:
    groups: dict[tuple[object, ...], list[NumberConstraint]] = {}
    for c in set(conjs):
        if c is not None:
            groups.setdefault((c.multiple_of, c.not_multiple_of, c.spelling), []).append(c)
    merged = sorted((c for g in groups.values() for c in _merge_intervals(g)), key=NumberConstraint._sort_key)
    kept: list[NumberConstraint] = []
    for c in merged:
        if any(_subsumes(k, c) for k in kept):
            continue
        kept = [k for k in kept if not _subsumes(c, k)]
        kept.append(c)
    kept.sort(key=NumberConstraint._sort_key)
    max_conjunctions = current_limits().number_predicate_conjunctions
    if len(kept) > max_conjunctions:
        raise LimitExceeded("number_predicate_conjunctions", len(kept), max_conjunctions)
    return tuple(kept)


@dataclass(frozen=True)
class NumberPredicate:
    """A numeric predicate in disjunctive normal form over :class:`NumberConstraint`.

    Values are hashable and simplified (empty conjunctions dropped, same-modulus intervals merged,
    subsumed conjunctions dropped), so an empty predicate has no conjunctions. Equal predicates need
    not have equal representations, but equal representations always mean equal predicates.
    """

    conjunctions: tuple[NumberConstraint, ...]

    @classmethod
    def of(cls, conjunctions: Iterable[NumberConstraint | None]) -> NumberPredicate:
        return cls(_simplify(conjunctions))

    @classmethod
    def any(cls) -> NumberPredicate:
        return cls((NumberConstraint(),))

    @classmethod
    def none(cls) -> NumberPredicate:
        return cls(())

    @classmethod
    def spelled(cls, spelling: str) -> NumberPredicate:
        """Every number written in ``spelling`` (one of :data:`SPELLINGS`): ``"integer"`` is draft-04's
        ``integer`` type, which is a matter of the text (``1.0`` is not one), not of the value."""
        return cls.of([NumberConstraint.make(spelling=spelling)])

    @classmethod
    def from_keywords(
        cls,
        integer: bool = False,
        minimum: Number | None = None,
        exclusive_minimum: Number | None = None,
        maximum: Number | None = None,
        exclusive_maximum: Number | None = None,
        multiple_of: Number | Iterable[Number] | None = None,
        where: str = "",
    ) -> NumberPredicate:
        """The JSON Schema keywords of one number schema (``integer``: ``type`` is ``"integer"``)."""
        lo: Fraction | None = None
        lo_excl = False
        if minimum is not None:
            lo = _exact(minimum, "minimum", where)
        if exclusive_minimum is not None:
            x = _exact(exclusive_minimum, "exclusiveMinimum", where)
            if lo is None or x >= lo:
                lo, lo_excl = x, True
        hi: Fraction | None = None
        hi_excl = False
        if maximum is not None:
            hi = _exact(maximum, "maximum", where)
        if exclusive_maximum is not None:
            x = _exact(exclusive_maximum, "exclusiveMaximum", where)
            if hi is None or x <= hi:
                hi, hi_excl = x, True
        if multiple_of is None:
            mults: list[Number] = []
        elif isinstance(multiple_of, (int, float, Decimal, Fraction, str)):
            mults = [multiple_of]
        else:
            mults = list(multiple_of)
        c = NumberConstraint.make(
            lo=lo,
            lo_excl=lo_excl,
            hi=hi,
            hi_excl=hi_excl,
            integer=True if integer else None,
            multiple_of=mults,
            where=where,
        )
        return cls.of([c])

    def and_(self, other: NumberPredicate) -> NumberPredicate:
        if not self.conjunctions or not other.conjunctions:  # ∅ ∩ X = ∅: no product to simplify
            return NumberPredicate.none()
        return NumberPredicate.of(_intersect(a, b) for a in self.conjunctions for b in other.conjunctions)

    def or_(self, other: NumberPredicate) -> NumberPredicate:
        return NumberPredicate.of(self.conjunctions + other.conjunctions)

    def not_(self) -> NumberPredicate:
        """The complement within the numbers (De Morgan, then distributed back to DNF)."""
        out = NumberPredicate.any()
        for c in self.conjunctions:
            out = out.and_(NumberPredicate.of(_complement(c)))
            if out.is_empty():
                break
        return out

    def is_empty(self) -> bool:
        return not self.conjunctions

    def contains(self, value: Number) -> bool:
        """Whether the number ``value`` (floats read from their shortest repr) satisfies it (for a
        conjunction with a ``spelling``: whether some text of the value in that spelling does)."""
        if isinstance(value, Fraction):
            v = value
        elif isinstance(value, float):
            if not math.isfinite(value):
                return False  # no JSON number is infinite or NaN
            v = Fraction(repr(value))
        else:
            v = Fraction(value)
        return any(c.contains(v) for c in self.conjunctions)


# -- the lexeme ----------------------------------------------------------------------------------

# Phases of the RFC 8259 number grammar. A state is the tuple
# ``(phase, negative, D, f, exp_negative, X, mask)``: ``D * 10**-f`` is the mantissa read so far (``D``
# all its digits; in the exponent phases normalized so that ``D`` has no trailing zero, ``f`` may be
# negative), ``X`` the exponent digits' value, ``mask`` the bit set of conjunctions still reachable.
_START, _MINUS, _INT0, _INT, _DOT, _FRAC, _EMARK, _ESIGN, _EXP = range(9)
_MANTISSA = frozenset({_MINUS, _INT0, _INT, _DOT, _FRAC})

State: TypeAlias = "tuple[int, bool, int, int, bool, int, int]"
_Pos: TypeAlias = "tuple[Fraction, bool, Fraction | None, bool]"  # x-space interval, lo >= 0 (0 = open)

_DIGIT = {48 + d: d for d in range(10)}
_MINUS_B, _PLUS_B, _DOT_B = ord("-"), ord("+"), ord(".")
_E_BYTES = frozenset(b"eE")
_CACHE_MAX = 1 << 16


class _Memo(NamedTuple):
    """A number lexeme's memo tables: ``step``, ``is_final`` and exponent ranges, by state, and the
    alive set after a byte by a state's :meth:`NumberLexeme.future_key` (``NumberLexeme.step``)."""

    step: dict[tuple[Hashable, int], Any]
    final: dict[Hashable, bool]
    range: dict[tuple[int, bool, int, int], tuple[int | None, int | None] | None]
    by_future: dict[tuple[Hashable, int], int]


#: Memo tables by lexeme key, shared by the lexemes of every grammar with that key: a state is a value
#: and ``step``/``is_final`` depend on the key and the state alone (``NumberLexeme.token_tables``), so
#: the schemas of a corpus that share a number predicate (most do) and the same schema compiled for a
#: second vocabulary read one table. An LRU of the last :data:`_MEMOS_KEPT` keys, each table bounded
#: by :data:`_CACHE_MAX`.
_MEMOS: OrderedDict[Hashable, _Memo] = OrderedDict()
_MEMOS_KEPT = 64


def _memo(key: Hashable) -> _Memo:
    memo = _MEMOS.get(key)
    if memo is None:
        memo = _MEMOS[key] = _Memo({}, {}, {}, {})
        if len(_MEMOS) > _MEMOS_KEPT:
            _MEMOS.popitem(last=False)
    else:
        _MEMOS.move_to_end(key)
    return memo


def _advance(
    phase: int, neg: bool, D: int, f: int, eneg: bool, X: int, byte: int
) -> tuple[int, bool, int, int, bool, int] | None:
    """The grammar's transition, ignoring the predicate (``None``: not a number prefix)."""
    d = _DIGIT.get(byte, -1)
    if phase == _START:
        if byte == _MINUS_B:
            return (_MINUS, True, 0, 0, False, 0)
        if d == 0:
            return (_INT0, False, 0, 0, False, 0)
        if d > 0:
            return (_INT, False, d, 0, False, 0)
    elif phase == _MINUS:
        if d == 0:
            return (_INT0, True, 0, 0, False, 0)
        if d > 0:
            return (_INT, True, d, 0, False, 0)
    elif phase == _INT0:
        if byte == _DOT_B:
            return (_DOT, neg, 0, 0, False, 0)
        if byte in _E_BYTES:
            return _emark(neg, 0, 0)
    elif phase == _INT:
        if d >= 0:
            return (_INT, neg, D * 10 + d, 0, False, 0)
        if byte == _DOT_B:
            return (_DOT, neg, D, 0, False, 0)
        if byte in _E_BYTES:
            return _emark(neg, D, 0)
    elif phase == _DOT:
        if d >= 0:
            return (_FRAC, neg, D * 10 + d, 1, False, 0)
    elif phase == _FRAC:
        if d >= 0:
            return (_FRAC, neg, D * 10 + d, f + 1, False, 0)
        if byte in _E_BYTES:
            return _emark(neg, D, f)
    elif phase == _EMARK:
        if byte in (_PLUS_B, _MINUS_B):
            return (_ESIGN, neg, D, f, byte == _MINUS_B and D != 0, 0)
        if d >= 0:
            return (_EXP, neg, D, f, False, d if D else 0)
    elif phase == _ESIGN:
        if d >= 0:
            return (_EXP, neg, D, f, eneg, d if D else 0)
    elif phase == _EXP and d >= 0:
        return (_EXP, neg, D, f, eneg, X * 10 + d if D else 0)
    return None


def _emark(neg: bool, D: int, f: int) -> tuple[int, bool, int, int, bool, int]:
    if D == 0:
        return (_EMARK, False, 0, 0, False, 0)  # the value is 0 whatever follows
    while D % 10 == 0:
        D //= 10
        f -= 1
    return (_EMARK, neg, D, f, False, 0)


def _pos_interval(c: NumberConstraint, neg: bool) -> _Pos | None:
    """The constraint's interval for ``x = |value| > 0`` given the sign, or ``None`` if empty."""
    if neg:
        lo = None if c.hi is None else -c.hi
        lo_ex = c.hi_excl
        hi = None if c.lo is None else -c.lo
        hi_ex = c.lo_excl
    else:
        lo, lo_ex, hi, hi_ex = c.lo, c.lo_excl, c.hi, c.hi_excl
    if lo is None or lo <= 0:
        lo, lo_ex = _ZERO, True
    if hi is not None and (hi <= 0 or lo > hi or (lo == hi and (lo_ex or hi_ex))):
        return None
    return (lo, lo_ex, hi, hi_ex)


def _mantissa_find(
    lat: _Lattice, pos: _Pos, D: int, pick: bool, e_floor: int | None = None, open_left: bool = False
) -> tuple[int, Fraction] | None:
    """``(E, x)`` with ``x`` in ``10**E [D, D+1)`` (``D >= 1``), in ``pos`` and admitted by ``lat``;
    ``E >= e_floor`` when given (integer texts: ``e_floor=0``, more digits and no exponent).

    ``open_left``: in ``10**E (D, D+1)`` instead (canonical texts after a point or a trailing zero
    of the fraction, which must still write a non-zero digit). The same walk decides it: a piece
    strictly inside the interval stays non-degenerate, pieces with ``E <= tau`` hold no multiple of
    ``m`` once their left end is out, and an open piece of width ``>= (period + 1) m`` still holds
    ``period`` consecutive multiples, one of them ``≡ 1 (mod period)``."""
    lo, lo_ex, hi, hi_ex = pos
    top = D + 1
    e_lo = None if lo == 0 else _min_exp_above(lo / top, strict=True)
    if e_floor is not None and (e_lo is None or e_lo < e_floor):
        e_lo = e_floor
    e_hi = None if hi is None else _max_exp_below(hi / D, strict=hi_ex)
    if e_lo is not None and e_hi is not None and e_lo > e_hi:
        return None

    def piece(e: int) -> tuple[int, Fraction] | None:
        scale = _pow10(e)
        a, a_ex = D * scale, open_left
        if lo > a or (lo == a and lo_ex):
            a, a_ex = lo, lo_ex
        b, b_ex = top * scale, True
        if hi is not None and hi < b:
            b, b_ex = hi, hi_ex
        x = _interval_find(lat, a, a_ex, b, b_ex, pick)
        return None if x is None else (e, x)

    m = lat.m
    if m is None:
        # A piece strictly between the end pieces lies wholly inside the interval: non-degenerate.
        if e_lo is None:
            inner = 0 if e_hi is None else e_hi - 1
        elif e_hi is None or e_hi - e_lo >= 2:
            inner = e_lo + 1
        else:
            inner = None
        if inner is not None:
            return piece(inner)
        assert e_lo is not None and e_hi is not None
        return piece(e_lo) or (piece(e_hi) if e_hi != e_lo else None)

    # Pieces with E <= tau hold at most their left end D*10^E as a multiple of m.
    tau = lat.tau
    low = None if open_left else _mult_threshold(Fraction(D), m)
    if low is not None:
        high = tau if e_hi is None else min(tau, e_hi)
        if lo != 0:
            low = max(low, _min_exp_above(lo / D, strict=lo_ex))
        if e_floor is not None:
            low = max(low, e_floor)
        for g in lat.fs:
            t = _mult_threshold(Fraction(D), g)
            if t is not None:
                high = min(high, t - 1)
        if low <= high:
            return (low, D * _pow10(low))
    # Pieces with E > tau, one by one, until a whole piece spans (period + 1) * m.
    e = tau + 1
    e = max(e, _min_exp_above(m / top, strict=True))
    if e_lo is not None:
        e = max(e, e_lo)
    span = (lat.period + 1) * m
    while e_hi is None or e <= e_hi:
        found = piece(e)
        if found is not None:
            return found
        assert e in (e_lo, e_hi) or _pow10(e) < span, "a whole wide piece had no point"
        e += 1
    return None


def _every_mantissa_viable(lat: _Lattice, pos: _Pos | None, integer: bool) -> bool:
    """Whether :func:`_mantissa_find` finds a point for every mantissa ``D >= 1``, closed or open on
    the left (``pick=False``; integer texts: ``e_floor=0``), so the search can be skipped.

    * No upper bound: the pieces ``10**E [D, D+1)`` for ``E -> +inf`` lie above any lower bound and
      grow wider than ``(period + 1) * m``, so one of them holds an admitted point (the loop of
      :func:`_mantissa_find` ends there; without ``m`` any piece of positive length has points
      that are multiples of no forbidden modulus).
    * Decimal texts, no required modulus, and a whole decade ``[10**a, 10**(a+1)]`` inside the
      interval: the piece with ``E = a + 1 - len(str(D))`` lies in that decade, so its inside is an
      open interval of positive length within the bounds.

    Anything else is decided by the search. ``tests/test_numbers.py`` checks this against it.
    """
    if pos is None:
        return False
    lo, _lo_ex, hi, _hi_ex = pos
    if hi is None:
        return True
    if integer or lat.m is not None:
        return False
    if lo == 0:
        return True
    a = _min_exp_ge(lo)
    return _pow10(a + 1) <= hi


def _exp_range(lat: _Lattice, pos: _Pos, mant: Fraction) -> tuple[int | None, int | None] | None:
    """The exponents ``E`` (an integer interval, ``None`` = unbounded) with ``mant*10^E`` admitted."""
    lo, lo_ex, hi, hi_ex = pos
    a = None if lo == 0 else _min_exp_above(lo / mant, strict=lo_ex)
    b = None if hi is None else _max_exp_below(hi / mant, strict=hi_ex)
    if lat.m is not None:
        t = _mult_threshold(mant, lat.m)
        if t is None:
            return None
        a = t if a is None else max(a, t)
    for g in lat.fs:
        t = _mult_threshold(mant, g)
        if t is not None:
            b = t - 1 if b is None else min(b, t - 1)
    if a is not None and b is not None and a > b:
        return None
    return (a, b)


def _exp_pick(
    phase: int, eneg: bool, X: int, rng: tuple[int | None, int | None], nonzero: bool = False
) -> tuple[int, int, int] | None:
    """An exponent in ``rng`` the exponent phase can still write: ``(E, j, r)``.

    In ``_EXP`` the written exponent's magnitude is ``X * 10**j + r`` (``0 <= r < 10**j``).
    ``nonzero``: canonical texts, whose exponent is never 0 (after ``e`` or ``e-``; in ``_EXP`` their
    ``X >= 1`` already).
    """
    lo, hi = rng
    if phase == _EMARK:
        if lo is not None and lo > 0:
            return (lo, 0, 0)
        if hi is not None and hi < 0:
            return (hi, 0, 0)
        if not nonzero:
            return (0, 0, 0)
        if hi is None or hi >= 1:
            return (1, 0, 0)
        if lo is None or lo <= -1:
            return (-1, 0, 0)
        return None
    if eneg:
        lo, hi = (None if hi is None else -hi), (None if lo is None else -lo)
    a = 0 if lo is None or lo < 0 else lo
    if nonzero and phase == _ESIGN:
        a = max(a, 1)
    if hi is not None and hi < a:
        return None
    if phase == _ESIGN or X == 0:
        n, j, r = a, 0, a
    else:
        j = 0
        while True:
            base = X * 10**j
            if hi is not None and base > hi:
                return None
            n = max(a, base)
            if n <= base + 10**j - 1 and (hi is None or n <= hi):
                r = n - base
                break
            j += 1
    return (-n if eneg else n, j, r)


class NumberLexeme:
    """The JSON number texts whose value satisfies a :class:`NumberPredicate` (a trim lexeme).

    Raises ``ValueError`` for an empty predicate (test :meth:`NumberPredicate.is_empty` first), as
    :meth:`ByteDFA.build` does for an empty language.

    ``canonical``: only the canonical spellings (``JsonProfile.number_spelling``; "Canonical
    spellings" in the module doc). ``share_futures=False`` switches off the by-future memo of
    :meth:`_alive_after`, and ``decide_wide=False`` the shortcut of :func:`_every_mantissa_viable`
    (tests compare each with the slow path); each setting has memo tables of its own.
    """

    def __init__(
        self,
        predicate: NumberPredicate,
        canonical: bool = False,
        share_futures: bool = True,
        decide_wide: bool = True,
    ) -> None:
        if predicate.is_empty():
            raise ValueError("NumberLexeme: the predicate is empty (no number satisfies it)")
        self.predicate = predicate
        self.canonical = canonical
        self._conjs = integers_spelled(predicate).conjunctions if canonical else predicate.conjunctions
        self._lats = [c._lattice for c in self._conjs]
        self._zero_ok = [c.contains(_ZERO) for c in self._conjs]
        self._spell = [c.spelling for c in self._conjs]
        self._pos = [(_pos_interval(c, False), _pos_interval(c, True)) for c in self._conjs]
        # Per conjunction and sign: every mantissa D >= 1 has completions (the search is skipped).
        self._wide = [
            tuple(decide_wide and _every_mantissa_viable(lat, pos, spell == "integer") for pos in pair)
            for lat, pair, spell in zip(self._lats, self._pos, self._spell, strict=True)
        ]
        self._all = (1 << len(self._conjs)) - 1
        self.share_futures = share_futures
        memo = _memo((self.key, share_futures, decide_wide))
        self._step_cache, self._final_cache, self._range_cache, self._by_future = memo

    #: Every byte :meth:`step` can read (``_advance`` reads digits, signs, the point and exponents
    #: only): the parser tries these alone when it lists a state's live bytes.
    alphabet = frozenset(b"0123456789+-.eE")
    #: Token masks may share per-state token classes between grammars (``_tokens``): the key names the
    #: predicate (and the canonical flag), and a state is a value (``step`` depends on nothing else).
    token_tables = True

    @property
    def key(self) -> Hashable:
        if self.canonical:
            return ("number", self.predicate, "canonical")
        return ("number", self.predicate)

    def start(self) -> State:
        return (_START, False, 0, 0, False, 0, self._all)

    def step(self, state: Hashable, byte: int) -> State | None:
        ck = (state, byte)
        try:
            return self._step_cache[ck]
        except KeyError:
            pass
        st: State = state  # type: ignore[assignment]
        phase, neg, D, f, eneg, X, mask = st
        shape = _advance(phase, neg, D, f, eneg, X, byte)
        if self.canonical and not _canonical_byte(phase, neg, D, byte):
            shape = None
        out: State | None = None
        if shape is not None:
            new_mask = self._alive_after(st, mask, byte, shape)
            if new_mask:
                out = (*shape, new_mask)
        if len(self._step_cache) >= _CACHE_MAX:
            self._step_cache.clear()
        self._step_cache[ck] = out
        return out

    def _alive_after(
        self, state: State, mask: int, byte: int, shape: tuple[int, bool, int, int, bool, int]
    ) -> int:
        """The conjunctions still viable after ``state`` reads ``byte`` (giving ``shape``). States with
        one :meth:`future_key` have one set of completions per conjunction, so those viable after a
        byte are the same for all of them: an integer part free of its digits (``"number-free"``) is
        decided once per sign, alive set and byte, not once per digit string read."""
        key = self.future_key(state) if self.share_futures else state
        if key is not state:
            try:
                return self._by_future[(key, byte)]
            except KeyError:
                pass
        new_mask = 0
        for i in _bits(mask):
            if self._viable(i, shape):
                new_mask |= 1 << i
        if key is not state:
            if len(self._by_future) >= _CACHE_MAX:
                self._by_future.clear()
            self._by_future[(key, byte)] = new_mask
        return new_mask

    def is_final(self, state: Hashable) -> bool:
        try:
            return self._final_cache[state]
        except KeyError:
            pass
        out = self._final(state)  # type: ignore[arg-type]
        if len(self._final_cache) >= _CACHE_MAX:
            self._final_cache.clear()
        self._final_cache[state] = out
        return out

    def future_key(self, state: Hashable) -> Hashable:
        """A key equal for states with the same future (``_budget`` memoizes token distances by it).

        In the integer part (``_INT``, ``D >= 1``) a state whose every alive conjunction cannot tell
        one ``D`` from another has the future of every such state with the same sign and alive set:
        its interval for ``|x|`` is all of ``(0, ∞)`` (bounds can never fail), it forbids no modulus,
        and it needs none or is ``"integer"``-spelled (an integer text's value is an integer, so a
        modulus ``1/k`` holds whatever the digits; a decimal text could shift ``D`` into the fraction
        with a negative exponent, where the digits matter). Its verdicts then depend on the digits
        still to come, never on ``D``. Any other state is its own key."""
        st: Any = state
        phase, neg, D, _f, _eneg, _X, mask = st
        if phase != _INT or D < 1:
            return st
        for i in _bits(mask):
            c = self._conjs[i]
            pos = self._pos[i][neg]
            if pos is None or pos[0] != 0 or pos[2] is not None or c.not_multiple_of:
                return st
            if c.multiple_of is not None and not (
                c.spelling == "integer" and (1 / c.multiple_of).denominator == 1
            ):
                return st
        return ("number-free", neg, mask, self.canonical)

    def witness(self, state: Hashable) -> bytes:
        """A suffix that completes the bytes read into a member of the language."""
        st: State = state  # type: ignore[assignment]
        if self.is_final(st):
            return b""
        for i in _bits(st[6]):
            w = self._witness_for(i, st)
            if w is not None:
                return w.encode("ascii")
        raise AssertionError(f"NumberLexeme: state {st!r} has no completion (trimness broken)")

    # -- decisions ------------------------------------------------------------------------------
    def _zero_reachable(self, phase: int, neg: bool) -> bool:
        """After a mantissa prefix of value 0 (``D == 0``), may the text still denote 0? Always for
        any spelling; for canonical ones only after ``0`` (``-0`` needs a non-zero digit, and so do
        ``0.`` and ``0.00``, whose fraction must end in one)."""
        return not self.canonical or (phase == _INT0 and not neg)

    def _open_left(self, phase: int, D: int) -> bool:
        """Canonical texts after a point or a fraction ending in 0 must write a non-zero digit: their
        values are ``10**E (D, D+1)``, the pieces without their left ends."""
        return self.canonical and (phase == _DOT or (phase == _FRAC and D % 10 == 0))

    def _viable(self, i: int, shape: tuple[int, bool, int, int, bool, int]) -> bool:
        phase, neg, D, f, eneg, X = shape
        if self._spell[i] == "integer":
            return self._viable_integer(i, phase, neg, D)
        # A "decimal" spelling is viable exactly where any spelling is: a completion "D..." of an
        # integer text has the decimal twin "D....0" of the same value (canonical: "D...0e-1", and
        # "0e1" for 0).
        if phase in _MANTISSA:
            if D == 0:
                if self._zero_ok[i] and self._zero_reachable(phase, neg):
                    return True
                pos = self._pos[i][neg]
                return (
                    pos is not None
                    and _interval_find(self._lats[i], pos[0], pos[1], pos[2], pos[3], pick=False) is not None
                )
            if self._wide[i][neg]:
                return True
            pos = self._pos[i][neg]
            return (
                pos is not None
                and _mantissa_find(self._lats[i], pos, D, pick=False, open_left=self._open_left(phase, D))
                is not None
            )
        if D == 0:
            return self._zero_ok[i]
        rng = self._range(i, neg, D, f)
        return rng is not None and _exp_pick(phase, eneg, X, rng, nonzero=self.canonical) is not None

    def _viable_integer(self, i: int, phase: int, neg: bool, D: int) -> bool:
        """An integer text goes on only with digits: ``0`` and ``-0`` are complete (canonical: ``-0``
        is out), and after digits ``D`` the values left are the integers of ``10**E [D, D+1)`` for
        ``E >= 0`` only."""
        zero = self._zero_ok[i] and self._zero_reachable(_INT0, neg)
        if phase == _INT0:
            return zero
        pos = self._pos[i][neg]
        if phase == _MINUS:
            return zero or (
                pos is not None
                and _interval_find(self._lats[i], pos[0], pos[1], pos[2], pos[3], pick=False) is not None
            )
        if phase == _INT:
            return self._wide[i][neg] or (
                pos is not None and _mantissa_find(self._lats[i], pos, D, pick=False, e_floor=0) is not None
            )
        return False  # a fraction or an exponent

    def _range(self, i: int, neg: bool, D: int, f: int) -> tuple[int | None, int | None] | None:
        key = (i, neg, D, f)
        try:
            return self._range_cache[key]
        except KeyError:
            pass
        pos = self._pos[i][neg]
        out = None if pos is None else _exp_range(self._lats[i], pos, Fraction(D) * _pow10(-f))
        if len(self._range_cache) >= _CACHE_MAX:
            self._range_cache.clear()
        self._range_cache[key] = out
        return out

    def _final(self, state: State) -> bool:
        phase, neg, D, f, eneg, X, mask = state
        if self.canonical and ((neg and D == 0) or (phase == _FRAC and D % 10 == 0)):
            return False  # "-0", "-0.0", "1.0", "1.50": not canonical (exponents are checked by step)
        if phase in (_INT0, _INT, _FRAC):
            v = Fraction(-D if neg else D) * _pow10(-f)
            spelled = "decimal" if phase == _FRAC else "integer"
            return any(self._conjs[i].contains(v) and self._spell[i] in (None, spelled) for i in _bits(mask))
        if phase == _EXP:
            if D == 0:
                return any(self._zero_ok[i] for i in _bits(mask))
            e = -X if eneg else X
            for i in _bits(mask):
                rng = self._range(i, neg, D, f)
                if rng is not None and (rng[0] is None or rng[0] <= e) and (rng[1] is None or e <= rng[1]):
                    return True
        return False

    # -- witnesses ------------------------------------------------------------------------------
    def _witness_for(self, i: int, state: State) -> str | None:
        spelling = self._spell[i]
        if spelling == "integer":
            return self._integer_witness(i, state)
        w = self._any_witness(i, state)
        if (
            spelling == "decimal"
            and w is not None
            and state[0] in (_START, _MINUS, _INT0, _INT)
            and not any(ch in w for ch in ".eE")
        ):
            if not self.canonical:
                w += ".0"  # the same value, spelled with a fraction
            elif state[2] == 0 and state[0] != _MINUS and set(w) <= {"0"}:
                w += "e1"  # 0 as "0e1": canonical texts have no trailing zero in a fraction
            else:
                w += "0e-1"  # "12" as "120e-1"
        return w

    def _integer_witness(self, i: int, state: State) -> str | None:
        phase, neg, D, *_ = state
        lat = self._lats[i]  # its modulus is an integer: every point found is an integer
        if phase == _START:
            c = self._conjs[i]
            x = _interval_find(lat, c.lo, c.lo_excl, c.hi, c.hi_excl, pick=True)
            return None if x is None else str(x.numerator)
        zero = self._zero_ok[i] and self._zero_reachable(_INT0, neg)
        if phase == _INT0:
            return "" if zero else None
        pos = self._pos[i][neg]
        if phase == _MINUS:
            if zero:
                return "0"
            x = None if pos is None else _interval_find(lat, pos[0], pos[1], pos[2], pos[3], pick=True)
            return None if x is None else str(x.numerator)
        if phase == _INT and pos is not None:
            found = _mantissa_find(lat, pos, D, pick=True, e_floor=0)
            return None if found is None else str(found[1].numerator)[len(str(D)) :]
        return None

    def _any_witness(self, i: int, state: State) -> str | None:
        phase, neg, D, f, eneg, X, _ = state
        lat = self._lats[i]
        if phase == _START:
            c = self._conjs[i]
            x = _interval_find(lat, c.lo, c.lo_excl, c.hi, c.hi_excl, pick=True)
            if x is None:
                return None
            return "-" + _render(-x) if x < 0 else _render(x)
        if phase in _MANTISSA:
            if D == 0 and self._zero_ok[i] and self._zero_reachable(phase, neg):
                return {_MINUS: "0", _DOT: "0"}.get(phase, "")
            pos = self._pos[i][neg]
            if pos is None:
                return None
            if D == 0:
                x = _interval_find(lat, pos[0], pos[1], pos[2], pos[3], pick=True)
                if x is None:
                    return None
                if phase == _MINUS:
                    return _render(x)
                a, e = _split(x)
                digits = str(a)  # "0." + f zeros + digits is a * 10**-(f + len(digits))
                return ("." if phase == _INT0 else "") + digits + _exp_text(e + f + len(digits))
            found = _mantissa_find(lat, pos, D, pick=True, open_left=self._open_left(phase, D))
            if found is None:
                return None
            e, x = found
            r = x * _pow10(-e) - D  # the digits after D, in [0, 1)
            frac = ""
            if r:
                a, k = _split(r)
                frac = str(a).zfill(-k)
            if phase == _INT:
                body = "." + frac if frac else ""
            elif phase == _DOT:
                body = frac or "0"
            else:
                body = frac
            return body + _exp_text(e + f)
        if D == 0:
            if not self._zero_ok[i]:
                return None
            if phase == _EXP:
                return ""
            return "1" if self.canonical else "0"  # canonical exponents are not 0
        rng = self._range(i, neg, D, f)
        if rng is None:
            return None
        got = _exp_pick(phase, eneg, X, rng, nonzero=self.canonical)
        if got is None:
            return None
        e, j, rest = got
        if phase == _EMARK:
            return str(e)
        if phase == _ESIGN:
            return str(abs(e))
        if X == 0:
            return str(abs(e)) if e else ""
        return str(rest).zfill(j) if j else ""


def _canonical_byte(phase: int, neg: bool, D: int, byte: int) -> bool:
    """May a canonical text read ``byte`` after a prefix in ``phase``? The rules that look at the
    next byte (the others are finality, :meth:`NumberLexeme._final`): no exponent after ``-0`` (its
    value stays 0) or after a fraction ending in 0; an exponent has no ``+`` and begins with a
    non-zero digit."""
    if byte in _E_BYTES:
        return not ((phase == _INT0 and neg) or (phase == _FRAC and D % 10 == 0))
    if phase == _EMARK:
        return byte not in (_PLUS_B, 0x30)
    if phase == _ESIGN:
        return byte != 0x30
    return True


def integers_spelled(predicate: NumberPredicate) -> NumberPredicate:
    """``predicate`` with every conjunction of any spelling whose values are all integers spelled
    ``"integer"``: the canonical profile's rule that an integer is written without fraction or
    exponent. "All integers" is read off the conjunction's form: its ``multipleOf`` is an integer
    (``type: integer`` is 1), or it is one integer point (``const: 5``, an ``enum`` member)."""

    def integral(c: NumberConstraint) -> bool:
        if c.multiple_of is not None and c.multiple_of.denominator == 1:
            return True
        return c.lo is not None and c.lo == c.hi and c.lo.denominator == 1

    return NumberPredicate.of(
        # (a point keeps no forbidden moduli, so multiple_of 1 leaves it in canonical form)
        replace(c, spelling="integer", multiple_of=c.multiple_of or _ONE)
        if c.spelling is None and integral(c)
        else c
        for c in predicate.conjunctions
    )


def _exp_text(e: int) -> str:
    return f"e{e}" if e else ""


def _bits(mask: int) -> list[int]:
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


#: The canonical number texts (``NumberLexeme(..., canonical=True)`` of any value): non-negative ones,
#: and negative ones whose mantissa is not zero; fractions end in a non-zero digit; exponents have
#: no ``+`` and no leading zero, and are not 0.
CANONICAL_NUMBER_REGEX = (
    r"(0|[1-9][0-9]*|-[1-9][0-9]*|-?0\.[0-9]*[1-9]|-?[1-9][0-9]*\.[0-9]*[1-9])"
    r"([eE]-?[1-9][0-9]*)?"
)


@functools.lru_cache(maxsize=2)
def any_number_dfa(canonical: bool = False) -> Any:
    """RFC 8259 §6 ``number`` (any value) as a ByteDFA: regular, so masks use lexeme tables;
    ``canonical``: its canonical spellings (:data:`CANONICAL_NUMBER_REGEX`)."""
    from ._regex import compile_regex_dfa

    pattern = CANONICAL_NUMBER_REGEX if canonical else r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"
    return compile_regex_dfa(pattern, flavor="python", mode="fullmatch").to_utf8()
