"""Loading corpora: the builtin data files, the two shared external suites, and user files.

Every skip is a predicate returning its reason (docs/style.md §11): a loader never crashes on a case it
cannot use, it records ``(name, reason)`` in :attr:`Corpus.skipped`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from props.contract.findings import SpecKind, SpecRef
from props.corpus import _schema
from props.corpus._errors import CorpusError
from refdecoder import Limits, read_spec_json, read_spec_text
from refdecoder.errors import SpecFileError

__all__ = ["Case", "Corpus", "load_corpus", "corpus_names", "BUILTIN", "SUITE", "BENCH"]

BUILTIN = "builtin"
SUITE = "json-schema-test-suite"
BENCH = "jsonschemabench"
FEATURES = "features"  # the feature probe suite (props.corpus.features), the builtin corpus's complement
# Corpora other modules of this package generate, registered by props/corpus/__init__.py (so that this
# module imports none of them): name -> its cases, each covering one feature id (``covers[0]``).
GENERATED: dict[str, Callable[[], list[Case]]] = {}
_KINDS = ("json_schema", "regex", "gbnf", "choice")
# The external suites' instances are parsed JSON values (never a repeated key), so reading them with
# repeated undeclared keys allowed gives the default profile's verdicts and lets open objects compile
# (see tests/test_jsonschema_suite.py).
_EXTERNAL_PROFILE: dict[str, Any] = {"allow_duplicate_keys": True}


@dataclass(frozen=True)
class Case:
    """One spec with instances in and out of its language. ``valid``/``invalid`` are JSON values for
    a schema and strings otherwise; ``covers`` the keywords or features it exercises;
    ``refusal_probe`` marks a case whose invalid instances differ from valid ones only in one
    keyword (``covers[0]``), there to check that a backend refuses or enforces it (docs/design.md §4.11)."""

    spec: SpecRef
    valid: tuple[Any, ...] = ()
    invalid: tuple[Any, ...] = ()
    covers: tuple[str, ...] = ()
    refusal_probe: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


class Corpus(list[Case]):
    """The cases of a corpus in load order; ``skipped`` holds ``(name, reason)`` for every group,
    file or instance left out."""

    def __init__(self, cases: Iterable[Case] = (), skipped: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(cases)
        self.skipped: list[tuple[str, str]] = list(skipped)


def corpus_names() -> tuple[str, ...]:
    """The named corpora :func:`load_corpus` knows (besides file and directory paths)."""
    return (BUILTIN, SUITE, BENCH, *GENERATED)


# -- names and options ------------------------------------------------------------------------------
def _parse_name(name: str, limit: int | None, stride: int | None) -> tuple[str, str | None, int | None, int]:
    """``base[:subset][:limit=N][:stride=N]`` -> (base, subset, limit, stride)."""
    base, *parts = name.split(":")
    subset: str | None = None
    opts: dict[str, int] = {}
    for part in parts:
        key, eq, val = part.partition("=")
        if not eq:
            if subset is not None:
                raise CorpusError(
                    f"corpus {name!r}", "at most one subset, as in 'jsonschemabench:Github_easy'"
                )
            subset = part
        elif key in ("limit", "stride") and val.isdigit() and int(val) > 0:
            opts[key] = int(val)
        else:
            raise CorpusError(f"corpus {name!r}", "options limit=N or stride=N with N >= 1", part)
    for key, given in (("limit", limit), ("stride", stride)):
        if given is not None:
            if given < 1:
                raise CorpusError(f"corpus {name!r} {key}", "an int >= 1", repr(given))
            if key in opts and opts[key] != given:
                raise CorpusError(
                    f"corpus {name!r}", f"one {key}", f"{opts[key]} in the name, {given} as argument"
                )
            opts[key] = given
    return base, subset, opts.get("limit"), opts.get("stride", 1)


def _select(groups: list[list[Any]], limit: int | None, stride: int) -> list[Any]:
    """Every ``stride``-th entry of each group; then, with ``limit``, round robin over the groups
    until ``limit`` entries (so a small limit still samples every group)."""
    strided = [g[::stride] for g in groups]
    if limit is None:
        return [x for g in strided for x in g]
    out: list[Any] = []
    i = 0
    while len(out) < limit and any(i < len(g) for g in strided):
        out.extend(g[i] for g in strided if i < len(g))
        i += 1
    return out[:limit]


def load_corpus(name: str | Path, *, limit: int | None = None, stride: int | None = None) -> Corpus:
    """The cases of a corpus: ``builtin``; ``json-schema-test-suite[:[DRAFT/]file stem]`` (one case per
    group of the suite's draft2020-12 folder, or of ``DRAFT``: ``draft4``, ``draft6``, ``draft7``,
    ``draft2019-09``, read in that draft; ``json-schema-test-suite:draft7`` is a whole folder);
    ``jsonschemabench[:Category]`` (maskbench, one case per file); or a path: a
    directory (every ``*.json``, ``*.gbnf``, ``*.regex``, ``*.txt`` under it) or one such file.
    ``stride`` keeps every N-th group/file of each file/category, ``limit`` at most N of them (round
    robin over categories); both may also be written in the name, ``jsonschemabench:stride=8:limit=50``.
    Raises :class:`CorpusError` for an unknown name, missing shared data or an unreadable file."""
    text = str(name)
    if text.split(":", 1)[0] not in corpus_names():
        path = Path(text)
        if not path.exists():
            raise CorpusError(
                f"corpus {text!r}",
                f"one of {', '.join(corpus_names())} (optionally ':subset', "
                "':limit=N', ':stride=N') or an existing file or directory",
            )
        _, _, lim, step = _parse_name("path", limit, stride)
        return _paths(path, lim, step)
    base, subset, lim, step = _parse_name(text, limit, stride)
    if base == BUILTIN:
        if subset is not None:
            raise CorpusError(f"corpus {text!r}", "'builtin' without a subset")
        cases = _builtin()
        return Corpus(_select([cases], lim, step))
    if base == SUITE:
        return _suite(subset, lim, step)
    if base in GENERATED:  # 'features' or 'features:json_schema/not' (a feature id or prefix)
        probes = [c for c in GENERATED[base]() if subset is None or c.covers[0].startswith(subset)]
        if not probes:
            raise CorpusError(f"corpus {text!r}", f"'{base}' or '{base}:PREFIX' naming a feature id prefix")
        return Corpus(_select([probes], lim, step))
    return _bench(subset, lim, step)


# -- builtin ----------------------------------------------------------------------------------------
def _builtin() -> list[Case]:
    root = resources.files("props.corpus") / "builtin"
    out: list[Case] = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            doc = _read_json(entry.read_text(encoding="utf-8"), f"builtin/{entry.name}")
            out.extend(_data_cases(doc, f"builtin/{entry.name}", BUILTIN))
    return out


def _data_cases(doc: Any, where: str, corpus: str) -> list[Case]:
    """Cases from the data-file form ``{"kind": ..., "cases": [{"name", "source", "valid",
    "invalid", "covers", "refusal_probe"?, "profile"?}]}``."""
    if not isinstance(doc, dict) or doc.get("kind") not in _KINDS or not isinstance(doc.get("cases"), list):
        raise CorpusError(where, '{"kind": "json_schema"|"regex"|"gbnf"|"choice", "cases": [...]}')
    out = []
    for i, c in enumerate(doc["cases"]):
        if not isinstance(c, dict) or "name" not in c or "source" not in c:
            raise CorpusError(f"{where} case {i}", 'an object with "name" and "source"')
        out.append(
            Case(
                SpecRef(doc["kind"], c["source"], c["name"], corpus, c.get("profile")),
                tuple(c.get("valid", ())),
                tuple(c.get("invalid", ())),
                tuple(c.get("covers", ())),
                bool(c.get("refusal_probe", False)),
            )
        )
    return out


# -- shared external suites -------------------------------------------------------------------------
def _shared(sub: str, corpus: str) -> Path:
    import tokenizers_matrix

    root = tokenizers_matrix.shared_data_dir()
    path = root / sub if root is not None else None
    if path is None or not path.is_dir():
        raise CorpusError(
            f"corpus {corpus!r}",
            f"the shared data folder <shared>/data/{sub} (set MASKCERT_SHARED_DATA)",
            f"{path or 'no shared data directory'} is absent",
        )
    return path


def _needs_remote(schema: Any) -> str | None:
    """A predicate: the reason a suite schema cannot be used offline, or None."""
    text = json.dumps(schema)
    if "localhost:1234" in text:
        return "needs the suite's remote documents (http://localhost:1234/...), which a SpecRef cannot carry"
    return None


# The suite's draft folders and the meta-schema their groups are read in. Drafts 4-7 groups declare no
# ``$schema``: their cases declare it, so that every reader (the reference under any backend's profile,
# the engines, the independent validator) reads them in the folder's draft.
_SUITE_DRAFTS = {
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft4": "http://json-schema.org/draft-04/schema#",
}


def _declared(schema: Any, meta: str) -> Any:
    """``schema`` with ``"$schema": meta`` when it is an object that declares none (adding a root
    keyword moves no JSON pointer)."""
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": meta, **schema}
    return schema


def _suite(subset: str | None, limit: int | None, stride: int) -> Corpus:
    folder, stem = "draft2020-12", subset
    if subset is not None and subset.split("/", 1)[0] in _SUITE_DRAFTS:
        folder, _, rest = subset.partition("/")
        stem = rest or None
    root = _shared(f"json-schema-test-suite/tests/{folder}", SUITE)
    files = sorted(root.glob("*.json"))  # optional/ is not required semantics
    if stem is not None:
        files = [f for f in files if f.stem == stem]
        if not files:
            raise CorpusError(
                f"corpus '{SUITE}:{subset}'",
                f"a file stem of {root}, or a draft folder ({', '.join(_SUITE_DRAFTS)}) with one",
                "no such file",
            )
    # Group names of the 2020-12 folder stay as they were ("ref#3"); the others name their folder.
    prefix = "" if folder == "draft2020-12" else f"{folder}/"
    groups: list[list[tuple[str, Any]]] = []
    for f in files:
        doc = _read_json(_read_text(f), str(f))
        if not isinstance(doc, list):
            raise CorpusError(str(f), "a list of test groups")
        groups.append([(f"{prefix}{f.stem}#{i}", g) for i, g in enumerate(doc)])
    out = Corpus()
    for gid, g in _select(groups, limit, stride):
        if not isinstance(g, dict) or "schema" not in g or not isinstance(g.get("tests"), list):
            out.skipped.append((gid, "not a {schema, tests} group"))
            continue
        reason = _needs_remote(g["schema"])
        if reason:
            out.skipped.append((gid, reason))
            continue
        tests = [t for t in g["tests"] if isinstance(t, dict) and "data" in t]
        schema = g["schema"] if folder == "draft2020-12" else _declared(g["schema"], _SUITE_DRAFTS[folder])
        out.append(
            Case(
                SpecRef(SpecKind.JSON_SCHEMA, schema, gid, SUITE, dict(_EXTERNAL_PROFILE)),
                tuple(t["data"] for t in tests if t.get("valid") is True),
                tuple(t["data"] for t in tests if t.get("valid") is False),
                _covers(schema),
            )
        )
    return out


def _covers(schema: Any) -> tuple[str, ...]:
    return tuple(sorted(_schema.keywords(schema) - {"$schema", "$id", "description", "title", "$comment"}))


def _bench_skip(schema: Any) -> str | None:
    """A predicate: why a maskbench schema is left out, or None (as tests/test_jsonschemabench.py)."""
    import jsonschema

    cls = jsonschema.Draft202012Validator
    try:
        cls = jsonschema.validators.validator_for(schema, default=cls)
        cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        return f"not a valid {_draft_name(cls)} schema for jsonschema ({e.message[:60]})"
    except Exception as e:  # noqa: BLE001 - the validator itself failing is a reason, recorded
        return f"jsonschema cannot check this schema ({type(e).__name__})"
    return None


def _draft_name(cls: Any) -> str:
    """``Draft7Validator`` -> ``draft 7``, ``Draft202012Validator`` -> ``draft 2020-12``."""
    digits = cls.__name__.removeprefix("Draft").removesuffix("Validator")
    return f"draft {digits[:4]}-{digits[4:]}" if len(digits) == 6 else f"draft {digits}"


def _bench(subset: str | None, limit: int | None, stride: int) -> Corpus:
    root = _shared("jsonschemabench-maskbench", BENCH)
    cats = sorted(p for p in root.iterdir() if p.is_dir())
    if subset is not None:
        cats = [c for c in cats if c.name == subset]
        if not cats:
            names = ", ".join(p.name for p in sorted(root.iterdir()) if p.is_dir())
            raise CorpusError(f"corpus '{BENCH}:{subset}'", f"a category: {names}", "no such category")
    out = Corpus()
    for f in _select([sorted(c.glob("*.json")) for c in cats], limit, stride):
        key = f"{f.parent.name}/{f.stem}"
        case = _maskbench_case(_read_json(_read_text(f), str(f)), key, BENCH, out.skipped, str(f))
        if case is not None:
            out.append(case)
    return out


def _maskbench_case(
    doc: Any, key: str, corpus: str, skipped: list[tuple[str, str]], where: str
) -> Case | None:
    """A ``{schema, tests: [{data, valid}]}`` document as a case. Labels are checked against
    ``jsonschema`` (formats as annotations, as the profile reads them); an instance whose label it
    contradicts (about 3% of maskbench's ``valid: false``, mostly formats) is left out, recorded."""
    import jsonschema

    if not isinstance(doc, dict) or "schema" not in doc or not isinstance(doc.get("tests", []), list):
        raise CorpusError(
            where, 'a JSON Schema or a {"schema": ..., "tests": [{"data": ..., "valid": ...}]} file'
        )
    schema = doc["schema"]
    reason = _bench_skip(schema)
    if reason:
        skipped.append((key, reason))
        return None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = cls(schema)
    valid: list[Any] = []
    invalid: list[Any] = []
    for i, t in enumerate(doc.get("tests", [])):
        if not isinstance(t, dict) or "data" not in t or not isinstance(t.get("valid"), bool):
            skipped.append((f"{key} test {i}", "not a {data, valid} test"))
            continue
        try:
            verdict = validator.is_valid(t["data"])
        except Exception as e:  # noqa: BLE001 - a validator crash is not a verdict; recorded
            skipped.append((f"{key} test {i}", f"jsonschema crashed on the instance ({type(e).__name__})"))
            continue
        if verdict != t["valid"]:
            skipped.append((f"{key} test {i}", f"labelled valid={t['valid']} but jsonschema says {verdict}"))
            continue
        (valid if verdict else invalid).append(t["data"])
    return Case(
        SpecRef(SpecKind.JSON_SCHEMA, schema, key, corpus, dict(_EXTERNAL_PROFILE)),
        tuple(valid),
        tuple(invalid),
        _covers(schema),
    )


# -- user files -------------------------------------------------------------------------------------
_SUFFIXES = (".json", ".gbnf", ".regex", ".txt")


def _paths(path: Path, limit: int | None, stride: int) -> Corpus:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
        if not files:
            raise CorpusError(
                str(path), f"a directory holding {', '.join('*' + s for s in _SUFFIXES)} files", "none found"
            )
    elif path.suffix in _SUFFIXES:
        files = [path]
    else:
        raise CorpusError(
            str(path), "a *.json (JSON Schema or {schema, tests}), *.gbnf, *.regex or *.txt file"
        )
    out = Corpus()
    loaders: dict[str, Callable[[Path, str, Corpus], None]] = {
        ".json": _json_file,
        ".gbnf": _gbnf_file,
        ".regex": _regex_file,
        ".txt": _regex_file,
    }
    for f in files:
        loaders[f.suffix](f, str(path), out)
    return Corpus(_select([list(out)], limit, stride), out.skipped)


def _json_file(f: Path, corpus: str, out: Corpus) -> None:
    doc = _read_json(_read_text(f), str(f))
    name = f.stem
    if isinstance(doc, dict) and "kind" in doc and "cases" in doc:
        out.extend(_data_cases(doc, str(f), corpus))
    elif isinstance(doc, dict) and "schema" in doc and "tests" in doc:
        case = _maskbench_case(doc, name, corpus, out.skipped, str(f))
        if case is not None:
            out.append(case)
    elif isinstance(doc, list) and all(isinstance(g, dict) and "schema" in g for g in doc):
        for i, g in enumerate(doc):  # a JSON-Schema-Test-Suite file
            case = _maskbench_case(g, f"{name}#{i}", corpus, out.skipped, str(f))
            if case is not None:
                out.append(case)
    elif isinstance(doc, (dict, bool)):
        out.append(Case(SpecRef(SpecKind.JSON_SCHEMA, doc, name, corpus), covers=_covers(doc)))
    else:
        raise CorpusError(
            str(f), 'a JSON Schema (object or boolean), a {"schema", "tests"} document or a list of them'
        )


def _gbnf_file(f: Path, corpus: str, out: Corpus) -> None:
    out.append(Case(SpecRef(SpecKind.GBNF, _read_text(f), f.stem, corpus), covers=("gbnf",)))


def _regex_file(f: Path, corpus: str, out: Corpus) -> None:
    for n, line in enumerate(_read_text(f).splitlines(), 1):
        if line.strip():
            out.append(Case(SpecRef(SpecKind.REGEX, line, f"{f.stem}:{n}", corpus), covers=("regex",)))


# A corpus file may hold many specs with their instances: larger than one spec may be (each spec is
# checked against Limits.schema_bytes again when it is compiled), but never unbounded.
_FILE_LIMITS = Limits(schema_bytes=64_000_000)


def _read_text(f: Path) -> str:
    try:
        data = f.read_bytes()
    except OSError as e:
        raise CorpusError(str(f), "a readable UTF-8 file", str(e)) from e
    try:
        return read_spec_text(data, str(f), expected="a UTF-8 spec file", limits=_FILE_LIMITS)
    except SpecFileError as e:
        raise CorpusError(e.path, e.expected, e.detail) from None


def _read_json(text: str, where: str) -> Any:
    """One JSON document (refdecoder's reader: depth checked before parsing, line and column)."""
    try:
        return read_spec_json(text.encode("utf-8"), where, limits=_FILE_LIMITS)
    except SpecFileError as e:
        raise CorpusError(e.path, e.expected, e.detail) from None
