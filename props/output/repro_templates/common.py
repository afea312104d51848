# @template-only begin
# The part every reproducer script shares. props/output/repro.py renders a script from this module
# and one backend module of this package (see __init__.py for the markers): the docstring below,
# filled in, is the script's docstring; the backend module's section replaces the ``# @backend`` line.
# @template-only end
"""maskcert reproducer {id}: {invariant} ({severity}) in {backend} {backend_version}.

Shows: {shows}.
Spec: {spec_kind} {spec_name}; tokenizer {tokenizer} (vocabulary file {vocab_file}, next to this script).

Run:   python3 {id}.py
Needs: the {module} package only (pip install {distribution}) and the Python standard library.
Exit:  1 and 'REPRODUCED: ...' when the backend still shows the defect, 0 and 'NOT REPRODUCED: ...'
       when it does not, 2 and 'INCONCLUSIVE: ...' when the step cannot be reached.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypedDict

# -- the finding ------------------------------------------------------------------------------------

FINDING: dict[str, Any] = {"invariant": "", "spec": {}}  # @substitute FINDING
OPTIONS: dict[str, Any] = {}  # @substitute OPTIONS
VOCAB_FILE: str = ""  # @substitute VOCAB_FILE
REFERENCE_ALLOWS: bool | None = None  # @substitute REFERENCE_ALLOWS
TOKEN_INVARIANTS: list[str] = []  # @substitute TOKEN_INVARIANTS
SERVING_INVARIANTS: list[str] = []  # @substitute SERVING_INVARIANTS

INVARIANT: str = FINDING["invariant"]
SPEC: dict[str, Any] = FINDING["spec"]
CERT: dict[str, Any] = FINDING.get("certificate") or {}
PREFIX_IDS: list[int] = list(FINDING.get("prefix_ids") or [])
TOKEN_ID: int | None = FINDING.get("token_id")


class Refusal(Exception):
    """The adapter's refusal of a spec it has no form for (an empty choice list, GBNF, ...)."""


class Outcome(Exception):
    def __init__(self, reproduced: bool | None, message: str) -> None:
        super().__init__(message)
        self.reproduced = reproduced
        self.message = message


class VocabInfo(TypedDict):
    name: str
    token_bytes: list[bytes | None]
    size: int
    eos_ids: list[int]
    special_ids: list[int]
    special_names: dict[int, str]
    lookup: dict[bytes, int]
    max_len: int


class MatcherLike(Protocol):
    """What the checks below ask of a backend's matcher (the backend section defines ``Matcher``)."""

    def allowed_ids(self) -> list[int]: ...

    def accept(self, t: int) -> bool: ...

    def is_accepting(self) -> bool: ...

    def is_terminated(self) -> bool: ...

    def rollback(self, k: int) -> None: ...

    def fork(self) -> MatcherLike: ...

    def forced_bytes(self) -> bytes: ...

    def validate(self, ids: list[int]) -> int: ...


class EngineLike(Protocol):
    """What the checks below ask of a backend (the backend section defines ``Engine(vocab)``)."""

    def compile(self, spec: dict[str, Any]) -> Any: ...

    def is_refusal(self, exc: Exception) -> bool: ...

    def matcher(self, compiled: Any) -> MatcherLike: ...


def load_vocab() -> VocabInfo:
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


def token_repr(vocab: VocabInfo, token_id: int | None) -> str:
    if token_id is None:
        return "EOS"
    if not 0 <= token_id < vocab["size"]:
        return f"{token_id} <out of range>"
    data = vocab["token_bytes"][token_id]
    if data is None:
        return f"{token_id} {vocab['special_names'].get(token_id, '<special>')}"
    return f"{token_id} {data!r}"


def encode(vocab: VocabInfo, data: bytes) -> list[int]:
    """The fewest-token segmentation of ``data`` (maskcert's encoding for a codec-less vocabulary). In
    the bytes of a spec that names special tokens, ``b"\\xff" + id + b"\\xfe"`` is special token ``id``
    (how maskcert writes one; no UTF-8 text holds 0xFF or 0xFE), and the text around it is segmented
    piece by piece."""
    import re

    ids: list[int] = []
    for piece in re.split(rb"(\xff(?:0|[1-9][0-9]*)\xfe)", data):
        if piece[:1] == b"\xff" and piece[-1:] == b"\xfe" and piece[1:-1].isdigit():
            ids.append(int(piece[1:-1]))
        elif piece:
            ids += _fewest_tokens(vocab, piece)
    return ids


def _fewest_tokens(vocab: VocabInfo, data: bytes) -> list[int]:
    best: list[list[int] | None] = [None] * (len(data) + 1)
    best[0] = []
    for i in range(len(data)):
        here = best[i]
        if here is None:
            continue
        for n in range(1, min(vocab["max_len"], len(data) - i) + 1):
            t = vocab["lookup"].get(data[i : i + n])
            there = best[i + n]
            if t is not None and (there is None or len(here) + 1 < len(there)):
                best[i + n] = here + [t]
    found = best[-1]
    if found is None:
        raise ValueError(f"{data!r} cannot be segmented into this vocabulary's tokens")
    return found


def eos_allowed(vocab: VocabInfo, allowed: Any) -> bool:
    """Whether ``allowed`` (ids) holds an EOS id."""
    return any(e in allowed for e in vocab["eos_ids"])


def bits_to_ids(words: list[int], size: int) -> list[int]:
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


def gbnf_parts(source: Any) -> tuple[str, str]:
    if isinstance(source, dict):
        return source["text"], source.get("root", "root")
    return source, "root"


def as_bytes(value: Any) -> bytes:
    """Certificate bytes: {"hex": ...}, a str (UTF-8) or a list of byte values."""
    if isinstance(value, dict) and "hex" in value:
        return bytes.fromhex(value["hex"])
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):
        return bytes(value)
    return value


def show(value: Any) -> str:
    if isinstance(value, dict) and "hex" in value:
        return repr(bytes.fromhex(value["hex"]))
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def check_rollback(k: int, total: int) -> None:
    if not 0 <= k <= total:
        raise ValueError(f"rollback({k}): can undo between 0 and {total} tokens")


class HistoryMatcher:
    """What the backends' own matchers share: the vocabulary and the ids accepted so far (the
    backend's matcher keeps its state; ``ids`` is what forks and rollbacks replay)."""

    def __init__(self, vocab: VocabInfo, ids: list[int]) -> None:
        self.vocab, self.ids = vocab, ids

    def is_terminated(self) -> bool:
        """EOS accepted (for backends that keep no terminated state of their own)."""
        return bool(self.ids) and self.ids[-1] in self.vocab["eos_ids"]

    def can_take(self, t: int) -> bool:
        """``t`` is an id of the vocabulary and the matcher has not terminated."""
        return 0 <= t < self.vocab["size"] and not self.is_terminated()

    def undo(self, k: int) -> None:
        """The backend's own rollback of ``k`` > 0 tokens (none where ``ids`` is the whole state)."""

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self.ids))
        if k:
            self.undo(k)
            del self.ids[len(self.ids) - k :]


# @template-only begin
def Engine(vocab: VocabInfo) -> EngineLike:
    """Stands for the class the backend section defines where a script has ``# @backend``."""
    raise NotImplementedError


# @template-only end
# @backend


# -- what the finding claims, recomputed ------------------------------------------------------------


def verdict(allows: bool | None) -> str:
    return "allowed" if allows else "masked"


def compile_spec(engine: EngineLike) -> Any:
    """The compiled spec; a refusal ends the check (the backend no longer accepts the spec)."""
    try:
        return engine.compile(SPEC)
    except Exception as e:
        if engine.is_refusal(e):
            raise Outcome(False, f"the backend now refuses the spec: {type(e).__name__}: {e}") from e
        raise Outcome(None, f"compiling the spec raised {type(e).__name__}: {e}") from e


def replay(vocab: VocabInfo, m: MatcherLike, ids: list[int], what: str) -> None:
    for i, t in enumerate(ids):
        if not m.accept(t):
            if what == "prefix" and ids == CERT.get("invalid_ids") and REFERENCE_ALLOWS is False:
                # the prefix is the invalid output itself: a backend that no longer takes it is fixed
                raise Outcome(
                    False,
                    f"the backend rejects token {i} ({token_repr(vocab, t)}) of the invalid output: "
                    "it can no longer produce it",
                )
            raise Outcome(
                None,
                f"the backend rejects {what} token {i} ({token_repr(vocab, t)}); "
                "the finding's step cannot be reached",
            )


def try_walk(vocab: VocabInfo, engine: EngineLike, handle: Any, ids: list[int], what: str) -> None:
    """Information: how far the backend follows ``ids`` from the start, and whether EOS ends it."""
    m = engine.matcher(handle)
    for i, t in enumerate(ids):
        if t in vocab["eos_ids"]:
            ok = eos_allowed(vocab, m.allowed_ids())
            print(f"  backend on {what}: EOS after {i} tokens is {verdict(ok)}")
            return
        if not m.accept(t):
            print(f"  backend on {what}: token {i} ({token_repr(vocab, t)}) is rejected")
            return
    eos = eos_allowed(vocab, m.allowed_ids())
    print(f"  backend on {what}: all {len(ids)} tokens accepted; EOS then {verdict(eos)}")


CERT_FIRST = ("witness", "witness_ids", "validated_by", "completion", "completion_ids", "validator_error")


def show_certificate(vocab: VocabInfo, engine: EngineLike, handle: Any) -> None:
    if not CERT:
        return
    print("certificate:")
    for key in CERT_FIRST:
        if key in CERT:
            print(f"  {key}: {show(CERT[key])}")
    for key in sorted(set(CERT) - {*CERT_FIRST, "operations"}):
        print(f"  {key}: {show(CERT[key])[:500]}")
    if CERT.get("witness_ids"):
        try_walk(vocab, engine, handle, list(CERT["witness_ids"]), "the witness ids")
    if CERT.get("completion_ids"):
        ids = PREFIX_IDS + ([] if TOKEN_ID is None else [TOKEN_ID]) + list(CERT["completion_ids"])
        try_walk(vocab, engine, handle, ids, "prefix + token + completion ids")


def check_token(vocab: VocabInfo, engine: EngineLike) -> NoReturn:
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
        now = eos_allowed(vocab, allowed)
    else:
        what = f"token {token_repr(vocab, TOKEN_ID)}"
        now = TOKEN_ID in allowed
    if str(FINDING.get("backend_verdict", "")).startswith("accept("):
        # The finding is accept()'s own verdict (e.g. "accept(EOS) rejected" where the mask offers it):
        # ask accept, as the certifier did.
        token = TOKEN_ID if TOKEN_ID is not None else vocab["eos_ids"][0]
        print(f"  backend mask: {verdict(now)}; now asking accept({token_repr(vocab, token)})")
        now = bool(m.accept(token))
        what = f"accept({'EOS' if token in vocab['eos_ids'] else token_repr(vocab, token)})"
    print(f"{what}:")
    print(f"  backend now : {verdict(now):8} (recorded: {FINDING.get('backend_verdict')})")
    print(f"  reference   : {FINDING.get('reference_verdict')}")
    if REFERENCE_ALLOWS is None:
        raise Outcome(
            None,
            f"the verdict words {FINDING.get('reference_verdict')!r} / "
            f"{FINDING.get('backend_verdict')!r} say neither allowed nor masked",
        )
    if now != REFERENCE_ALLOWS:
        raise Outcome(
            True,
            f"the backend has {what} {verdict(now)} where the reference has it {verdict(REFERENCE_ALLOWS)}",
        )
    raise Outcome(False, f"the backend has {what} {verdict(now)}, as the reference does")


# -- serving operations -----------------------------------------------------------------------------


def run_ops(
    vocab: VocabInfo, engine: EngineLike, handle: Any, ops: list[list[Any]], log: bool = True
) -> tuple[str, Any] | None:
    """Replay ``ops``; the result of the last observing op as ``(kind, value)``."""
    ms: list[MatcherLike] = [engine.matcher(handle)]
    cur = 0
    last: tuple[str, Any] | None = None
    for i, op in enumerate(ops):
        name, args = op[0], list(op[1:])
        note = ""
        try:
            if name == "accept":
                ok = bool(ms[cur].accept(int(args[0])))
                last = ("accept", ok)
                note = f"{token_repr(vocab, int(args[0]))}: {'accepted' if ok else 'rejected'}"
            elif name == "fork":
                ms.append(ms[cur].fork())
                note = f"matcher {len(ms) - 1} forked from {cur}"
            elif name == "switch":
                cur = int(args[0])
                note = f"now on matcher {cur}"
            elif name == "rollback":
                ms[cur].rollback(int(args[0]))
            elif name == "mask":
                ids = sorted(ms[cur].allowed_ids())
                last = ("mask", ids)
                note = f"{len(ids)} allowed: {ids[:20]}{' ...' if len(ids) > 20 else ''}"
            elif name == "validate":
                n = int(ms[cur].validate([int(t) for t in args[0]]))
                last = ("validate", n)
                note = f"{n} of {len(args[0])} valid"
            elif name == "forced_bytes":
                forced = bytes(ms[cur].forced_bytes())
                last = ("forced_bytes", forced)
                note = repr(forced)
            elif name == "accepting":
                accepting = bool(ms[cur].is_accepting())
                last = ("accepting", accepting)
                note = str(accepting)
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
            note = f"{type(e).__name__}: {e}"
            last = ("error", note)
        if log:
            print(f"  [{i}] {json.dumps(op)}  {note}")
    return last


def normalize(kind: str, value: Any) -> Any:
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


def check_serving(vocab: VocabInfo, engine: EngineLike) -> NoReturn:
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
        as_recorded = " (as recorded)" if normalize(kind, now) == normalize(kind, observed) else ""
        raise Outcome(True, f"the last {kind} observation differs from the expected one{as_recorded}")
    if "observed" in CERT:
        if normalize(kind, now) == normalize(kind, observed):
            raise Outcome(True, f"the last {kind} observation is the recorded (wrong) one")
        raise Outcome(False, f"the last {kind} observation is no longer the recorded one")
    raise Outcome(None, "the certificate records neither 'expected' nor 'observed'")


# -- crash, limits, refusal -------------------------------------------------------------------------


def child(vocab: VocabInfo, engine: EngineLike) -> NoReturn:
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


def budget_s() -> float:
    for key, scale in (("budget_s", 1.0), ("limit_s", 1.0), ("budget_ms", 0.001)):
        if isinstance(CERT.get(key), (int, float)):
            return float(CERT[key]) * scale
    return 10.0


def check_in_child() -> NoReturn:
    budget = budget_s()
    wait = budget * 3 + 5 if INVARIANT == "limits" else max(budget * 3, 60.0)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child"],
            capture_output=True,
            text=True,
            timeout=wait,
        )
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


def invalid_ids(vocab: VocabInfo) -> list[int]:
    """The certificate's invalid instance as token ids."""
    if CERT.get("invalid_ids"):
        return [int(t) for t in CERT["invalid_ids"]]
    if "invalid_text" in CERT:
        text = CERT["invalid_text"]
    elif "invalid_instance" in CERT:
        inst = CERT["invalid_instance"]
        text = (
            inst
            if SPEC["kind"] != "json_schema"
            else json.dumps(inst, ensure_ascii=False, separators=(",", ":"))
        )
    else:
        raise Outcome(None, "the certificate has no invalid_instance / invalid_text / invalid_ids")
    return encode(vocab, as_bytes(text))


def check_refusal(vocab: VocabInfo, engine: EngineLike) -> NoReturn:
    handle = compile_spec(engine)
    for key in ("keyword", "valid_instance", "invalid_instance", "invalid_text", "reason"):
        if key in CERT:
            print(f"  {key}: {show(CERT[key])[:1000]}")
    ids = invalid_ids(vocab)
    m = engine.matcher(handle)
    for i, t in enumerate(ids):
        if not m.accept(t):
            raise Outcome(
                False, f"the backend rejects token {i} ({token_repr(vocab, t)}) of the invalid instance"
            )
    if eos_allowed(vocab, m.allowed_ids()):
        raise Outcome(True, f"the backend accepts the invalid instance ({len(ids)} tokens) and offers EOS")
    raise Outcome(False, "the backend accepts the invalid instance's tokens but does not offer EOS")


def check(vocab: VocabInfo) -> NoReturn:
    if INVARIANT in TOKEN_INVARIANTS:
        check_token(vocab, Engine(vocab))
    if INVARIANT in SERVING_INVARIANTS:
        check_serving(vocab, Engine(vocab))
    if INVARIANT == "refusal":
        check_refusal(vocab, Engine(vocab))
    check_in_child()  # crash, limits: the child builds the engine


def main() -> NoReturn:
    vocab = load_vocab()
    if sys.argv[1:] == ["--child"]:
        child(vocab, Engine(vocab))
    print(
        f"finding {FINDING['id']}: {INVARIANT} ({FINDING.get('severity')}) in {FINDING['backend']} "
        f"{FINDING.get('backend_version')}; now running with the installed package"
    )
    print(
        f"spec {SPEC['kind']} {SPEC.get('name')!r}, tokenizer {FINDING.get('tokenizer')!r} "
        f"({vocab['size']} ids, EOS {vocab['eos_ids']})"
    )
    print(f"message: {FINDING.get('message')}")
    try:
        check(vocab)
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
