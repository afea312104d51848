"""A reader for the Rust test sources ``maskcert audit-extract`` reads: tokens, token trees, and the
values of the literal expressions engine tests label (string literals, ``vec![...]``, ``json!(...)``,
``format!(...)`` over known values).

It reads; it never compiles or runs Rust. Tokens follow The Rust Reference, "Tokens" (raw strings
``r#"..."#``, byte and C strings, escapes ``\\n \\x7F \\u{1F600}`` and line continuations, char
literals versus lifetimes, nested block comments); a token tree is a bracket group as ``macro_rules!``
sees it. :func:`evaluate` gives the value of an expression built from literals and names bound in an
environment, or :class:`Unreadable` saying which construct it could not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from refdecoder.errors import InputError

__all__ = [
    "Group",
    "RustSyntaxError",
    "Tok",
    "Tree",
    "Unreadable",
    "evaluate",
    "json_value",
    "parse",
    "split",
]


class RustSyntaxError(InputError):
    """A source file the token reader cannot split into tokens and balanced groups."""

    def __init__(self, path: str, line: int, expected: str, detail: str = "") -> None:
        self.line = line
        super().__init__(f"{path}:{line}", expected, detail)


@dataclass(frozen=True)
class Tok:
    kind: str  # "str" (value: decoded text), "num", "ident", "punct", "char", "lifetime"
    text: str
    line: int
    value: Any = None


@dataclass(frozen=True)
class Group:
    open: str  # "(", "[", "{"
    items: tuple[Tree, ...]
    line: int


Tree = Union[Tok, Group]


class Text(str):
    """A string literal's value, remembering the line it stands on (so a case names its own line,
    not the line of the assertion that reads it)."""

    line: int

    def __new__(cls, value: str, line: int) -> Text:
        self = super().__new__(cls, value)
        self.line = line
        return self


@dataclass(frozen=True)
class Unreadable:
    """Why an expression has no static value."""

    reason: str
    line: int


_CLOSE = {"(": ")", "[": "]", "{": "}"}
_PUNCT3 = ("..=", "...", "<<=", ">>=")
_PUNCT2 = ("::", "=>", "->", "..", "==", "!=", "<=", ">=", "&&", "||", "+=", "-=", "*=", "/=", "<<", ">>")
_SIMPLE_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "0": "\0", "'": "'", '"': '"'}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(
    r"0[xob][0-9a-fA-F_]+(?:[iu](?:8|16|32|64|128|size))?"
    r"|[0-9][0-9_]*(?:\.[0-9][0-9_]*)?(?:[eE][+-]?[0-9_]+)?(?:f32|f64|[iu](?:8|16|32|64|128|size))?"
)


def _unescape(body: str, path: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _SIMPLE_ESC:
            out.append(_SIMPLE_ESC[nxt])
            i += 2
        elif nxt == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif nxt == "u":
            end = body.index("}", i)
            out.append(chr(int(body[i + 3 : end].replace("_", ""), 16)))
            i = end + 1
        elif nxt == "\n":  # line continuation: the newline and the next line's leading whitespace
            i += 2
            while i < len(body) and body[i] in " \t\n\r":
                i += 1
        else:
            raise RustSyntaxError(path, line, "a Rust string escape", repr(body[i : i + 4]))
    return "".join(out)


def tokenize(src: str, path: str = "<rust>") -> list[Tok]:
    toks: list[Tok] = []
    i, line, n = 0, 1, len(src)
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += src.count("\n", i, j)
            i = j
        elif (m := re.match(r'(?:b|c)?r(#*)"', src[i:])) is not None:
            hashes = m.group(1)
            start = i + m.end()
            end = src.find('"' + hashes, start)
            if end < 0:
                raise RustSyntaxError(path, line, "a closed raw string")
            body = src[start:end]
            toks.append(Tok("str", src[i : end + 1 + len(hashes)], line, Text(body, line)))
            line += body.count("\n")
            i = end + 1 + len(hashes)
        elif c == '"' or (c in "bc" and src.startswith('"', i + 1)):
            j = i + (1 if c == '"' else 2)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            if j >= n:
                raise RustSyntaxError(path, line, "a closed string literal")
            body = src[i + (1 if c == '"' else 2) : j]
            toks.append(Tok("str", src[i : j + 1], line, Text(_unescape(body, path, line), line)))
            line += body.count("\n")
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\u\{[0-9a-fA-F_]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", src[i:])
            if m is not None:
                toks.append(Tok("char", m.group(0), line, _unescape(m.group(1), path, line)))
                i += m.end()
            else:
                m2 = _IDENT.match(src, i + 1)
                if m2 is None:
                    raise RustSyntaxError(path, line, "a char literal or a lifetime", src[i : i + 8])
                toks.append(Tok("lifetime", src[i : m2.end()], line))
                i = m2.end()
        elif c.isdigit():
            m = _NUMBER.match(src, i)
            assert m is not None
            toks.append(Tok("num", m.group(0), line))
            i = m.end()
        elif (m := _IDENT.match(src, i)) is not None:
            toks.append(Tok("ident", m.group(0), line))
            i = m.end()
        else:
            for p in (*_PUNCT3, *_PUNCT2, c):
                if src.startswith(p, i):
                    toks.append(Tok("punct", p, line))
                    i += len(p)
                    break
    return toks


def parse(src: str, path: str = "<rust>") -> list[Tree]:
    """The token trees of a source file."""
    stack: list[tuple[str, int, list[Tree]]] = [("", 0, [])]
    for t in tokenize(src, path):
        if t.kind == "punct" and t.text in _CLOSE:
            stack.append((t.text, t.line, []))
        elif t.kind == "punct" and t.text in (")", "]", "}"):
            opener, line, items = stack.pop()
            if not opener or _CLOSE[opener] != t.text:
                raise RustSyntaxError(path, t.line, f"a closing bracket for {opener or 'nothing'!r}", t.text)
            stack[-1][2].append(Group(opener, tuple(items), line))
        else:
            stack[-1][2].append(t)
    if len(stack) != 1:
        raise RustSyntaxError(path, stack[-1][1], f"a closing bracket for {stack[-1][0]!r}", "end of file")
    return stack[0][2]


def split(items: Sequence[Tree], sep: str = ",") -> list[list[Tree]]:
    """``items`` split at top-level ``sep`` punctuation (an empty trailing part dropped)."""
    parts: list[list[Tree]] = [[]]
    for t in items:
        if isinstance(t, Tok) and t.kind == "punct" and t.text == sep:
            parts.append([])
        else:
            parts[-1].append(t)
    if not parts[-1]:
        parts.pop()
    return parts


def is_tok(t: Tree | None, kind: str, text: str | None = None) -> bool:
    return isinstance(t, Tok) and t.kind == kind and (text is None or t.text == text)


def line_of(items: Sequence[Tree]) -> int:
    return items[0].line if items else 0


def _number(text: str) -> int | float:
    t = re.sub(r"(f32|f64|[iu](8|16|32|64|128|size))$", "", text).replace("_", "")
    if t.startswith(("0x", "0o", "0b")):
        return int(t, 0)
    if "." in t or "e" in t or "E" in t:
        return float(t)
    return int(t)


def _strip_ref(items: Sequence[Tree]) -> list[Tree]:
    out = list(items)
    while out and (is_tok(out[0], "punct", "&") or is_tok(out[0], "ident", "mut")):
        out = out[1:]
    return out


_STRING_METHODS = ("to_string", "to_owned", "into", "as_str", "clone")


def evaluate(items: Sequence[Tree], env: Mapping[str, Any]) -> Any:
    """The value of an expression of literals: a ``str``, ``bool``, number, ``list`` (``vec![]``,
    ``[..]``), a ``JsonValue`` (``json!``), or a name bound in ``env``; :class:`Unreadable` otherwise."""
    xs = _strip_ref(items)
    line = line_of(items)
    # trailing .to_string() and the like change no value
    while (
        len(xs) >= 4
        and is_tok(xs[-4], "punct", ".")
        and isinstance(xs[-3], Tok)
        and xs[-3].text in _STRING_METHODS
        and isinstance(xs[-1], Group)
        and not xs[-1].items
    ):
        xs = xs[:-4]
    # the argument of String::from(...) / Value::from(...)
    if (
        len(xs) == 4
        and isinstance(xs[0], Tok)
        and xs[0].text in ("String", "Value")
        and is_tok(xs[1], "punct", "::")
        and is_tok(xs[2], "ident", "from")
        and isinstance(xs[3], Group)
        and xs[3].open == "("
    ):
        return evaluate(xs[3].items, env)
    if not xs:
        return Unreadable("an empty expression", line)
    if len(xs) == 1:
        t = xs[0]
        if isinstance(t, Group):
            if t.open == "[":
                return _list(t, env)
            if t.open == "(":
                parts = split(t.items)
                if len(parts) == 1 and not is_tok(t.items[-1], "punct", ","):
                    return evaluate(t.items, env)
                # a tuple: its unreadable fields stay unreadable, the others are still usable
                return tuple(evaluate(p, env) for p in parts)
            return Unreadable(f"a {t.open}...{_CLOSE[t.open]} group", t.line)
        if t.kind in ("str", "char"):
            return t.value
        if t.kind == "num":
            return _number(t.text)
        if t.kind == "ident":
            if t.text in ("true", "false"):
                return t.text == "true"
            if t.text in env:
                return env[t.text]
            return Unreadable(f"the name {t.text!r} (not bound to a literal)", t.line)
        return Unreadable(f"the token {t.text!r}", t.line)
    if len(xs) == 2 and is_tok(xs[0], "punct", "-") and is_tok(xs[1], "num"):
        assert isinstance(xs[1], Tok)
        return -_number(xs[1].text)
    if len(xs) == 3 and is_tok(xs[1], "punct", "!") and isinstance(xs[0], Tok) and isinstance(xs[2], Group):
        name, body = xs[0].text, xs[2]
        if name == "vec":
            return _list(body, env)
        if name == "json":
            return json_value(list(body.items), env)
        if name == "format":
            return _format(body, env)
        return Unreadable(f"the macro {name}!", xs[0].line)
    if len(xs) == 3 and is_tok(xs[0], "ident") and is_tok(xs[1], "punct", "::") and is_tok(xs[2], "ident"):
        assert isinstance(xs[0], Tok) and isinstance(xs[2], Tok)
        key = f"{xs[0].text}::{xs[2].text}"
        if key in env:
            return env[key]
        return Unreadable(f"the path {key}", line)
    head = " ".join(t.text if isinstance(t, Tok) else t.open + "..." for t in xs[:4])
    return Unreadable(f"the expression `{head}`", line)


def _list(group: Group, env: Mapping[str, Any]) -> Any:
    out = []
    for part in split(group.items):
        if any(is_tok(t, "punct", ";") for t in part):
            return Unreadable("an array repeat expression [x; n]", group.line)
        v = evaluate(part, env)
        if isinstance(v, Unreadable):
            return v
        out.append(v)
    return out


@dataclass(frozen=True)
class JsonValue:
    """A ``serde_json::Value`` built by ``json!``; ``value`` as ``json.loads`` gives it."""

    value: Any
    line: int = 0  # where the json! stands

    def text(self) -> str:
        """``serde_json::to_string`` of it (compact, keys in insertion order: ``preserve_order``)."""
        return json.dumps(self.value, ensure_ascii=False, separators=(",", ":"))


def _plain(v: Any) -> Any:
    return v.value if isinstance(v, JsonValue) else v


def json_value(items: list[Tree], env: Mapping[str, Any]) -> Any:
    """The value of ``json!(...)``'s argument (JSON syntax with Rust literals and bound names)."""
    v = _json_value(items, env)
    return JsonValue(v.value, line_of(items)) if isinstance(v, JsonValue) else v


def _json_value(items: list[Tree], env: Mapping[str, Any]) -> Any:
    line = line_of(items)
    if len(items) == 1 and isinstance(items[0], Group) and items[0].open in "{[":
        g = items[0]
        if g.open == "[":
            arr = []
            for part in split(g.items):
                v = json_value(part, env)
                if isinstance(v, Unreadable):
                    return v
                arr.append(v.value)
            return JsonValue(arr)
        obj: dict[str, Any] = {}
        for part in split(g.items):
            colon = next((k for k, t in enumerate(part) if is_tok(t, "punct", ":")), None)
            if colon is None:
                return Unreadable("a json! object member without ':'", line_of(part) or g.line)
            key = evaluate(part[:colon], env)
            if not isinstance(key, str):
                return Unreadable("a json! object key that is not a string literal", line_of(part))
            v = json_value(part[colon + 1 :], env)
            if isinstance(v, Unreadable):
                return v
            obj[key] = v.value
        return JsonValue(obj)
    if len(items) == 1 and is_tok(items[0], "ident", "null"):
        return JsonValue(None)
    v = evaluate(items, env)
    if isinstance(v, Unreadable):
        return v
    if isinstance(v, list):
        return JsonValue([_plain(x) for x in v])
    if isinstance(v, float) and v != v:
        return Unreadable("a NaN in json!", line)
    return JsonValue(_plain(v))


_FMT = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*|[0-9]*)(?::[^}]*)?\}")


def _display(v: Any) -> str | None:
    if isinstance(v, JsonValue):
        return v.text()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int, float)):
        return str(v)
    return None


def _format(group: Group, env: Mapping[str, Any]) -> Any:
    """``format!``: named and positional ``{}`` with Display of known values (``{:?}`` and other specs
    are unreadable)."""
    parts = split(group.items)
    if not parts:
        return Unreadable("format! without arguments", group.line)
    fmt = evaluate(parts[0], env)
    if not isinstance(fmt, str):
        return Unreadable("format! with a format string that is not a literal", group.line)
    positional: list[Any] = []
    named: dict[str, Any] = {}
    for p in parts[1:]:
        if len(p) >= 2 and is_tok(p[0], "ident") and is_tok(p[1], "punct", "="):
            assert isinstance(p[0], Tok)
            named[p[0].text] = evaluate(p[2:], env)
        else:
            positional.append(evaluate(p, env))
    out: list[str] = []
    pos = 0
    last = 0
    for m in _FMT.finditer(fmt):
        out.append(fmt[last : m.start()])
        last = m.end()
        tok = m.group(0)
        if tok in ("{{", "}}"):
            out.append(tok[0])
            continue
        if ":" in tok:
            return Unreadable(f"format! spec {tok}", group.line)
        name = m.group(1)
        if name == "":
            if pos >= len(positional):
                return Unreadable("format! with too few arguments", group.line)
            v = positional[pos]
            pos += 1
        elif name.isdigit():
            index = int(name)
            v = positional[index] if index < len(positional) else Unreadable("format! index", group.line)
        elif name in named:
            v = named[name]
        else:
            v = env.get(name, Unreadable(f"format! name {name}", group.line))
        text = _display(v)
        if text is None:
            if isinstance(v, Unreadable):
                return v
            return Unreadable(f"format! of a {type(v).__name__}", group.line)
        out.append(text)
    out.append(fmt[last:])
    return "".join(out)
