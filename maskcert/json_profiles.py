"""``--profile``: the JSON profile (``refdecoder.JsonProfile``) the reference compiles a schema under.

Each ``--profile`` item is either a *name* or ``KEY=VALUE``, applied left to right on top of
JSON Schema's own reading (``JsonProfile()``):

* ``default`` — ``JsonProfile()``: the schema as JSON Schema 2020-12 and RFC 8259 read it (object keys
  unique: repeated keys, undeclared ones too, are excluded by key memory);
* ``reference`` — what ``maskcert certify --backend reference`` uses: ``default`` with repeated
  undeclared keys allowed (``allow_duplicate_keys=true``);
* ``generation`` — ``JsonProfile.generation()``: the spellings a person expects of generated JSON
  (docs/design.md "The generation profile"): no whitespace, ``\\uXXXX`` escapes only for the control
  characters U+0000..U+001F (``unicode_escapes=controls``), canonical numbers (no ``-0``, no trailing
  fraction zeros, exponents without ``+``, leading zeros or the value 0, integers without fraction or
  exponent: ``number_spelling=canonical``), unique keys. Follow it with ``whitespace=any`` (or ``=N``)
  to allow whitespace;
* an engine's registered name (``xgrammar``, ``llguidance``, ...) — the profile its adapter declares
  (the language that engine promises; the engine must be installed, its adapter reads its defaults);
* ``KEY=VALUE`` — one ``JsonProfile`` field: booleans as ``true``/``false``, integers as digits,
  anything else as text (``whitespace=any``, ``whitespace=2``, ``formats=assert``,
  ``number_spelling=canonical``); ``unicode_escapes`` takes ``true``, ``false`` or ``controls``.

Errors are :class:`ProfileError` (a usage error naming the item and what was expected).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from refdecoder import JsonProfile
from refdecoder.errors import MaskcertError, SpecError

__all__ = ["ProfileError", "parse_profile", "profile_names", "explain_profile"]

_BUILTIN = {
    "default": JsonProfile(),
    "reference": JsonProfile(allow_duplicate_keys=True),
    "generation": JsonProfile.generation(),
}

#: The words a Boolean field takes besides ``true``/``false`` (``unicode_escapes=controls``).
_BOOLEAN_WORDS: dict[str, tuple[str, ...]] = {"unicode_escapes": ("controls",)}


class ProfileError(MaskcertError):
    """A ``--profile`` item that names no profile and sets no known field to a valid value."""

    def __init__(self, item: str, expected: str) -> None:
        self.item = item
        self.expected = expected
        super().__init__(f"--profile {item!r}: expected {expected}")


def _fields() -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(JsonProfile)}


def profile_names() -> list[str]:
    """The names ``--profile`` takes: the built-in ones and every registered engine."""
    from props.backends import ENGINES

    return [*_BUILTIN, *ENGINES]


def _named(name: str) -> JsonProfile:
    if name in _BUILTIN:
        return _BUILTIN[name]
    from props.backends import ENGINES, BackendUnavailable, adapter_class

    if name not in ENGINES:
        raise ProfileError(
            name,
            f"a profile name ({', '.join(profile_names())}) or KEY=VALUE with KEY one of {', '.join(_fields())}",
        )
    try:
        backend = adapter_class(name)()
    except BackendUnavailable as e:
        raise ProfileError(name, f"an installed engine to read its declared profile from ({e})") from None
    profile = backend.profile.json
    assert isinstance(profile, JsonProfile)
    return profile


def _value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low.isdigit():
        return int(low)
    return text.strip()


def parse_profile(items: Sequence[str] | None, base: JsonProfile | None = None) -> JsonProfile:
    """``base`` (``JsonProfile()`` by default) with every ``--profile`` item applied in order."""
    profile = base or JsonProfile()
    fields = _fields()
    for item in items or []:
        if "=" not in item:
            profile = _named(item.strip())
            continue
        key, _, text = item.partition("=")
        key = key.strip()
        field = fields.get(key)
        if field is None:
            raise ProfileError(item, f"KEY=VALUE with KEY one of {', '.join(fields)}")
        value = _value(text)
        default = field.default
        words = _BOOLEAN_WORDS.get(key, ())
        if isinstance(default, bool) and not isinstance(value, bool) and value not in words:
            expected = " or ".join([f"{key}=true", f"{key}=false", *(f"{key}={w}" for w in words)])
            raise ProfileError(item, expected)
        try:
            profile = dataclasses.replace(profile, **{key: value})
        except SpecError as e:
            raise ProfileError(item, f"a valid {key} ({e})") from None
    return profile


def explain_profile(profile: JsonProfile) -> str:
    """One line: every field of ``profile``, those differing from JSON Schema's own reading marked."""
    default = JsonProfile()
    parts = []
    for name in _fields():
        value = getattr(profile, name)
        mark = "*" if value != getattr(default, name) else ""
        parts.append(f"{name}={value}{mark}")
    return "profile: " + " ".join(parts) + "  (* differs from JSON Schema's own reading)"
