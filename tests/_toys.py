"""Deliberately broken backends: the reference with one defect each, for the quality tests of
certification and fuzzing ("a quality test checks that known hard examples do get found", docs/style.md §15).

Each is an adapter class (``tests._toys:Name`` works as ``--backend module:Class``) whose matcher
wraps a reference matcher and breaks exactly one invariant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from props.backends.reference import ReferenceBackend
from props.contract.backend import Compiled, CompileOutcome
from refdecoder import JsonSchema, Spec
from refdecoder._tokens import pack_ids, unpack_mask

__all__ = [
    "CallsMissingEngineApi",
    "ExtraClosingBrace",
    "NoBackslash",
    "NoEos",
    "NoCharacterSplits",
    "SharedFork",
    "NoOpRollback",
    "CrashAfterThree",
    "ValidateOffByOne",
    "WrongJumpForward",
    "IgnoresUniqueItems",
    "NeverAccepting",
    "Stalls",
    "TOYS",
]


class _Wrapped:
    """A reference matcher; subclasses override one method."""

    def __init__(self, inner: Any, backend: Any) -> None:
        self.inner = inner
        self.backend = backend

    def _ids(self) -> list[int]:
        return list(unpack_mask(self.inner.mask(), self.backend.size))

    def _pack(self, ids: Any) -> np.ndarray:
        return pack_ids(sorted(set(ids)), self.backend.size)

    def mask(self) -> np.ndarray:
        return np.asarray(self.inner.mask())

    def accept(self, token_id: int) -> Any:
        return self.inner.accept(token_id)

    def is_accepting(self) -> bool:
        return bool(self.inner.is_accepting())

    def is_terminated(self) -> bool:
        return bool(self.inner.is_terminated())

    def rollback(self, k: int) -> None:
        self.inner.rollback(k)

    def fork(self) -> Any:
        return type(self)(self.inner.fork(), self.backend)

    def forced_bytes(self) -> bytes:
        return bytes(self.inner.forced_bytes())

    def validate(self, ids: list[int]) -> int:
        return int(self.inner.validate(ids))


class _Toy(ReferenceBackend):
    matcher_class: type[_Wrapped] = _Wrapped

    def __init__(self) -> None:
        super().__init__()
        self.name = f"toy-{type(self).__name__}"
        self.size = 0

    def compile(self, spec: Spec, vocabulary: Any) -> CompileOutcome:
        self.size = len(vocabulary)
        self.vocabulary = vocabulary
        return super().compile(spec, vocabulary)

    def matcher(self, compiled: Compiled) -> Any:
        return self.matcher_class(super().matcher(compiled), self)


class _ExtraBrace(_Wrapped):
    def mask(self) -> np.ndarray:
        ids = self._ids()
        if not self.inner.is_terminated():
            ids.append(ord("}"))  # byte-vocabulary id of "}"
        return self._pack(ids)

    def accept(self, token_id: int) -> Any:
        if token_id == ord("}") and not self.inner.is_terminated():
            out = self.inner.accept(token_id)
            return out
        return self.inner.accept(token_id)


class ExtraClosingBrace(_Toy):
    """Always allows ``}`` (soundness)."""

    matcher_class = _ExtraBrace


class _NoBackslash(_Wrapped):
    def mask(self) -> np.ndarray:
        return self._pack(i for i in self._ids() if i != ord("\\"))


class NoBackslash(_Toy):
    """Masks ``\\`` (the byte vocabulary's id 92) everywhere: escapes become impossible (completeness)."""

    matcher_class = _NoBackslash


class _NoEos(_Wrapped):
    def mask(self) -> np.ndarray:
        eos = set(self.backend.vocabulary.eos_ids)
        return self._pack(i for i in self._ids() if i not in eos)


class NoEos(_Toy):
    """Never offers EOS (eos)."""

    matcher_class = _NoEos


class _NoSplits(_Wrapped):
    def mask(self) -> np.ndarray:
        tb = self.backend.vocabulary.token_bytes

        def whole(i: int) -> bool:
            b = tb[i]
            if b is None:
                return True
            try:
                b.decode("utf-8")
            except UnicodeDecodeError:
                return False
            return True

        return self._pack(i for i in self._ids() if whole(i))


class NoCharacterSplits(_Toy):
    """Masks every token that is not whole UTF-8 characters (utf8)."""

    matcher_class = _NoSplits


class _SharedFork(_Wrapped):
    def fork(self) -> Any:
        return self  # shares state with its parent


class SharedFork(_Toy):
    """``fork()`` returns the same matcher (fork)."""

    matcher_class = _SharedFork


class _NoOpRollback(_Wrapped):
    def rollback(self, k: int) -> None:
        return None


class NoOpRollback(_Toy):
    """``rollback`` does nothing (rollback)."""

    matcher_class = _NoOpRollback


class _Crash(_Wrapped):
    def mask(self) -> np.ndarray:
        if self.inner.num_accepted >= 3:
            raise RuntimeError("toy backend: internal error after three tokens")
        return np.asarray(self.inner.mask())


class CrashAfterThree(_Toy):
    """``mask()`` raises after three tokens (crash)."""

    matcher_class = _Crash


class _ValidateOffByOne(_Wrapped):
    def validate(self, ids: list[int]) -> int:
        n = int(self.inner.validate(ids))
        return n + 1 if n < len(ids) else n


class ValidateOffByOne(_Toy):
    """``validate`` counts one token past the first invalid one (speculative)."""

    matcher_class = _ValidateOffByOne


class _WrongJump(_Wrapped):
    def forced_bytes(self) -> bytes:
        return bytes(self.inner.forced_bytes()) + b"!"


class WrongJumpForward(_Toy):
    """Forced bytes end with a spurious ``!`` (jump_forward)."""

    matcher_class = _WrongJump


def _drop_unique(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _drop_unique(v) for k, v in schema.items() if k != "uniqueItems"}
    if isinstance(schema, list):
        return [_drop_unique(v) for v in schema]
    return schema


class IgnoresUniqueItems(_Toy):
    """Compiles ``uniqueItems`` schemas by ignoring the keyword (refusal hygiene)."""

    def compile(self, spec: Spec, vocabulary: Any) -> CompileOutcome:
        if isinstance(spec, JsonSchema):
            spec = JsonSchema(_drop_unique(spec.schema), spec.profile)
        return super().compile(spec, vocabulary)


class _NeverAccepting(_Wrapped):
    def is_accepting(self) -> bool:
        return False


class NeverAccepting(_Toy):
    """``is_accepting()`` is always False while the mask offers EOS correctly (eos)."""

    matcher_class = _NeverAccepting


class _MissingApi(_Wrapped):
    def mask(self) -> np.ndarray:
        # What an adapter does when the installed engine release lacks an API it calls.
        return np.asarray(np.this_engine_api_does_not_exist(self.inner.mask()))  # type: ignore[attr-defined]


class CallsMissingEngineApi(_Toy):
    """``mask()`` calls an engine API that does not exist: the adapter's fault, never a finding."""

    matcher_class = _MissingApi


TOYS: dict[str, tuple[type[_Toy], str]] = {
    "soundness": (ExtraClosingBrace, "tests._toys:ExtraClosingBrace"),
    "eos": (NoEos, "tests._toys:NoEos"),
    "utf8": (NoCharacterSplits, "tests._toys:NoCharacterSplits"),
    "fork": (SharedFork, "tests._toys:SharedFork"),
    "rollback": (NoOpRollback, "tests._toys:NoOpRollback"),
    "crash": (CrashAfterThree, "tests._toys:CrashAfterThree"),
    "speculative": (ValidateOffByOne, "tests._toys:ValidateOffByOne"),
    "jump_forward": (WrongJumpForward, "tests._toys:WrongJumpForward"),
    "refusal": (IgnoresUniqueItems, "tests._toys:IgnoresUniqueItems"),
}


class DiesOnThirdCompile(NoEos):
    """:class:`NoEos` that kills its own process (SIGKILL, no clean-up) when asked to compile a third
    distinct spec and ``MASKCERT_TEST_DIE`` is set: a certify run killed in the middle, to be resumed."""

    specs: set[str] = set()

    def compile(self, spec: Spec, vocabulary: Any) -> CompileOutcome:
        import os
        import signal

        type(self).specs.add(repr(spec))
        if os.environ.get("MASKCERT_TEST_DIE") and len(type(self).specs) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().compile(spec, vocabulary)


class SlowNoEos(NoEos):
    """:class:`NoEos` whose every compile first sleeps ``MASKCERT_TEST_SLOW`` seconds (default 0):
    certify runs long enough, pair by pair, to be interrupted by a signal in the middle."""

    def compile(self, spec: Spec, vocabulary: Any) -> CompileOutcome:
        import os
        import time

        time.sleep(float(os.environ.get("MASKCERT_TEST_SLOW") or 0))
        return super().compile(spec, vocabulary)


def _stalls(spec: Any) -> bool:
    """Whether ``spec`` is one :class:`Stalls` stalls on: its text contains ``MASKCERT_TEST_STALL_ON``
    (every spec when that is unset)."""
    import os

    return os.environ.get("MASKCERT_TEST_STALL_ON", "") in repr(spec)


class _StallingMask(_Wrapped):
    def mask(self) -> np.ndarray:
        import os
        import time

        how, _, nth = os.environ.get("MASKCERT_TEST_STALL", "").partition("@")
        if how == "mask" and getattr(self.backend, "stalling", False):
            self.backend.masks += 1
            if self.backend.masks >= int(nth or 1):
                time.sleep(3600)  # hangs: only a deadline ends it
        return super().mask()


class Stalls(_Toy):
    """The reference, except on the specs :func:`_stalls` picks, as ``MASKCERT_TEST_STALL`` says:
    ``compile`` hangs in compile (an hour), ``mask`` in the first mask on such a spec (``mask@N``: in
    the N-th of the worker), a number of seconds makes compile that much slower and then succeed;
    unset, it is the reference. For the budget and compile-limit tests (a hang must be cut by the
    deadline, a slow compile by the limit)."""

    matcher_class = _StallingMask
    stalling = False
    masks = 0

    def compile(self, spec: Spec, vocabulary: Any) -> CompileOutcome:
        import os
        import time

        how = os.environ.get("MASKCERT_TEST_STALL", "")
        self.stalling = bool(how) and _stalls(spec)
        if self.stalling and how == "compile":
            time.sleep(3600)
        elif self.stalling and how and not how.startswith("mask"):
            time.sleep(float(how))
        return super().compile(spec, vocabulary)
