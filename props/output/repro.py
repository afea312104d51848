"""Standalone reproducer scripts for findings (docs/design.md §6: "a standalone reproducer script that uses
only the backend's own API").

Theory of operation. :func:`write_reproducers` writes, under ``<out_dir>/repro/``:

* ``vocab-<fingerprint[:12]>.json`` once per vocabulary: ``{"name", "kind", "fingerprint",
  "token_bytes": [hex | null], "eos_ids", "special_ids", "special_names": {id: name}}``;
* ``<finding.id>.py`` per finding: a script that imports only the backend's package (its import name
  in the registry, :data:`BACKEND_PACKAGES`: ``xgrammar``, ``llguidance``, ``llama_cpp``, ...;
  ``refdecoder`` for backend ``reference``) and the standard library. It loads the vocabulary file next to it, builds the backend's tokenizer
  object and compiles the spec exactly as ``props/backends/<adapter module>.py`` does (the same options:
  the adapter's defaults overridden by ``adapter_options``), replays ``finding.prefix_ids`` and
  recomputes the behaviour with the backend.

A script's code is the template modules in :mod:`props.output.repro_templates` (``common`` and one
module per backend, checked by ruff and mypy like any other module); the finding's data (spec, ids,
certificate, options) replaces the templates' ``# @substitute`` lines only as
``json.loads(<repr of a JSON text>)``, so nothing from a finding is ever spliced into code. What a script checks, by invariant:

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
import functools
import importlib.resources
import json
import re
from pathlib import Path
from typing import Any

from props.backends import REGISTRY
from props.contract.findings import SERVING_INVARIANTS, SEVERITY, TOKEN_INVARIANTS, Finding
from refdecoder.errors import MaskcertError

__all__ = [
    "ADAPTER_DEFAULTS",
    "BACKEND_PACKAGES",
    "ReproError",
    "render_reproducer",
    "vocabulary_json",
    "vocabulary_file_name",
    "write_reproducers",
]

# backend name -> (import name, pip distribution), from the one registry.
BACKEND_PACKAGES: dict[str, tuple[str, str]] = {
    n: (i.import_name, i.distribution) for n, i in REGISTRY.items()
}

# The adapters' constructor defaults, which ``adapter_options`` override (from the registry).
ADAPTER_DEFAULTS: dict[str, dict[str, Any]] = {n: dict(i.defaults) for n, i in REGISTRY.items()}


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


def render_reproducer(
    finding: Finding, vocab_file: str, adapter_options: dict[str, Any] | None = None
) -> str:
    """The source of ``finding``'s reproducer script (see the module docstring)."""
    if finding.backend not in BACKEND_PACKAGES:
        raise ReproError(
            f"finding {finding.id}", f"a backend in {sorted(BACKEND_PACKAGES)}, not {finding.backend!r}"
        )
    module, dist = BACKEND_PACKAGES[finding.backend]
    options = _options(finding.backend, adapter_options)
    doc = {
        "id": finding.id,
        "invariant": str(finding.invariant),
        "severity": str(SEVERITY[finding.invariant]),
        "backend": _doc_text(finding.backend, 40),
        "backend_version": _doc_text(finding.backend_version, 30),
        "shows": _shows(finding),
        "spec_kind": str(finding.spec.kind),
        "spec_name": _doc_text(finding.spec.name or finding.spec.digest, 60),
        "tokenizer": _doc_text(finding.tokenizer, 40),
        "vocab_file": _doc_text(vocab_file),
        "module": module,
        "distribution": dist,
    }
    data = {
        "FINDING": finding.to_json(),
        "OPTIONS": options,
        "VOCAB_FILE": vocab_file,
        "REFERENCE_ALLOWS": finding.reference_allows,
        "TOKEN_INVARIANTS": sorted(str(i) for i in TOKEN_INVARIANTS),
        "SERVING_INVARIANTS": sorted(str(i) for i in SERVING_INVARIANTS),
    }
    head, tail = _template("common").split(_BACKEND_LINE, 1)
    section = _template(_backend_template(finding.backend)).strip("\n")
    return _fill_docstring(_substitute(head + section + "\n" + tail, data), doc)


# -- templates ----------------------------------------------------------------------------------------
# A script's code is props/output/repro_templates/: common.py, with one backend module's section in
# place of its ``# @backend`` line (the markers are described in that package's __init__.py).

_TEMPLATES = "props.output.repro_templates"
_ONLY_BEGIN, _ONLY_END = "# @template-only begin", "# @template-only end"
_BACKEND_LINE = "# @backend\n"
_SUBSTITUTE = re.compile(r"(?P<name>[A-Z][A-Z0-9_]*)\b[^#\n]*#\s*@substitute\s+(?P<key>\w+)\s*")
_DOC_FIELD = re.compile(r"\{(\w+)\}")
_SOURCE = re.compile(r"# @source (?P<module>[\w.]+):(?P<names>\w+(?:,\w+)*)\n")


def _backend_template(backend: str) -> str:
    """The template module of a registered backend: named after its adapter's module."""
    return REGISTRY[backend].adapter.partition(":")[0].rsplit(".", 1)[-1]


@functools.cache
def _template(name: str) -> str:
    """Template module ``name``'s text without its template-only blocks (and the blank lines that
    would pile up where one was)."""
    try:
        text = importlib.resources.files(_TEMPLATES).joinpath(f"{name}.py").read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ReproError(f"template {name!r}", f"a module {_TEMPLATES}.{name} ({e})") from e
    out: list[str] = []
    skipping = after_block = False
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        mark = line.strip()
        if mark in (_ONLY_BEGIN, _ONLY_END):
            if skipping != (mark == _ONLY_END):
                raise ReproError(
                    f"template {name!r} line {number}", f"template-only markers in pairs, not {mark!r}"
                )
            skipping = not skipping
            after_block = True
        elif skipping:
            continue
        elif (m := _SOURCE.fullmatch(line.lstrip())) is not None:
            out.append(_definitions(m.group("module"), m.group("names").split(",")))
            after_block = False
        elif mark:
            out.append(line)
            after_block = False
        elif not (after_block and out[-2:] == ["\n", "\n"]):
            out.append("\n")
    if skipping:
        raise ReproError(f"template {name!r}", f"{_ONLY_END!r} after {_ONLY_BEGIN!r}")
    return "".join(out)


def _definitions(module: str, names: list[str]) -> str:
    """The source text of top-level definitions ``names`` (functions, classes, assignments) of
    ``module``, read from its file without importing it: a reproducer runs the adapter's own code
    for what both need (``# @source module:name,...`` in a template), so it exists once."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ReproError(f"# @source {module}", "an importable module with a source file")
    text = Path(spec.origin).read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for node in ast.parse(text).body:
        targets = (
            [node.name]
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            else [t.id for t in node.targets if isinstance(t, ast.Name)]
            if isinstance(node, ast.Assign)
            else [node.target.id]
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            else []
        )
        for name in targets:
            if name in names:
                found[name] = ast.get_source_segment(text, node) or ""
    missing = [n for n in names if not found.get(n)]
    if missing:
        raise ReproError(f"# @source {module}:{','.join(names)}", f"top-level definitions of {missing}")
    return "\n\n".join(found[n] for n in names) + "\n"


def _fill_docstring(text: str, fields: dict[str, str]) -> str:
    """``text`` with each ``{field}`` of its docstring (the first triple-quoted string) filled in."""
    start = text.index('"""') + 3
    end = text.index('"""', start)

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in fields:
            raise ReproError(f"docstring field {m.group(1)!r}", f"one of {sorted(fields)}")
        value = fields[m.group(1)]
        if any(c in value for c in '"\\\n'):
            raise ReproError(
                f"docstring field {m.group(1)!r}", f"text without quotes, backslashes or newlines: {value!r}"
            )
        return value

    return text[:start] + _DOC_FIELD.sub(fill, text[start:end]) + text[end:]


def _substitute(text: str, values: dict[str, Any]) -> str:
    """Each ``NAME ...  # @substitute NAME`` line of ``text`` as ``NAME = json.loads('...')``."""
    lines = text.splitlines(keepends=True)
    done: list[str] = []
    for i, line in enumerate(lines):
        m = _SUBSTITUTE.fullmatch(line.rstrip("\n"))
        if m is None:
            continue
        name = m.group("name")
        if name != m.group("key") or name not in values or name in done:
            raise ReproError(
                f"template line {line.strip()!r}",
                f"'NAME ... # @substitute NAME', each NAME of {sorted(values)} once",
            )
        lines[i] = f"{name} = {_literal(values[name])}\n"
        done.append(name)
    if sorted(done) != sorted(values):
        missing = sorted(set(values) - set(done))
        raise ReproError("the reproducer templates", f"a '# @substitute' line for each of {missing}")
    return "".join(lines)


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
