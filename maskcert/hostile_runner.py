"""The hostile-spec runner: evaluates inputs built to hang, exhaust or crash a spec compiler and shows
that maskcert does neither, in a server subprocess under an address-space limit.

Each :class:`HostileInput` is a file or pattern exactly as a user would hand it to ``maskcert
check-schema`` / ``certify`` (a schema file's bytes, a GBNF file's bytes, a regex, a tokenizer file),
with the typed outcomes it may have (``supported``, or the name of a
:class:`~refdecoder.errors.MaskcertError` subclass), a time bound and a memory bound.
:func:`run_batch` evaluates inputs in a *server subprocess* under an address-space limit
(``RLIMIT_AS``): one process per batch (cheap), restarted after an input that hangs past its time
or kills it; each :class:`Outcome` carries the seconds and the peak resident memory of that input
(the kernel's high-water mark, reset before each input through ``/proc/self/clear_refs``).

The fixed suite of inputs is :data:`maskcert.hostile_catalog.CATALOG` (``tests/test_hostile.py``);
``maskcert fuzz --target hostile`` (:mod:`maskcert.fuzz`) generates more and runs them here.
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "HostileInput",
    "Outcome",
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
            [sys.executable, "-m", "maskcert.hostile_runner", "--serve", str(address_space_mb)],
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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--serve":
        _serve(int(args[1]))
        return 0
    print("usage: python -m maskcert.hostile_runner --serve ADDRESS_SPACE_MB", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
