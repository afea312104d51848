"""Hostile specs: inputs built to hang, exhaust or crash a spec compiler, and a runner that proves
maskcert does neither (issue 19).

Each :class:`HostileInput` is a file or pattern exactly as a user would hand it to ``maskcert
check-schema`` / ``certify`` (a schema file's bytes, a GBNF file's bytes, a regex, a tokenizer file),
with the typed outcomes it may have (``supported``, or the name of a
:class:`~refdecoder.errors.MaskcertError` subclass), a time bound and a memory bound.
:func:`run_batch` evaluates inputs in a *server subprocess* under an address-space limit
(``RLIMIT_AS``): one process per batch (cheap), restarted after an input that hangs past its time
or kills it; each :class:`Outcome` carries the seconds and the peak resident memory of that input
(the kernel's high-water mark, reset before each input through ``/proc/self/clear_refs``).

:data:`CATALOG` is the fixed suite (``tests/test_hostile.py``); :mod:`maskcert.fuzz` generates more
(``maskcert fuzz --target hostile``).
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "HostileInput",
    "Outcome",
    "CATALOG",
    "evaluate",
    "run_batch",
    "HostileRunner",
    "problems",
    "TYPED",
]

Kind = Literal["schema-file", "gbnf-file", "regex", "tokenizer-file"]

#: Outcome names that are typed (a refusal from the one error hierarchy, or success).
TYPED = frozenset(
    {
        "supported",
        "LimitExceeded",
        "Unsupported",
        "SpecError",
        "SpecFileError",
        "VocabularyError",
        "InputError",
    }
)


@dataclass(frozen=True)
class HostileInput:
    """One hostile input: ``data`` is the file's bytes (or the pattern's UTF-8), ``expect`` the
    outcomes it may have, ``seconds`` and ``mb`` its bounds (time; peak resident memory)."""

    name: str
    kind: Kind
    data: bytes
    expect: frozenset[str]
    profile: dict[str, Any] = field(default_factory=dict)
    filename: str = ""
    seconds: float = 1.0
    mb: float = 300.0
    limits: dict[str, Any] = field(default_factory=dict)  # refdecoder.Limits fields to override

    def __post_init__(self) -> None:
        if not self.expect <= TYPED:
            raise ValueError(
                f"{self.name}: expected outcomes must be typed, not {sorted(self.expect - TYPED)}"
            )

    def to_wire(self) -> dict[str, Any]:
        d = asdict(self)
        d["data"] = base64.b64encode(self.data).decode()
        d["expect"] = sorted(self.expect)
        return d

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> HostileInput:
        d = dict(d)
        d["data"] = base64.b64decode(d["data"])
        d["expect"] = frozenset(d["expect"])
        return cls(**d)


@dataclass(frozen=True)
class Outcome:
    """What happened to one input: ``outcome`` is ``supported``, an error class name, ``timeout``
    (killed past its time bound) or ``died`` (the process ended: a crash, or the address-space limit
    hit outside Python's reach); ``typed`` says whether it is one of :data:`TYPED`."""

    name: str
    outcome: str
    detail: str
    seconds: float
    peak_mb: float

    @property
    def typed(self) -> bool:
        return self.outcome in TYPED


def problems(inp: HostileInput, out: Outcome, slack: float = 1.0) -> list[str]:
    """Why ``out`` breaks ``inp``'s contract (empty when it keeps it); bounds are multiplied by
    ``slack`` (a loaded CI machine)."""
    got: list[str] = []
    if out.outcome not in inp.expect:
        got.append(f"outcome {out.outcome} ({out.detail[:200]}), expected one of {sorted(inp.expect)}")
    if out.seconds > inp.seconds * slack:
        got.append(f"took {out.seconds:.2f} s, bound {inp.seconds * slack:.2f} s")
    if out.peak_mb > inp.mb * slack:
        got.append(f"peak resident {out.peak_mb:.0f} MB, bound {inp.mb * slack:.0f} MB")
    return got


# ---------------------------------------------------------------------------------------------
# Evaluation (in the server process): exactly the paths the command line takes
# ---------------------------------------------------------------------------------------------
def evaluate(inp: HostileInput, limits: Any = None) -> tuple[str, str]:
    """(outcome, detail) of one input, in this process. Exceptions outside maskcert's hierarchy
    are returned as their class name (untyped), never raised."""
    import refdecoder
    from refdecoder.errors import MaskcertError

    if inp.limits:
        base = limits if limits is not None else refdecoder.Limits()
        limits = replace(base, **inp.limits)
    try:
        if inp.kind == "schema-file":
            doc = refdecoder.read_spec_json(inp.data, inp.name, expected="a JSON Schema file", limits=limits)
            refdecoder.compile(refdecoder.JsonSchema(doc, refdecoder.JsonProfile(**inp.profile)), limits)
        elif inp.kind == "gbnf-file":
            text = refdecoder.read_spec_text(
                inp.data, inp.name, expected="a GBNF grammar file", limits=limits
            )
            refdecoder.compile(refdecoder.Gbnf(text), limits)
        elif inp.kind == "regex":
            refdecoder.compile(refdecoder.Regex(inp.data.decode("utf-8")), limits)
        elif inp.kind == "tokenizer-file":
            import tokenizers_matrix

            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / (inp.filename or "tokenizer.json")
                path.write_bytes(inp.data)
                tokenizers_matrix.load(path)
        else:
            return "SpecError", f"unknown kind {inp.kind!r}"
    except MaskcertError as e:
        return type(e).__name__, str(e)[:500]
    except BaseException as e:  # noqa: BLE001 - the point: an untyped exception is reported, not raised
        if isinstance(e, KeyboardInterrupt):
            raise
        return type(e).__name__, f"untyped: {e!r}"[:500]
    return "supported", ""


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _serve(address_space_mb: int) -> None:
    """The server loop: one JSON input per stdin line, one JSON outcome per stdout line."""
    import resource

    if address_space_mb > 0:
        cap = address_space_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    import refdecoder  # noqa: F401 - imported before the clock starts
    import tokenizers_matrix  # noqa: F401

    out = sys.stdout
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        msg = json.loads(line)
        inp = HostileInput.from_wire(msg["input"])
        limits = refdecoder.Limits(**msg["limits"]) if msg.get("limits") else None
        _reset_peak()
        t0 = time.perf_counter()
        outcome, detail = evaluate(inp, limits)
        dt = time.perf_counter() - t0
        print(
            json.dumps({"outcome": outcome, "detail": detail, "seconds": dt, "peak_mb": _peak_mb()}),
            file=out,
            flush=True,
        )


class _Server:
    def __init__(self, address_space_mb: int) -> None:
        env = dict(os.environ)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
            env[var] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "maskcert.hostile", "--serve", str(address_space_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = self._read(60.0)
        if ready is None or not ready.get("ready"):
            err = self.stop()
            raise RuntimeError(f"the hostile-input server did not start: {err[-2000:]}")

    def _read(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        if not self.sel.select(timeout):
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def ask(self, inp: HostileInput, limits: dict[str, Any] | None, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps({"input": inp.to_wire(), "limits": limits}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None
        return self._read(timeout)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        self.sel.close()
        return err


class HostileRunner:
    """A server subprocess under ``RLIMIT_AS = address_space_mb`` that evaluates inputs one at a time,
    restarted after an input that hangs (killed after ``timeout_factor`` times its bound, at least
    5 s: ``timeout``) or kills it (``died``). ``limits`` (``refdecoder.Limits`` fields) replace the
    defaults for every input; an input's own ``limits`` replace those. Close it (or use ``with``)."""

    def __init__(
        self,
        *,
        address_space_mb: int = 2048,
        timeout_factor: float = 5.0,
        limits: dict[str, Any] | None = None,
    ) -> None:
        self.address_space_mb = address_space_mb
        self.timeout_factor = timeout_factor
        self.limits = limits
        self._server: _Server | None = None

    def run(self, inp: HostileInput) -> Outcome:
        if self._server is None:
            self._server = _Server(self.address_space_mb)
        wait = max(5.0, inp.seconds * self.timeout_factor)
        t0 = time.perf_counter()
        reply = self._server.ask(inp, self.limits, wait)
        if reply is None:
            dt = time.perf_counter() - t0
            alive = self._server.proc.poll() is None
            err = self._server.stop()
            self._server = None
            tail = err.strip().splitlines()[-1] if err.strip() else ""
            return Outcome(inp.name, "timeout" if alive else "died", tail[:300], dt, 0.0)
        return Outcome(inp.name, reply["outcome"], reply["detail"], reply["seconds"], reply["peak_mb"])

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> HostileRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_batch(
    inputs: Sequence[HostileInput],
    *,
    address_space_mb: int = 2048,
    timeout_factor: float = 5.0,
    limits: dict[str, Any] | None = None,
    on_outcome: Callable[[HostileInput, Outcome], None] | None = None,
) -> list[Outcome]:
    """Evaluate ``inputs`` in one :class:`HostileRunner` (one process, restarted only when needed)."""
    results: list[Outcome] = []
    with HostileRunner(
        address_space_mb=address_space_mb, timeout_factor=timeout_factor, limits=limits
    ) as runner:
        for inp in inputs:
            out = runner.run(inp)
            results.append(out)
            if on_outcome is not None:
                on_outcome(inp, out)
    return results


# ---------------------------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------------------------
LIMIT = frozenset({"LimitExceeded"})
FILE = frozenset({"SpecFileError"})
UNSUP = frozenset({"Unsupported"})
INVALID = frozenset({"SpecError"})
VOCAB = frozenset({"VocabularyError"})
OK = frozenset({"supported"})
DUPS = {"allow_duplicate_keys": True}


def _j(value: Any) -> bytes:
    return json.dumps(value).encode()


def _ref_chain(n: int) -> dict[str, Any]:
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def _nest(key: str, n: int, leaf: Any, wrap: Callable[[Any], Any] | None = None) -> bytes:
    """``{"key": {"key": ... leaf}}`` n deep, written as text (no recursion in json.dumps)."""
    if wrap is None:
        head, tail = f'{{"{key}":'.encode(), b"}"
    else:
        h, t = wrap(key)
        head, tail = h.encode(), t.encode()
    return head * n + _j(leaf) + tail * n


def _schemas() -> Iterable[HostileInput]:
    S: Kind = "schema-file"  # noqa: N806
    yield HostileInput("minLength-1e9", S, _j({"type": "string", "minLength": 10**9}), LIMIT)
    yield HostileInput("maxLength-1e9", S, _j({"type": "string", "maxLength": 10**9}), LIMIT)
    yield HostileInput("minLength-1e5", S, _j({"type": "string", "minLength": 10**5}), LIMIT)
    yield HostileInput("minLength-float-1e9", S, _j({"type": "string", "minLength": 1e9}), LIMIT)
    yield HostileInput(
        "length-window-huge", S, _j({"type": "string", "minLength": 40_000, "maxLength": 50_000}), LIMIT
    )
    yield HostileInput(
        "minItems-1e9-integers",
        S,
        _j({"type": "array", "minItems": 10**9, "items": {"type": "integer"}}),
        LIMIT,
    )
    yield HostileInput("minItems-1e9-any", S, _j({"type": "array", "minItems": 10**9}), LIMIT, DUPS)
    yield HostileInput(
        "maxItems-1e9", S, _j({"type": "array", "maxItems": 10**9, "items": {"type": "integer"}}), OK
    )
    yield HostileInput(
        "not-maxItems-1e9",
        S,
        _j({"type": "array", "items": {"type": "integer"}, "not": {"maxItems": 10**9}}),
        LIMIT,
    )
    yield HostileInput(
        "minContains-1e9",
        S,
        _j({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "minContains": 10**9}),
        LIMIT,
    )
    yield HostileInput(
        "maxContains-1e9-unsatisfiable",
        S,
        _j(
            {
                "type": "array",
                "items": {"type": "integer"},
                "maxItems": 10**9,
                "contains": {"type": "string"},
                "maxContains": 3,
            }
        ),
        OK | UNSUP,
    )
    yield HostileInput("minProperties-1e9", S, _j({"type": "object", "minProperties": 10**9}), LIMIT, DUPS)
    yield HostileInput(
        "not-maxProperties-1e9", S, _j({"type": "object", "not": {"maxProperties": 10**9}}), LIMIT, DUPS
    )
    yield HostileInput("integer-minimum-1e308", S, _j({"type": "integer", "minimum": 1e308}), OK)
    yield HostileInput(
        "integer-range-1e300",
        S,
        b'{"type": "integer", "minimum": -1' + b"0" * 300 + b', "maximum": 1' + b"0" * 300 + b"}",
        OK,
    )
    yield HostileInput("multipleOf-1e-300", S, _j({"type": "number", "multipleOf": 1e-300}), OK | LIMIT)
    yield HostileInput(
        "multipleOf-4000-digits",
        S,
        b'{"type": "number", "multipleOf": 0.' + b"0" * 3990 + b"7}",
        LIMIT | INVALID,
    )
    yield HostileInput("integer-literal-5000-digits", S, b'{"const": ' + b"7" * 5000 + b"}", FILE)
    yield HostileInput("file-nested-items-10000", S, _nest("items", 10_000, {"type": "integer"}), FILE)
    yield HostileInput(
        "file-nested-anyOf-3000", S, _nest("anyOf", 3000, True, lambda k: (f'{{"{k}":[', "]}")), FILE
    )
    yield HostileInput("file-nested-const-300", S, b'{"const": ' + b"[" * 300 + b"]" * 300 + b"}", FILE)
    yield HostileInput(
        "file-brackets-in-strings", S, _j({"description": "[" * 100_000, "type": "string"}), OK
    )
    yield HostileInput("file-not-utf8", S, b'{"type": "str\xffing"}', FILE)
    yield HostileInput("file-utf16", S, '{"type": "string"}'.encode("utf-16"), FILE)
    yield HostileInput("file-truncated-json", S, b'{"type": "string",\n "pattern": ', FILE)
    yield HostileInput("file-empty", S, b"", FILE)
    yield HostileInput("file-3MB", S, b'{"type": "string"}' + b" " * 3_000_000, FILE, seconds=2.0)
    yield HostileInput("file-NaN", S, b'{"type": "number", "minimum": NaN}', INVALID)
    yield HostileInput("ref-chain-5000", S, _j(_ref_chain(5000)), LIMIT, seconds=2.0)
    yield HostileInput("ref-chain-250", S, _j(_ref_chain(250)), LIMIT | OK)
    yield HostileInput("ref-self", S, _j({"$ref": "#"}), UNSUP)
    yield HostileInput(
        "ref-mutual",
        S,
        _j({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        UNSUP,
    )
    yield HostileInput("ref-remote", S, _j({"$ref": "https://example.com/schema.json"}), UNSUP)
    yield HostileInput("ref-file", S, _j({"$ref": "file:///etc/passwd"}), UNSUP)
    yield HostileInput("enum-100k", S, _j({"enum": list(range(100_000))}), LIMIT, seconds=2.0)
    yield HostileInput("const-1.5MB-string", S, _j({"const": "x" * 1_500_000}), LIMIT, seconds=2.0)
    yield HostileInput(
        "pattern-blowup-25", S, _j({"type": "string", "pattern": "^[ab]*a[ab]{25}$"}), LIMIT, seconds=3.0
    )
    yield HostileInput("pattern-a1e6", S, _j({"type": "string", "pattern": "a{1000000}"}), LIMIT)
    yield HostileInput(
        "pattern-nested-repeats", S, _j({"type": "string", "pattern": "((a{100}){100}){100}"}), LIMIT
    )
    yield HostileInput(
        "pattern-5000-digit-count", S, _j({"type": "string", "pattern": "a{" + "9" * 5000 + "}"}), LIMIT
    )
    yield HostileInput(
        "required-1000", S, _j({"type": "object", "required": [f"k{i}" for i in range(1000)]}), LIMIT
    )
    yield HostileInput(
        "oneOf-200-objects",
        S,
        _j(
            {
                "oneOf": [
                    {"type": "object", "properties": {f"p{i}": {"const": i}}, "required": [f"p{i}"]}
                    for i in range(200)
                ]
            }
        ),
        LIMIT | UNSUP,
        seconds=3.0,
    )
    yield HostileInput(
        "allOf-30-blowup-patterns",
        S,
        _j({"type": "string", "allOf": [{"pattern": f"^[ab]*a[ab]{{{k}}}$"} for k in range(5, 35)]}),
        LIMIT,
        seconds=1.5,
        limits={"compile_fuel": 200_000},
    )
    yield HostileInput(  # the same, stopped by the clock instead of the fuel
        "allOf-30-blowup-patterns-clock",
        S,
        _j({"type": "string", "allOf": [{"pattern": f"^[ab]*a[ab]{{{k}}}$"} for k in range(5, 35)]}),
        LIMIT,
        seconds=1.5,
        limits={"compile_fuel": 10**12, "compile_seconds": 0.5},
    )
    yield HostileInput("uniqueItems", S, _j({"type": "array", "uniqueItems": True}), OK)  # value memory
    yield HostileInput(
        "uniqueItems-structured-items",
        S,
        _j({"type": "array", "items": {"type": "object"}, "uniqueItems": True}),
        UNSUP,
    )
    yield HostileInput(
        "format-date-time-minLength-1e5",
        S,
        _j({"type": "string", "format": "date-time", "minLength": 10**5}),
        LIMIT,
    )
    yield HostileInput(
        "anyOf-nested-200-types",
        S,
        _nest("anyOf", 120, {"type": "integer"}, lambda k: (f'{{"{k}":[{{"type":"string"}},', "]}")),
        OK | LIMIT,
    )
    yield HostileInput(
        "defs-50k-unused",
        S,
        _j({"$defs": {f"d{i}": {"type": "integer"} for i in range(50_000)}, "type": "null"}),
        OK | LIMIT,
        seconds=2.0,
    )
    yield HostileInput(
        "property-name-1MB",
        S,
        _j({"type": "object", "properties": {"k" * 1_000_000: {"type": "null"}}}),
        LIMIT,
        seconds=2.0,
    )
    yield HostileInput(
        "prefixItems-20000",
        S,
        _j({"type": "array", "prefixItems": [{"type": "integer"}] * 20_000, "items": False}),
        LIMIT,
        seconds=3.0,  # indexing and size checks are linear in the file, before any fuel is spent
        limits={"compile_fuel": 200_000},
    )


def _numbers() -> Iterable[HostileInput]:
    S: Kind = "schema-file"  # noqa: N806
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]
    cases: list[tuple[str, Any, frozenset[str]]] = [
        (
            "int-multipleOf-7-range-1e300",
            {"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 10**300},
            OK,
        ),
        (
            "num-multipleOf-1e-5-range",
            {"type": "number", "multipleOf": 1e-5, "minimum": 0, "maximum": 1e10},
            OK,
        ),
        (
            "int-allOf-25-prime-multiples",
            {"type": "integer", "allOf": [{"multipleOf": p} for p in primes]},
            OK,
        ),
        (
            "int-not-multipleOf-10-primes",
            {"type": "integer", "allOf": [{"not": {"multipleOf": p}} for p in primes[:10]]},
            LIMIT,
        ),
        (
            "int-multipleOf-1e9+7",
            {"type": "integer", "multipleOf": 10**9 + 7, "minimum": -(10**50), "maximum": 10**50},
            OK,
        ),
        (
            "num-tiny-window-1e-17",
            {
                "type": "number",
                "exclusiveMinimum": 0.1,
                "exclusiveMaximum": 0.1000000000000001,
                "multipleOf": 1e-17,
            },
            OK | LIMIT,
        ),
        (
            "int-anyOf-200-ranges",
            {
                "anyOf": [
                    {"type": "integer", "minimum": i * 1000, "maximum": i * 1000 + 7} for i in range(200)
                ]
            },
            LIMIT | OK,
        ),
    ]
    for name, schema, expect in cases:
        yield HostileInput(name, S, _j(schema), expect, seconds=2.0)


def _regexes() -> Iterable[HostileInput]:
    R: Kind = "regex"  # noqa: N806

    def r(name: str, pattern: str, expect: frozenset[str], seconds: float = 1.0) -> HostileInput:
        return HostileInput(name, R, pattern.encode("utf-8"), expect, seconds=seconds)

    yield r("regex-backtracking-bomb", "(a|aa)*b", OK)
    yield r("regex-star-of-star", "(a*)*b", OK)
    yield r("regex-blowup-25", "[ab]*a[ab]{25}", LIMIT, seconds=3.0)
    yield r("regex-a1e6", "a{1000000}", LIMIT)
    yield r("regex-nested-repeats", "((a{100}){100}){100}", LIMIT)
    yield r("regex-dot-20000", ".{20000}", LIMIT, seconds=3.0)
    yield r("regex-count-overflow", "a{99999999999999999999}", INVALID | LIMIT)
    yield r("regex-backreference", r"(a)\1", UNSUP)
    yield r("regex-lookahead", "(?=a)a", UNSUP)
    yield r("regex-nested-parens-5000", "(" * 5000 + "a" + ")" * 5000, INVALID | LIMIT)
    yield r("regex-unbalanced", "(" * 10, INVALID)
    yield r("regex-20000-words", "|".join(f"w{i:05d}" for i in range(20_000)), OK | LIMIT, seconds=5.0)
    yield r("regex-nonascii-1000", "[^\\x00-\\x7f]{1000}", OK | LIMIT)
    yield HostileInput(
        "regex-alternation-of-blowups",
        R,
        "|".join(f"[ab]*a[ab]{{{k}}}" for k in range(8, 20)).encode(),
        LIMIT,
        seconds=1.5,
        limits={"compile_fuel": 200_000},
    )


def _gbnfs() -> Iterable[HostileInput]:
    G: Kind = "gbnf-file"  # noqa: N806

    def g(name: str, text: bytes, expect: frozenset[str], seconds: float = 1.0) -> HostileInput:
        return HostileInput(name, G, text, expect, seconds=seconds)

    yield g("gbnf-random-bytes", bytes(range(256)) * 4, FILE)
    yield g("gbnf-not-utf8", b'root ::= "\xc3\x28"', FILE)
    yield g("gbnf-empty", b"", INVALID)
    yield g("gbnf-3MB", b'root ::= "a"\n' + b"#" * 3_000_000, FILE)
    # left recursion is rewritten (refdecoder/_gbnf_rewrite.py); a ring whose rewrite would pass the
    # size bound is refused
    yield g("gbnf-left-recursion", b'root ::= root "a" | "a"', OK)
    yield g("gbnf-mutual-left-recursion", b'root ::= a\na ::= b "x" | "z"\nb ::= a "y"', OK)
    # a ring whose substitution doubles at each rule: refused at the rewrite's size bound
    ring = "".join(f'r{i} ::= r{(i + 1) % 24} "a" | r{(i + 1) % 24} "b" | "c"\n' for i in range(24))
    yield g("gbnf-left-recursion-doubling-ring", f"root ::= r0\n{ring}".encode(), UNSUP, seconds=5.0)
    yield g("gbnf-undefined-rule", b"root ::= nowhere", INVALID)
    yield g("gbnf-count-1e11", b'root ::= "a"{0,99999999999}', LIMIT)
    yield g("gbnf-count-5000-digits", b'root ::= "a"{' + b"9" * 5000 + b"}", LIMIT)
    yield g("gbnf-count-1e6", b'root ::= "a"{1000000}', OK | LIMIT)
    yield g("gbnf-nested-groups-300", b"root ::= " + b"(" * 300 + b'"a"' + b")" * 300, LIMIT)
    yield g("gbnf-nested-groups-100000", b"root ::= " + b"(" * 100_000 + b'"a"' + b")" * 100_000, LIMIT)
    yield g("gbnf-postfix-300", b'root ::= "a"' + b"?" * 300, LIMIT)
    yield g(
        "gbnf-rule-chain-10000",
        b"\n".join(
            [b"root ::= r0"] + [f"r{i} ::= r{i + 1}".encode() for i in range(10_000)] + [b'r10000 ::= "a"']
        ),
        OK | LIMIT | UNSUP,
        seconds=3.0,
    )
    yield g(
        "gbnf-blowup-class",
        b'root ::= [ab]* "a" [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab]',
        OK | LIMIT,
    )
    yield g("gbnf-ambiguous-star", b'root ::= ("a" | "a" | "aa")* "b"', OK | LIMIT)
    yield g("gbnf-bad-escape", b'root ::= "\\x"', INVALID)
    yield g("gbnf-codepoint-overflow", b'root ::= "\\U99999999"', INVALID | UNSUP)


def _tokenizers() -> Iterable[HostileInput]:
    T: Kind = "tokenizer-file"  # noqa: N806

    def t(name: str, data: bytes, filename: str = "tokenizer.json", seconds: float = 1.0) -> HostileInput:
        return HostileInput(name, T, data, VOCAB, filename=filename, seconds=seconds)

    yield t("tok-random-bytes", bytes(range(256)) * 16, "tokenizer.bin")
    yield t("tok-json-not-utf8", b'{"model": "\xff"}')
    yield t("tok-json-nested-100000", b'{"model":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    yield t("tok-json-truncated", b'{"model": {"type": "BPE", "vocab": {"a": 0')
    yield t("tok-json-vocab-not-a-map", _j({"model": {"type": "BPE", "vocab": "x", "merges": []}}))
    yield t("tok-json-huge-id", _j({"model": {"type": "BPE", "vocab": {"a": 10**12, "b": 0}, "merges": []}}))
    yield t("tok-json-negative-id", _j({"model": {"type": "BPE", "vocab": {"a": -5}, "merges": []}}))
    yield t("tok-json-empty", b"")
    yield t("tok-sp-random", b"\n" + bytes(range(1, 256)) * 8, "tokenizer.model")
    yield t("tok-sp-huge-varint", b"\n\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "tokenizer.model")
    yield t("tok-tiktoken-bad-base64", b"!!!! 0\nYQ== 1\n", "cl100k_base.tiktoken")
    yield t("tok-tiktoken-huge-rank", b"YQ== 999999999999999\nYg== 1\n", "cl100k_base.tiktoken")
    yield t("tok-tekken-wrong-fields", _j({"config": {}, "vocab": 5}), "tekken.json")


CATALOG: tuple[HostileInput, ...] = tuple([*_schemas(), *_numbers(), *_regexes(), *_gbnfs(), *_tokenizers()])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--serve":
        _serve(int(args[1]))
        return 0
    print("usage: python -m maskcert.hostile --serve ADDRESS_SPACE_MB", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
