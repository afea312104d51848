"""Standalone reproducer scripts for findings (DESIGN §6: "a standalone reproducer script that uses
only the backend's own API").

Theory of operation. :func:`write_reproducers` writes, under ``<out_dir>/repro/``:

* ``vocab-<fingerprint[:12]>.json`` once per vocabulary: ``{"name", "kind", "fingerprint",
  "token_bytes": [hex | null], "eos_ids", "special_ids", "special_names": {id: name}}``;
* ``<finding.id>.py`` per finding: a script that imports only the backend's package (``xgrammar``,
  ``llguidance``, ``outlines_core``, ``lmformatenforcer``; ``refdecoder`` for backend ``reference``)
  and the standard library. It loads the vocabulary file next to it, builds the backend's tokenizer
  object and compiles the spec exactly as ``props/adapters/<backend>.py`` does (the same options:
  the adapter's defaults overridden by ``adapter_options``), replays ``finding.prefix_ids`` and
  recomputes the behaviour with the backend.

A script is generated from fixed code blocks (one per backend, one shared); the finding's data
(spec, ids, certificate, options) is embedded only as ``json.loads(<repr of a JSON text>)``, so
nothing from a finding is ever spliced into code. What a script checks, by invariant:

* token findings (soundness, eos, completeness_*, liveness, utf8): the backend's mask bit for
  ``token_id`` after the prefix (EOS: any EOS id; ``token_id`` null: EOS, or for liveness an empty
  mask) against the reference's verdict; the defect is there iff the two still differ. The
  certificate (witness / witness_ids, completion / validator_error) is printed, and witness or
  completion ids are replayed on the backend for information.
* serving findings (fork, rollback, speculative, jump_forward, determinism): the certificate's
  ``operations`` are replayed from a fresh matcher (matcher 0; ``prefix_ids`` are *not* replayed
  first, the operations hold every accept). Ops: ``["accept", id]``, ``["fork"]`` (appends a fork of
  the current matcher; the current one stays), ``["switch", n]``, ``["rollback", k]``, ``["mask"]``,
  ``["validate", [ids]]``, ``["forced_bytes"]``, ``["accepting"]``, ``["new"]`` (a fresh matcher on
  the same compiled grammar), ``["compile"]`` (a fresh matcher on a fresh compile). The observation
  is the result of the *last* observing op (mask -> allowed ids, accept/accepting -> bool,
  validate -> int, forced_bytes -> bytes; a backend exception -> its text); the defect is there iff
  it differs from ``certificate["expected"]`` (or, without ``expected``, equals
  ``certificate["observed"]``).
* crash / limits: compile, replay the prefix, the token and the operations in a child process
  (``sys.executable <script> --child``), so that a segfault is seen; crash reproduces on a signal or
  a non-refusal exception, limits also on a run longer than the budget (``certificate["budget_s"]``,
  ``"limit_s"`` or ``"budget_ms"``; 10 s by default).
* refusal: the spec compiles and the backend lets ``certificate["invalid_instance"]`` (serialized
  compactly, or ``"invalid_text"`` / ``"invalid_ids"``) run to EOS.

Exit codes: 1 with ``REPRODUCED: ...``; 0 with ``NOT REPRODUCED: ...``; 2 with ``INCONCLUSIVE: ...``
when the step cannot be reached (a prefix token is now rejected, verdict words not understood).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from props.contract.findings import SEVERITY, Finding
from refdecoder.errors import MaskcertError

__all__ = [
    "ADAPTER_DEFAULTS",
    "BACKEND_PACKAGES",
    "ReproError",
    "render_reproducer",
    "verdict_allows",
    "vocabulary_json",
    "vocabulary_file_name",
    "write_reproducers",
]

TOKEN_INVARIANTS = frozenset(
    {"soundness", "eos", "completeness_canonical", "completeness_token", "completeness_byte", "liveness", "utf8"}
)
SERVING_INVARIANTS = frozenset({"fork", "rollback", "speculative", "jump_forward", "determinism"})

# backend name -> (import name, pip distribution)
BACKEND_PACKAGES: dict[str, tuple[str, str]] = {
    "reference": ("refdecoder", "maskcert"),
    "xgrammar": ("xgrammar", "xgrammar"),
    "llguidance": ("llguidance", "llguidance"),
    "outlines-core": ("outlines_core", "outlines-core"),
    "lm-format-enforcer": ("lmformatenforcer", "lm-format-enforcer"),
}

# The adapters' constructor defaults (props/adapters/*.py), which ``adapter_options`` override.
# tests/test_repro.py checks them against the adapters' signatures.
ADAPTER_DEFAULTS: dict[str, dict[str, Any]] = {
    "reference": {"profile": None},
    "xgrammar": {
        "any_whitespace": True,
        "max_whitespace_cnt": None,
        "strict_mode": True,
        "max_threads": 8,
        "cache_enabled": True,
    },
    "llguidance": {"whitespace_flexible": True, "general_unicode_escapes": True, "limits": None, "log_level": 1},
    "outlines-core": {"whitespace_pattern": r"[ \t\n\r]?", "max_recursion_depth": 3, "max_rollback": 4096},
    "lm-format-enforcer": {"max_consecutive_whitespaces": 12},
}


class ReproError(MaskcertError, ValueError):
    """A reproducer cannot be written: ``what`` names the finding or vocabulary, ``expected`` what
    was needed."""

    def __init__(self, what: str, expected: str) -> None:
        self.what = what
        self.expected = expected
        super().__init__(f"cannot write a reproducer for {what}: expected {expected}")


# -- data ---------------------------------------------------------------------------------------------


def vocabulary_file_name(fingerprint: str) -> str:
    return f"vocab-{fingerprint[:12]}.json"


def vocabulary_json(vocabulary: Any) -> dict[str, Any]:
    """The vocabulary file a reproducer loads (token bytes as hex, ``null`` for special ids)."""
    names = dict(getattr(vocabulary, "special_names", ()) or ())
    return {
        "name": str(getattr(vocabulary, "name", "")),
        "kind": str(getattr(vocabulary, "kind", "")),
        "fingerprint": str(vocabulary.fingerprint),
        "token_bytes": [None if b is None else bytes(b).hex() for b in vocabulary.token_bytes],
        "eos_ids": sorted(int(i) for i in vocabulary.eos_ids),
        "special_ids": sorted(int(i) for i in vocabulary.special_ids),
        "special_names": {str(int(i)): str(n) for i, n in sorted(names.items())},
    }


_ALLOW_WORDS = ("allow", "accept", "offer", "permit", "open")
_MASK_WORDS = ("not ", "masked", "reject", "withheld", "block", "refus", "forbid", "disallow", "closed")


def verdict_allows(word: str) -> bool | None:
    """Whether a verdict word ("allowed", "masked", "eos offered", "eos not offered", ...) says the
    token (or EOS) may come next; ``None`` when the word says neither."""
    w = f" {word.strip().lower()} "
    if any(m in w for m in _MASK_WORDS):
        return False
    if any(a in w for a in _ALLOW_WORDS):
        return True
    return None


def _options(backend: str, adapter_options: dict[str, Any] | None) -> dict[str, Any]:
    out = dict(ADAPTER_DEFAULTS[backend])
    for key, value in (adapter_options or {}).items():
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)  # a JsonProfile
        out[str(key)] = value
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ReproError(f"backend {backend!r} options", f"JSON values ({e})") from e
    return out


def _literal(value: Any) -> str:
    """``value`` as Python source: ``json.loads('<ascii JSON>')`` (``repr`` of a str is always a
    valid literal, so no data can close it)."""
    return f"json.loads({json.dumps(value, ensure_ascii=True, sort_keys=True, allow_nan=False)!r})"


_SAFE = re.compile(r"[^A-Za-z0-9 _.,:;/@+=()\-]")


def _doc_text(text: str, limit: int = 100) -> str:
    """Text safe inside the script's docstring: a small character set, bounded length."""
    flat = _SAFE.sub("?", " ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _shows(f: Finding) -> str:
    if f.invariant in TOKEN_INVARIANTS:
        what = "EOS" if f.token_id is None else f"token {f.token_id}"
        if f.invariant == "liveness" and f.token_id is None:
            return f"the mask after {f.step} tokens is empty before termination"
        return (
            f"after {f.step} prefix tokens, the backend's verdict on {what} "
            f"({_doc_text(f.backend_verdict, 30)}) differs from the reference ({_doc_text(f.reference_verdict, 30)})"
        )
    if f.invariant in SERVING_INVARIANTS:
        return "replaying the certificate's operations, the last observation differs from the expected one"
    if f.invariant == "refusal":
        return "the backend compiles the spec and lets an instance the schema forbids run to EOS"
    if f.invariant == "limits":
        return "compiling (and walking) the spec exceeds the time budget or fails"
    return "compiling / walking the spec raises an exception or kills the process"


def render_reproducer(finding: Finding, vocab_file: str, adapter_options: dict[str, Any] | None = None) -> str:
    """The source of ``finding``'s reproducer script (see the module docstring)."""
    if finding.backend not in BACKEND_PACKAGES:
        raise ReproError(f"finding {finding.id}", f"a backend in {sorted(BACKEND_PACKAGES)}, not {finding.backend!r}")
    module, dist = BACKEND_PACKAGES[finding.backend]
    options = _options(finding.backend, adapter_options)
    reference_allows = verdict_allows(finding.reference_verdict)
    if reference_allows is None:
        backend_allows = verdict_allows(finding.backend_verdict)
        reference_allows = None if backend_allows is None else not backend_allows
    header = (
        f'"""maskcert reproducer {finding.id}: {finding.invariant} ({SEVERITY[finding.invariant]}) '
        f"in {_doc_text(finding.backend, 40)} {_doc_text(finding.backend_version, 30)}.\n\n"
        f"Shows: {_shows(finding)}.\n"
        f"Spec: {finding.spec.kind} {_doc_text(finding.spec.name or finding.spec.digest, 60)}; "
        f"tokenizer {_doc_text(finding.tokenizer, 40)} (vocabulary file {vocab_file}, next to this script).\n\n"
        f"Run:   python3 {finding.id}.py\n"
        f"Needs: the {module} package only (pip install {dist}) and the Python standard library.\n"
        "Exit:  1 and 'REPRODUCED: ...' when the backend still shows the defect, 0 and 'NOT REPRODUCED: ...'\n"
        "       when it does not, 2 and 'INCONCLUSIVE: ...' when the step cannot be reached.\n"
        '"""\n'
    )
    data = (
        f"FINDING = {_literal(finding.to_json())}\n"
        f"OPTIONS = {_literal(options)}\n"
        f"VOCAB_FILE = {vocab_file!r}\n"
        f"REFERENCE_ALLOWS = {reference_allows!r}\n"
    )
    return "".join((header, _PRELUDE, data, _HELPERS, _BACKENDS[finding.backend], _MAIN))


def write_reproducers(
    findings: list[Finding],
    vocabularies: dict[str, Any],
    out_dir: Path,
    adapter_options: dict[str, Any] | None = None,
) -> list[Finding]:
    """Write ``out_dir/repro/<id>.py`` per finding and ``vocab-<fp12>.json`` per vocabulary used;
    return the findings with ``repro`` set to the script's path relative to ``out_dir``.

    ``vocabularies`` maps fingerprint -> ``tokenizers_matrix.Vocabulary``; a finding whose
    fingerprint is missing raises :class:`ReproError`. Findings of a backend this module has no
    code for (a custom ``module:Class`` adapter) come back unchanged, with ``repro`` empty."""
    repro_dir = Path(out_dir) / "repro"
    written: set[str] = set()
    out: list[Finding] = []
    for f in findings:
        if f.backend not in BACKEND_PACKAGES:
            out.append(f)
            continue
        vocabulary = vocabularies.get(f.tokenizer_fingerprint)
        if vocabulary is None:
            raise ReproError(
                f"finding {f.id} (tokenizer {f.tokenizer!r})",
                f"its vocabulary fingerprint {f.tokenizer_fingerprint[:12]!r} among the vocabularies given",
            )
        repro_dir.mkdir(parents=True, exist_ok=True)
        vocab_file = vocabulary_file_name(f.tokenizer_fingerprint)
        if vocab_file not in written:
            (repro_dir / vocab_file).write_text(
                json.dumps(vocabulary_json(vocabulary), separators=(",", ":")), encoding="utf-8"
            )
            written.add(vocab_file)
        script = repro_dir / f"{f.id}.py"
        script.write_text(render_reproducer(f, vocab_file, adapter_options), encoding="utf-8")
        out.append(f.with_(repro=f"repro/{f.id}.py"))
    return out


# -- script code --------------------------------------------------------------------------------------
# The blocks below are the text of the generated scripts, not code of this module.

_PRELUDE = '''
import json
import subprocess
import sys
import time
from pathlib import Path

'''

_HELPERS = r'''
INVARIANT = FINDING["invariant"]
SPEC = FINDING["spec"]
CERT = FINDING.get("certificate") or {}
PREFIX_IDS = list(FINDING.get("prefix_ids") or [])
TOKEN_ID = FINDING.get("token_id")
TOKEN_INVARIANTS = {"soundness", "eos", "completeness_canonical", "completeness_token", "completeness_byte",
                    "liveness", "utf8"}
SERVING_INVARIANTS = {"fork", "rollback", "speculative", "jump_forward", "determinism"}


class Refusal(Exception):
    """The adapter's refusal of a spec it has no form for (an empty choice list, GBNF, ...)."""


class Outcome(Exception):
    def __init__(self, reproduced, message):
        super().__init__(message)
        self.reproduced = reproduced
        self.message = message


def load_vocab():
    data = json.loads(Path(__file__).with_name(VOCAB_FILE).read_text(encoding="utf-8"))
    token_bytes = [None if h is None else bytes.fromhex(h) for h in data["token_bytes"]]
    names = {int(k): v for k, v in (data.get("special_names") or {}).items()}
    return {
        "name": data.get("name", ""),
        "token_bytes": token_bytes,
        "size": len(token_bytes),
        "eos_ids": sorted(data["eos_ids"]),
        "special_ids": sorted(data["special_ids"]),
        "special_names": names,
        "lookup": {b: i for i, b in reversed(list(enumerate(token_bytes))) if b is not None},
        "max_len": max((len(b) for b in token_bytes if b is not None), default=1),
    }


def token_repr(vocab, token_id):
    if token_id is None:
        return "EOS"
    if not 0 <= token_id < vocab["size"]:
        return f"{token_id} <out of range>"
    data = vocab["token_bytes"][token_id]
    if data is None:
        return f"{token_id} {vocab['special_names'].get(token_id, '<special>')}"
    return f"{token_id} {data!r}"


def encode(vocab, data):
    """The fewest-token segmentation of ``data`` (maskcert's encoding for a codec-less vocabulary)."""
    best = [None] * (len(data) + 1)
    best[0] = []
    for i in range(len(data)):
        if best[i] is None:
            continue
        for n in range(1, min(vocab["max_len"], len(data) - i) + 1):
            t = vocab["lookup"].get(data[i:i + n])
            if t is not None and (best[i + n] is None or len(best[i]) + 1 < len(best[i + n])):
                best[i + n] = best[i] + [t]
    if best[-1] is None:
        raise ValueError(f"{data!r} cannot be segmented into this vocabulary's tokens")
    return best[-1]


def bits_to_ids(words, size):
    """Allowed ids from 32-bit mask words (xgrammar's layout: bit t & 31 of word t >> 5)."""
    out = []
    for w_index, word in enumerate(words):
        word &= 0xFFFFFFFF
        while word:
            low = word & -word
            t = w_index * 32 + low.bit_length() - 1
            if t < size:
                out.append(t)
            word ^= low
    return out


def gbnf_parts(source):
    if isinstance(source, dict):
        return source["text"], source.get("root", "root")
    return source, "root"


def as_bytes(value):
    """Certificate bytes: {"hex": ...}, a str (UTF-8) or a list of byte values."""
    if isinstance(value, dict) and "hex" in value:
        return bytes.fromhex(value["hex"])
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):
        return bytes(value)
    return value


def show(value):
    if isinstance(value, dict) and "hex" in value:
        return repr(bytes.fromhex(value["hex"]))
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)
'''

_BACKEND_XGRAMMAR = r'''
# -- xgrammar, as props/backends/xgrammar.py drives it ------------------------------------------------
import xgrammar as xgr


class Engine:
    def __init__(self, vocab):
        self.vocab = vocab
        encoded = [b if b is not None else b"" for b in vocab["token_bytes"]]
        info = xgr.TokenizerInfo(
            encoded, xgr.VocabType.RAW, vocab_size=len(encoded), stop_token_ids=list(vocab["eos_ids"])
        )
        self.compiler = xgr.GrammarCompiler(
            info, max_threads=OPTIONS["max_threads"], cache_enabled=OPTIONS["cache_enabled"]
        )

    def compile(self, spec):
        kind, source = spec["kind"], spec["source"]
        if kind == "json_schema":
            kwargs = {"any_whitespace": OPTIONS["any_whitespace"], "strict_mode": OPTIONS["strict_mode"]}
            if not OPTIONS["any_whitespace"]:
                kwargs["separators"] = (",", ":")
            if OPTIONS["max_whitespace_cnt"] is not None:
                kwargs["max_whitespace_cnt"] = OPTIONS["max_whitespace_cnt"]
            return self.compiler.compile_json_schema(json.dumps(source), **kwargs)
        if kind == "regex":
            return self.compiler.compile_regex(source)
        if kind == "gbnf":
            text, root = gbnf_parts(source)
            return self.compiler.compile_grammar(text, root_rule_name=root)
        if not source:
            raise Refusal("xgrammar: an empty choice list has no EBNF form")
        return self.compiler.compile_grammar(
            "root ::= " + " | ".join(json.dumps(o, ensure_ascii=False) for o in source)
        )

    def is_refusal(self, exc):
        # converter/parser errors are RuntimeErrors; "Check failed" is a C++ assertion (a bug)
        return isinstance(exc, Refusal) or (isinstance(exc, RuntimeError) and "Check failed" not in str(exc))

    def matcher(self, compiled):
        return Matcher(self.vocab, compiled, xgr.GrammarMatcher(compiled), [])


class Matcher:
    def __init__(self, vocab, compiled, native, ids):
        self.vocab, self.compiled, self.native, self.ids = vocab, compiled, native, ids

    def allowed_ids(self):
        if self.native.is_terminated():
            return []
        bitmask = xgr.allocate_token_bitmask(1, self.vocab["size"])
        bitmask.zero_()
        self.native.fill_next_token_bitmask(bitmask)
        return bits_to_ids(bitmask[0].tolist(), self.vocab["size"])

    def accept(self, t):
        if not 0 <= t < self.vocab["size"] or self.native.is_terminated():
            return False
        ok = bool(self.native.accept_token(t))
        if ok:
            self.ids.append(t)
        return ok

    def is_accepting(self):
        return bool(self.native.is_completed()) and not self.native.is_terminated()

    def is_terminated(self):
        return bool(self.native.is_terminated())

    def rollback(self, k):
        if not 0 <= k <= len(self.ids):
            raise ValueError(f"rollback({k}): can undo between 0 and {len(self.ids)} tokens")
        if k:
            self.native.rollback(k)
            del self.ids[len(self.ids) - k:]

    def fork(self):
        fork = getattr(self.native, "fork", None)
        if fork is not None:
            return Matcher(self.vocab, self.compiled, fork(), list(self.ids))
        native = xgr.GrammarMatcher(self.compiled)
        for t in self.ids:
            native.accept_token(t)
        return Matcher(self.vocab, self.compiled, native, list(self.ids))

    def forced_bytes(self):
        if self.native.is_terminated():
            return b""
        return str(self.native.find_jump_forward_string()).encode("utf-8")

    def validate(self, ids):
        n = 0
        for t in ids:
            if not 0 <= t < self.vocab["size"] or self.native.is_terminated() or not self.native.accept_token(t):
                break
            n += 1
        if n:
            self.native.rollback(n)
        return n
'''

_BACKEND_LLGUIDANCE = r'''
# -- llguidance, as props/backends/llguidance.py drives it --------------------------------------------
import llguidance as llg


class ByteTokenizer:
    """What llguidance.TokenizerWrapper expects: special ids as b"\xff" + name; encode() is the
    fewest-token segmentation (the adapter uses the vocabulary's own encode)."""

    def __init__(self, vocab):
        self.vocab = vocab
        self.eos_token_id = vocab["eos_ids"][0]
        self.bos_token_id = None
        self.tokens = []
        for i, data in enumerate(vocab["token_bytes"]):
            if data is None:
                data = b"\xff" + vocab["special_names"].get(i, f"<special_{i}>").encode("utf-8")
            self.tokens.append(data)
        self.special_token_ids = list(vocab["special_ids"])

    def __call__(self, text):
        if not isinstance(text, str):
            raise TypeError("this tokenizer takes str")
        return encode(self.vocab, text.encode("utf-8"))


class Engine:
    def __init__(self, vocab):
        self.vocab = vocab
        self.tokenizer = llg.LLTokenizer(llg.TokenizerWrapper(ByteTokenizer(vocab)), eos_token=list(vocab["eos_ids"]))
        self.limits = llg.LLParserLimits(**OPTIONS["limits"]) if OPTIONS["limits"] else None

    def grammar(self, spec):
        kind, source = spec["kind"], spec["source"]
        if kind == "json_schema":
            if source is False:
                return str(llg.LLMatcher.grammar_from_json_schema("false"))
            schema = {} if source is True else source
            overrides = {
                "whitespace_flexible": OPTIONS["whitespace_flexible"],
                "json_allow_general_unicode_escapes": OPTIONS["general_unicode_escapes"],
            }
            return str(llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=overrides))
        if kind == "regex":
            return str(llg.LLMatcher.grammar_from_regex(source))
        if kind == "choice":
            if not source:
                raise Refusal("llguidance: an empty choice list has no grammar form")
            return str(llg.grammar_from("choice", json.dumps(list(source))))
        text, root = gbnf_parts(source)
        if root != "root":
            import re

            if re.search(r"(?m)^\s*root\s*::=", text):
                raise Refusal("llguidance: GBNF start rule must be 'root', and 'root' names another rule")
            text = f"root ::= {root}\n{text}"
        try:
            return str(llg.grammar_from("gbnf", text))
        except ValueError as e:
            raise Refusal(f"llguidance: {e}") from e

    def compile(self, spec):
        grammar = self.grammar(spec)
        is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(grammar, self.tokenizer, limits=self.limits)
        if is_error:
            raise Refusal("llguidance: " + (messages[0] if messages else "grammar error"))
        return grammar

    def is_refusal(self, exc):
        return isinstance(exc, Refusal)

    def matcher(self, grammar):
        native = llg.LLMatcher(self.tokenizer, grammar, log_level=OPTIONS["log_level"], limits=self.limits)
        if native.is_error():
            raise RuntimeError(f"llguidance LLMatcher(): {native.get_error()}")
        return Matcher(self.vocab, native, [])


class Matcher:
    def __init__(self, vocab, native, ids):
        self.vocab, self.native, self.ids = vocab, native, ids

    def check(self, operation):
        if self.native.is_error():
            raise RuntimeError(f"llguidance {operation}: {self.native.get_error()}")

    def is_terminated(self):
        return bool(self.ids) and self.ids[-1] in self.vocab["eos_ids"]

    def allowed_ids(self):
        if self.is_terminated():
            return []
        raw = bytes(self.native.compute_bitmask())
        self.check("compute_bitmask")
        words = [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw) - len(raw) % 4, 4)]
        return bits_to_ids(words, self.vocab["size"])

    def accept(self, t):
        # consume_token's verdict without entering llguidance's sticky error state (as the adapter)
        if not 0 <= t < self.vocab["size"] or self.is_terminated():
            return False
        n = self.native.validate_tokens([t])
        self.check("validate_tokens")
        if n >= 1:
            if not self.native.consume_token(t):
                raise RuntimeError(f"llguidance consume_token refused a token validate_tokens accepted: {t}")
        else:
            probe = self.native.deep_copy()
            if not probe.consume_token(t):
                return False
            self.native = probe
        self.ids.append(t)
        return True

    def is_accepting(self):
        return not self.is_terminated() and bool(self.native.is_accepting())

    def rollback(self, k):
        if not 0 <= k <= len(self.ids):
            raise ValueError(f"rollback({k}): can undo between 0 and {len(self.ids)} tokens")
        if k:
            if not self.native.rollback(k):
                raise RuntimeError(f"llguidance rollback: {self.native.get_error()}")
            del self.ids[len(self.ids) - k:]

    def fork(self):
        return Matcher(self.vocab, self.native.deep_copy(), list(self.ids))

    def forced_bytes(self):
        if self.is_terminated():
            return b""
        out = bytes(self.native.compute_ff_bytes())
        self.check("compute_ff_bytes")
        return out

    def validate(self, ids):
        if self.is_terminated():
            return 0
        n = int(self.native.validate_tokens(list(ids)))
        self.check("validate_tokens")
        return n
'''

_BACKEND_OUTLINES = r'''
# -- outlines-core, as props/backends/outlines_core.py drives it --------------------------------------
import ctypes

import outlines_core as oc
from outlines_core.json_schema import build_regex_from_schema

META = set("\\.+*?()|[]{}^$#&-~")


def escape(text):
    out = []
    for ch in text:
        if ch in META:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return "".join(out)


class Engine:
    def __init__(self, vocab):
        self.vocab = vocab
        table = {}
        for i, data in enumerate(vocab["token_bytes"]):
            if data is not None:
                table.setdefault(data, []).append(i)
        self.eos_id = min(vocab["eos_ids"])  # outlines-core has one EOS id
        self.oc_vocab = oc.Vocabulary(self.eos_id, table)

    def regex(self, spec):
        kind, source = spec["kind"], spec["source"]
        if kind == "regex":
            return source
        if kind == "choice":
            if not source:
                raise Refusal("outlines-core: an empty choice list has no regex form")
            return "|".join(escape(o) for o in source)
        if kind == "json_schema":
            return str(build_regex_from_schema(
                json.dumps(source),
                whitespace_pattern=OPTIONS["whitespace_pattern"],
                max_recursion_depth=OPTIONS["max_recursion_depth"],
            ))
        raise Refusal("outlines-core compiles regular expressions only; GBNF is a context-free grammar")

    def compile(self, spec):
        regex = self.regex(spec)
        print(f"outlines-core regex: {regex[:300]!r}")
        return oc.Index(regex, self.oc_vocab)

    def is_refusal(self, exc):
        return isinstance(exc, (Refusal, ValueError))

    def matcher(self, index):
        return Matcher(self, index, oc.Guide(index, max_rollback=OPTIONS["max_rollback"]), [], False)


class Matcher:
    def __init__(self, engine, index, guide, ids, terminated):
        self.engine, self.index, self.guide, self.ids, self.terminated = engine, index, guide, ids, terminated
        self.size = engine.vocab["size"]

    def raw_allowed(self):
        n = (self.size + 31) // 32
        buf = (ctypes.c_int32 * n)()
        self.guide.write_mask_into(ctypes.addressof(buf), n, 4)
        return bits_to_ids(list(buf), self.size)

    def allowed_ids(self):
        return [] if self.terminated else self.raw_allowed()

    def accept(self, t):
        if not 0 <= t < self.size or self.terminated:
            return False
        if t == self.engine.eos_id:  # EOS has no Index transition: the caller stops (as the adapter)
            if t not in self.raw_allowed():
                return False
            self.terminated = True
            return True
        if self.index.get_next_state(self.guide.get_state(), t) is None:
            return False
        self.guide.advance(t, return_tokens=False)
        self.ids.append(t)
        return True

    def is_accepting(self):
        return not self.terminated and bool(self.guide.is_finished())

    def is_terminated(self):
        return self.terminated

    def replay(self, ids):
        guide = oc.Guide(self.index, max_rollback=OPTIONS["max_rollback"])
        for t in ids:
            guide.advance(t, return_tokens=False)
        return guide

    def rollback(self, k):
        total = len(self.ids) + int(self.terminated)
        if not 0 <= k <= total:
            raise ValueError(f"rollback({k}): can undo between 0 and {total} tokens")
        if k and self.terminated:
            self.terminated = False
            k -= 1
        if k == 0:
            return
        if k <= self.guide.get_allowed_rollback():
            self.guide.rollback_state(k)
            del self.ids[len(self.ids) - k:]
        else:
            del self.ids[len(self.ids) - k:]
            self.guide = self.replay(self.ids)

    def fork(self):
        return Matcher(self.engine, self.index, self.replay(self.ids), list(self.ids), self.terminated)

    def forced_bytes(self):
        raise NotImplementedError("outlines-core has no jump-forward API")

    def validate(self, ids):
        state, n = self.guide.get_state(), 0
        for t in ids:
            if t == self.engine.eos_id:
                break
            state = self.index.get_next_state(state, t)
            if state is None:
                break
            n += 1
        return n
'''

_BACKEND_LMFE = r'''
# -- lm-format-enforcer, as props/backends/lmfe.py drives it ------------------------------------------
from lmformatenforcer import (
    CharacterLevelParserConfig,
    JsonSchemaParser,
    LMFormatEnforcerException,
    RegexParser,
    StringParser,
    TokenEnforcer,
    TokenEnforcerTokenizerData,
    UnionParser,
)

REFUSAL_PREFIXES = (
    "Unsupported type",
    "Unsupported enum type",
    "No definitions found",
    "JsonSchemaParser: Value schema is None",
)


class Engine:
    def __init__(self, vocab):
        self.vocab = vocab
        regular = [
            (i, data.decode("utf-8", errors="replace"), False)
            for i, data in enumerate(vocab["token_bytes"])
            if data is not None
        ]
        table = vocab["token_bytes"]

        def decode(ids):
            data = b"".join(table[i] for i in ids if table[i] is not None)
            return data.decode("utf-8", errors="replace").rstrip("\ufffd")

        self.data = TokenEnforcerTokenizerData(regular, decode, list(vocab["eos_ids"]), False, vocab["size"])

    def compile(self, spec):
        config = CharacterLevelParserConfig(
            alphabet=self.data.tokenizer_alphabet,
            max_consecutive_whitespaces=OPTIONS["max_consecutive_whitespaces"],
            force_json_field_order=False,
            max_json_array_length=0,
        )
        kind, source = spec["kind"], spec["source"]
        if kind == "json_schema":
            if source is False:
                raise Refusal("lm-format-enforcer: JsonSchemaParser has no form of the empty schema 'false'")
            parser = JsonSchemaParser(None if source is True else source, config)
        elif kind == "regex":
            parser = RegexParser(source, config)
        elif kind == "choice":
            if not source:
                raise Refusal("lm-format-enforcer: an empty choice list has no parser form")
            parser = UnionParser([StringParser(o) for o in source])
        else:
            raise Refusal("lm-format-enforcer has no context-free grammar parser for GBNF")
        enforcer = TokenEnforcer(self.data, parser)
        parser.config = config  # TokenEnforcer replaces it; the adapter puts its own back
        return enforcer

    def is_refusal(self, exc):
        if isinstance(exc, (Refusal, LMFormatEnforcerException)):
            return True
        for cls in type(exc).__mro__:
            if (cls.__module__.startswith("pydantic") and cls.__name__ == "ValidationError") or (
                cls.__module__.startswith("interegular") and cls.__name__ in ("Unsupported", "InvalidSyntax")
            ):
                return True
        return type(exc) in (Exception, ValueError) and str(exc).startswith(REFUSAL_PREFIXES)

    def matcher(self, enforcer):
        return Matcher(self.vocab, enforcer, [])


class Matcher:
    def __init__(self, vocab, enforcer, ids):
        self.vocab, self.enforcer, self.ids = vocab, enforcer, ids

    def is_terminated(self):
        return bool(self.ids) and self.ids[-1] in self.vocab["eos_ids"]

    def allowed_ids(self):
        if self.is_terminated():
            return []
        return sorted(set(self.enforcer.get_allowed_tokens(list(self.ids)).allowed_tokens))

    def accept(self, t):
        if not 0 <= t < self.vocab["size"] or self.is_terminated() or t not in self.allowed_ids():
            return False
        self.ids.append(t)
        return True

    def is_accepting(self):
        return not self.is_terminated() and any(e in self.allowed_ids() for e in self.vocab["eos_ids"])

    def rollback(self, k):
        if not 0 <= k <= len(self.ids):
            raise ValueError(f"rollback({k}): can undo between 0 and {len(self.ids)} tokens")
        del self.ids[len(self.ids) - k:]

    def fork(self):
        return Matcher(self.vocab, self.enforcer, list(self.ids))

    def forced_bytes(self):
        raise NotImplementedError("lm-format-enforcer has no jump-forward API")

    def validate(self, ids):
        probe, n = self.fork(), 0
        for t in ids:
            if not probe.accept(t):
                break
            n += 1
        return n
'''

_BACKEND_REFERENCE = r'''
# -- maskcert's reference (refdecoder), as props/backends/reference.py drives it ------------------------
import refdecoder


class Vocab:
    def __init__(self, vocab):
        self.token_bytes = tuple(vocab["token_bytes"])
        self.eos_ids = frozenset(vocab["eos_ids"])
        self.special_ids = frozenset(vocab["special_ids"])

    def __len__(self):
        return len(self.token_bytes)


class Engine:
    def __init__(self, vocab):
        self.vocab = vocab
        self.ref_vocab = Vocab(vocab)

    def compile(self, spec):
        kind, source = spec["kind"], spec["source"]
        if kind == "json_schema":
            profile = OPTIONS.get("profile") or spec.get("profile") or {"allow_duplicate_keys": True}
            s = refdecoder.JsonSchema(source, refdecoder.JsonProfile(**profile))
        elif kind == "regex":
            s = refdecoder.Regex(source)
        elif kind == "gbnf":
            text, root = gbnf_parts(source)
            s = refdecoder.Gbnf(text, root)
        else:
            s = refdecoder.Choice(source)
        return refdecoder.TokenGrammar(refdecoder.compile(s), self.ref_vocab)

    def is_refusal(self, exc):
        return isinstance(exc, (Refusal, refdecoder.Unsupported, refdecoder.LimitExceeded))

    def matcher(self, token_grammar):
        return Matcher(refdecoder.Matcher(token_grammar))


class Matcher:
    def __init__(self, native):
        self.native = native

    def allowed_ids(self):
        return list(self.native.allowed_ids())

    def accept(self, t):
        return isinstance(self.native.accept(t), refdecoder.Accepted)

    def is_accepting(self):
        return self.native.is_accepting()

    def is_terminated(self):
        return self.native.is_terminated()

    def rollback(self, k):
        self.native.rollback(k)

    def fork(self):
        return Matcher(self.native.fork())

    def forced_bytes(self):
        return self.native.forced_bytes()

    def validate(self, ids):
        return self.native.validate(list(ids))
'''

_BACKENDS: dict[str, str] = {
    "reference": _BACKEND_REFERENCE,
    "xgrammar": _BACKEND_XGRAMMAR,
    "llguidance": _BACKEND_LLGUIDANCE,
    "outlines-core": _BACKEND_OUTLINES,
    "lm-format-enforcer": _BACKEND_LMFE,
}

_MAIN = r'''

# -- what the finding claims, recomputed ------------------------------------------------------------


def verdict(allows):
    return "allowed" if allows else "masked"


def compile_spec(engine):
    """The compiled spec; a refusal ends the check (the backend no longer accepts the spec)."""
    try:
        return engine.compile(SPEC)
    except Exception as e:
        if engine.is_refusal(e):
            raise Outcome(False, f"the backend now refuses the spec: {type(e).__name__}: {e}") from e
        raise Outcome(None, f"compiling the spec raised {type(e).__name__}: {e}") from e


def replay(vocab, m, ids, what):
    for i, t in enumerate(ids):
        if not m.accept(t):
            raise Outcome(None, f"the backend rejects {what} token {i} ({token_repr(vocab, t)}); "
                                f"the finding's step cannot be reached")


def try_walk(vocab, engine, handle, ids, what):
    """Information: how far the backend follows ``ids`` from the start, and whether EOS ends it."""
    m = engine.matcher(handle)
    for i, t in enumerate(ids):
        if t in vocab["eos_ids"]:
            ok = any(e in m.allowed_ids() for e in vocab["eos_ids"])
            print(f"  backend on {what}: EOS after {i} tokens is {verdict(ok)}")
            return
        if not m.accept(t):
            print(f"  backend on {what}: token {i} ({token_repr(vocab, t)}) is rejected")
            return
    eos = any(e in m.allowed_ids() for e in vocab["eos_ids"])
    print(f"  backend on {what}: all {len(ids)} tokens accepted; EOS then {verdict(eos)}")


def show_certificate(vocab, engine, handle):
    if not CERT:
        return
    print("certificate:")
    for key in ("witness", "witness_ids", "validated_by", "completion", "completion_ids", "validator_error"):
        if key in CERT:
            print(f"  {key}: {show(CERT[key])}")
    for key in sorted(set(CERT) - {"witness", "witness_ids", "validated_by", "completion", "completion_ids",
                                   "validator_error", "operations"}):
        print(f"  {key}: {show(CERT[key])[:500]}")
    if CERT.get("witness_ids"):
        try_walk(vocab, engine, handle, list(CERT["witness_ids"]), "the witness ids")
    if CERT.get("completion_ids"):
        ids = PREFIX_IDS + ([] if TOKEN_ID is None else [TOKEN_ID]) + list(CERT["completion_ids"])
        try_walk(vocab, engine, handle, ids, "prefix + token + completion ids")


def check_token(vocab, engine):
    handle = compile_spec(engine)
    m = engine.matcher(handle)
    replay(vocab, m, PREFIX_IDS, "prefix")
    allowed = set(m.allowed_ids())
    print(f"after {len(PREFIX_IDS)} prefix tokens {PREFIX_IDS[:40]}{' ...' if len(PREFIX_IDS) > 40 else ''}")
    show_certificate(vocab, engine, handle)
    if INVARIANT == "liveness" and TOKEN_ID is None:
        empty = not allowed and not m.is_terminated()
        print(f"backend mask: {len(allowed)} ids allowed, terminated={m.is_terminated()}")
        if empty:
            raise Outcome(True, "the backend's mask is empty before termination")
        raise Outcome(False, f"the backend's mask allows {len(allowed)} ids")
    if TOKEN_ID is None or TOKEN_ID in vocab["eos_ids"]:
        what = "EOS"
        now = any(e in allowed for e in vocab["eos_ids"])
    else:
        what = f"token {token_repr(vocab, TOKEN_ID)}"
        now = TOKEN_ID in allowed
    print(f"{what}:")
    print(f"  backend now : {verdict(now):8} (recorded: {FINDING.get('backend_verdict')})")
    print(f"  reference   : {FINDING.get('reference_verdict')}")
    if REFERENCE_ALLOWS is None:
        raise Outcome(None, f"the verdict words {FINDING.get('reference_verdict')!r} / "
                            f"{FINDING.get('backend_verdict')!r} say neither allowed nor masked")
    if now != REFERENCE_ALLOWS:
        raise Outcome(True, f"the backend has {what} {verdict(now)} where the reference has it "
                            f"{verdict(REFERENCE_ALLOWS)}")
    raise Outcome(False, f"the backend has {what} {verdict(now)}, as the reference does")


# -- serving operations -----------------------------------------------------------------------------


def run_ops(vocab, engine, handle, ops, log=True):
    """Replay ``ops``; the result of the last observing op as ``(kind, value)``."""
    ms, cur, last = [engine.matcher(handle)], 0, None
    for i, op in enumerate(ops):
        name, args = op[0], list(op[1:])
        note = ""
        try:
            if name == "accept":
                last = ("accept", bool(ms[cur].accept(int(args[0]))))
                note = f"{token_repr(vocab, int(args[0]))}: {'accepted' if last[1] else 'rejected'}"
            elif name == "fork":
                ms.append(ms[cur].fork())
                note = f"matcher {len(ms) - 1} forked from {cur}"
            elif name == "switch":
                cur = int(args[0])
                note = f"now on matcher {cur}"
            elif name == "rollback":
                ms[cur].rollback(int(args[0]))
            elif name == "mask":
                last = ("mask", sorted(ms[cur].allowed_ids()))
                note = f"{len(last[1])} allowed: {last[1][:20]}{' ...' if len(last[1]) > 20 else ''}"
            elif name == "validate":
                last = ("validate", int(ms[cur].validate([int(t) for t in args[0]])))
                note = f"{last[1]} of {len(args[0])} valid"
            elif name == "forced_bytes":
                last = ("forced_bytes", bytes(ms[cur].forced_bytes()))
                note = repr(last[1])
            elif name == "accepting":
                last = ("accepting", bool(ms[cur].is_accepting()))
                note = str(last[1])
            elif name == "new":
                ms.append(engine.matcher(handle))
                note = f"matcher {len(ms) - 1} (fresh)"
            elif name == "compile":
                ms.append(engine.matcher(engine.compile(SPEC)))
                note = f"matcher {len(ms) - 1} (fresh compile)"
            else:
                raise Outcome(None, f"unknown operation {op!r}")
        except Outcome:
            raise
        except NotImplementedError as e:
            raise Outcome(None, f"operation {name!r} is not offered by this backend ({e})") from e
        except Exception as e:
            last = ("error", f"{type(e).__name__}: {e}")
            note = last[1]
        if log:
            print(f"  [{i}] {json.dumps(op)}  {note}")
    return last


def normalize(kind, value):
    if value is None:
        return None
    if kind == "mask":
        if isinstance(value, dict) and "bitmask_zlib_b64" in value:
            import base64
            import zlib

            bits = zlib.decompress(base64.b64decode(value["bitmask_zlib_b64"]))
            value = [i for i in range(int(value["size"])) if bits[i // 8] >> (i % 8) & 1]
        elif isinstance(value, dict):
            value = value.get("allowed", value.get("allowed_ids"))
        return sorted(set(int(t) for t in value)) if isinstance(value, list) else value
    if kind == "forced_bytes":
        return as_bytes(value)
    if kind in ("accept", "accepting") and isinstance(value, str):
        return {"accepted": True, "rejected": False, "true": True, "false": False}.get(value.lower(), value)
    if kind == "error" and isinstance(value, dict):
        return value.get("error", value)
    return value


def check_serving(vocab, engine):
    ops = CERT.get("operations")
    if not ops:
        raise Outcome(None, "the certificate has no operations to replay")
    handle = compile_spec(engine)
    print(f"replaying {len(ops)} operations from a fresh matcher (matcher 0):")
    last = run_ops(vocab, engine, handle, ops)
    if last is None:
        raise Outcome(None, "no operation observes anything (mask, accept, validate, forced_bytes)")
    kind, now = last
    expected, observed = CERT.get("expected"), CERT.get("observed")
    print(f"observation ({kind}):")
    print(f"  backend now : {show(now) if not isinstance(now, bytes) else repr(now)}"[:2000])
    print(f"  recorded    : {show(observed)}"[:2000])
    print(f"  expected    : {show(expected)}"[:2000])
    if "expected" in CERT:
        same = normalize(kind, now) == normalize(kind, expected)
        if same:
            raise Outcome(False, f"the last {kind} observation equals the expected one")
        raise Outcome(True, f"the last {kind} observation differs from the expected one"
                            + (" (as recorded)" if normalize(kind, now) == normalize(kind, observed) else ""))
    if "observed" in CERT:
        if normalize(kind, now) == normalize(kind, observed):
            raise Outcome(True, f"the last {kind} observation is the recorded (wrong) one")
        raise Outcome(False, f"the last {kind} observation is no longer the recorded one")
    raise Outcome(None, "the certificate records neither 'expected' nor 'observed'")


# -- crash, limits, refusal -------------------------------------------------------------------------


def child(vocab, engine):
    """Run in a child process: exit 0 done, 3 refused, 4 another exception."""
    t0 = time.perf_counter()
    try:
        handle = engine.compile(SPEC)
    except Exception as e:
        print(f"compile: {type(e).__name__}: {e}"[:2000])
        sys.exit(3 if engine.is_refusal(e) else 4)
    print(f"compiled in {(time.perf_counter() - t0) * 1000:.1f} ms")
    try:
        m = engine.matcher(handle)
        for i, t in enumerate(PREFIX_IDS + ([] if TOKEN_ID is None else [TOKEN_ID])):
            m.allowed_ids()
            if not m.accept(t):
                print(f"token {i} ({token_repr(vocab, t)}) rejected; stopping")
                break
        else:
            print(f"mask after the prefix: {len(m.allowed_ids())} ids allowed")
        if CERT.get("operations"):
            run_ops(vocab, engine, handle, CERT["operations"])
    except Exception as e:
        import traceback

        traceback.print_exc()
        print(f"walk: {type(e).__name__}: {e}"[:2000])
        sys.exit(4)
    print(f"done in {(time.perf_counter() - t0) * 1000:.1f} ms")
    sys.exit(0)


def budget_s():
    for key, scale in (("budget_s", 1.0), ("limit_s", 1.0), ("budget_ms", 0.001)):
        if isinstance(CERT.get(key), (int, float)):
            return float(CERT[key]) * scale
    return 10.0


def check_in_child():
    budget = budget_s()
    wait = budget * 3 + 5 if INVARIANT == "limits" else max(budget * 3, 60.0)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"],
                              capture_output=True, text=True, timeout=wait)
    except subprocess.TimeoutExpired:
        elapsed = time.perf_counter() - t0
        if INVARIANT == "limits":
            raise Outcome(True, f"still running after {elapsed:.1f} s (budget {budget:.1f} s)") from None
        raise Outcome(None, f"still running after {elapsed:.1f} s; no crash seen") from None
    elapsed = time.perf_counter() - t0
    print(proc.stdout[-4000:], end="")
    print(proc.stderr[-4000:], end="", file=sys.stderr)
    if proc.returncode < 0:
        raise Outcome(True, f"the process was killed by signal {-proc.returncode} after {elapsed:.1f} s")
    if proc.returncode == 4:
        raise Outcome(True, f"the backend raised an exception that is not a refusal ({elapsed:.1f} s)")
    if proc.returncode not in (0, 3):
        raise Outcome(True, f"the process exited with status {proc.returncode} after {elapsed:.1f} s")
    if INVARIANT == "limits" and elapsed > budget:
        raise Outcome(True, f"took {elapsed:.1f} s, over the budget of {budget:.1f} s")
    how = "refused the spec cleanly" if proc.returncode == 3 else "ran to the end"
    raise Outcome(False, f"the backend {how} in {elapsed:.1f} s")


def check_refusal(vocab, engine):
    handle = compile_spec(engine)
    for key in ("keyword", "valid_instance", "invalid_instance", "invalid_text", "reason"):
        if key in CERT:
            print(f"  {key}: {show(CERT[key])[:1000]}")
    if CERT.get("invalid_ids"):
        ids = [int(t) for t in CERT["invalid_ids"]]
    else:
        if "invalid_text" in CERT:
            text = CERT["invalid_text"]
        elif "invalid_instance" in CERT:
            inst = CERT["invalid_instance"]
            text = inst if SPEC["kind"] != "json_schema" else json.dumps(inst, ensure_ascii=False,
                                                                        separators=(",", ":"))
        else:
            raise Outcome(None, "the certificate has no invalid_instance / invalid_text / invalid_ids")
        ids = encode(vocab, as_bytes(text))
    m = engine.matcher(handle)
    for i, t in enumerate(ids):
        if not m.accept(t):
            raise Outcome(False, f"the backend rejects token {i} ({token_repr(vocab, t)}) of the invalid instance")
    if any(e in m.allowed_ids() for e in vocab["eos_ids"]):
        raise Outcome(True, f"the backend accepts the invalid instance ({len(ids)} tokens) and offers EOS")
    raise Outcome(False, "the backend accepts the invalid instance's tokens but does not offer EOS")


def main():
    vocab = load_vocab()
    if sys.argv[1:] == ["--child"]:
        child(vocab, Engine(vocab))
    print(f"finding {FINDING['id']}: {INVARIANT} ({FINDING.get('severity')}) in {FINDING['backend']} "
          f"{FINDING.get('backend_version')}; now running with the installed package")
    print(f"spec {SPEC['kind']} {SPEC.get('name')!r}, tokenizer {FINDING.get('tokenizer')!r} "
          f"({vocab['size']} ids, EOS {vocab['eos_ids']})")
    print(f"message: {FINDING.get('message')}")
    try:
        engine = None if INVARIANT in ("crash", "limits") else Engine(vocab)  # those build it in the child
        if INVARIANT in TOKEN_INVARIANTS:
            check_token(vocab, engine)
        elif INVARIANT in SERVING_INVARIANTS:
            check_serving(vocab, engine)
        elif INVARIANT == "refusal":
            check_refusal(vocab, engine)
        else:
            check_in_child()
        raise Outcome(None, "no check ran")
    except Outcome as o:
        if o.reproduced is True:
            print(f"REPRODUCED: {o.message}")
            sys.exit(1)
        if o.reproduced is False:
            print(f"NOT REPRODUCED: {o.message}")
            sys.exit(0)
        print(f"INCONCLUSIVE: {o.message}")
        sys.exit(2)


if __name__ == "__main__":
    main()
'''
