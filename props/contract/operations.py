"""The operations a serving certificate replays (fork, rollback, speculation, ...), as values.

A certificate's ``operations`` is the exact sequence of matcher calls that shows a serving defect;
the reproducer script replays it with nothing but the engine's own API. In memory it is a list of
:class:`Op`; in JSON (``report.json``, ``findings.jsonl``, reproducers) each op is a list,
``[kind]`` or ``[kind, argument]``, e.g. ``["accept", 97]``, ``["switch", 1]``, ``["mask"]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from props.contract.findings import FindingError, _Word

__all__ = [
    "OpKind",
    "Op",
    "accept",
    "rollback",
    "switch",
    "validate",
    "MASK",
    "FORK",
    "ACCEPTING",
    "FORCED_BYTES",
]


class OpKind(_Word):
    """One matcher call: ``accept(token)``, ``mask()``, ``fork()``, ``switch(i)`` (continue on matcher
    ``i``: 0 the original, 1.. its forks in order), ``rollback(k)``, ``validate(draft ids)``,
    ``is_accepting()``, ``forced_bytes()``."""

    ACCEPT = "accept"
    MASK = "mask"
    FORK = "fork"
    SWITCH = "switch"
    ROLLBACK = "rollback"
    VALIDATE = "validate"
    ACCEPTING = "accepting"
    FORCED_BYTES = "forced_bytes"


_ARGUMENT: dict[OpKind, str] = {
    OpKind.ACCEPT: "int",
    OpKind.SWITCH: "int",
    OpKind.ROLLBACK: "int",
    OpKind.VALIDATE: "ids",
}


@dataclass(frozen=True)
class Op:
    """One operation; ``arg`` is the token, matcher index or count (an int), the draft token ids for
    ``validate`` (a tuple), and None for the calls without an argument."""

    kind: OpKind
    arg: int | tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        try:
            kind = OpKind(self.kind)
        except ValueError:
            raise FindingError(
                "operation", f"one of {', '.join(k.value for k in OpKind)}, not {self.kind!r}"
            ) from None
        object.__setattr__(self, "kind", kind)
        want = _ARGUMENT.get(kind)
        if want == "int" and not (isinstance(self.arg, int) and not isinstance(self.arg, bool)):
            raise FindingError(f"operation {kind.value}", f"an int argument, not {self.arg!r}")
        if want == "ids":
            if not isinstance(self.arg, (list, tuple)) or not all(isinstance(i, int) for i in self.arg):
                raise FindingError(f"operation {kind.value}", f"a list of token ids, not {self.arg!r}")
            object.__setattr__(self, "arg", tuple(int(i) for i in self.arg))
        if want is None and self.arg is not None:
            raise FindingError(f"operation {kind.value}", f"no argument, not {self.arg!r}")

    def to_json(self) -> list[Any]:
        if self.arg is None:
            return [self.kind.value]
        return [self.kind.value, list(self.arg) if isinstance(self.arg, tuple) else self.arg]

    @classmethod
    def from_json(cls, value: Any) -> Op:
        if not isinstance(value, list) or not 1 <= len(value) <= 2:
            raise FindingError("operation", f'["kind"] or ["kind", argument], not {value!r}')
        return cls(value[0], value[1] if len(value) == 2 else None)


def accept(token: int) -> Op:
    return Op(OpKind.ACCEPT, int(token))


def rollback(k: int) -> Op:
    return Op(OpKind.ROLLBACK, int(k))


def switch(i: int) -> Op:
    return Op(OpKind.SWITCH, int(i))


def validate(draft: list[int] | tuple[int, ...]) -> Op:
    return Op(OpKind.VALIDATE, tuple(int(i) for i in draft))


MASK = Op(OpKind.MASK)
FORK = Op(OpKind.FORK)
ACCEPTING = Op(OpKind.ACCEPTING)
FORCED_BYTES = Op(OpKind.FORCED_BYTES)
