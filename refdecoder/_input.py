"""Reading spec files: bytes and a name in, a value or a typed :class:`SpecFileError` out.

Sans-I/O (docs/style.md §5): the caller reads the bytes (``Path.read_bytes``) and passes the file's
name; nothing here touches the file system. Every way a spec file can be wrong is one typed error
naming the file, what was expected and where:

* larger than ``Limits.schema_bytes`` (checked before decoding);
* not UTF-8 (the byte offset, line and column of the first bad byte);
* a JSON document nested deeper than ``Limits.nesting_depth`` (found by a linear scan of bracket
  depth outside strings *before* ``json.loads``, whose recursion would otherwise overflow);
* not JSON (``json``'s message with line and column; also integers longer than Python converts).
"""

from __future__ import annotations

import json
from typing import Any

from ._limits import Limits
from .errors import SpecFileError

__all__ = ["read_spec_text", "read_spec_json", "json_nesting"]


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, column


def read_spec_text(data: bytes, name: str, *, expected: str, limits: Limits | None = None) -> str:
    """``data`` as UTF-8 text, or :class:`SpecFileError` (too large, not UTF-8)."""
    limits = limits or Limits()
    if len(data) > limits.schema_bytes:
        raise SpecFileError(
            name,
            f"{expected} of at most {limits.schema_bytes} bytes (Limits.schema_bytes)",
            f"{len(data)} bytes",
            limit="schema_bytes",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = _line_col(data, e.start)
        raise SpecFileError(
            name,
            f"{expected} in UTF-8",
            f"{e.reason}: byte {data[e.start : e.start + 1]!r} at byte offset {e.start} "
            f"(line {line}, column {column})",
            line=line,
            column=column,
            offset=e.start,
        ) from None


_CHUNK = 1 << 24


def json_nesting(data: bytes, limit: int) -> tuple[int, int]:
    """(the deepest bracket nesting of a JSON text outside its strings, the byte offset of the first
    bracket deeper than ``limit`` or -1).

    Linear, vectorized and without recursion, over the positions of quotes, backslashes and brackets
    only (a tokenizer file of 4 MB has a few hundred thousand): a quote opens or closes a string
    unless an odd run of backslashes precedes it; a bracket counts only where an even number of such
    quotes precedes it. Chunks of 16 MiB carry the string parity, the trailing backslash run and the
    depth across their border.
    """
    import numpy as np

    deepest, first = 0, -1
    inside, run_in, base = 0, 0, 0
    for start in range(0, len(data), _CHUNK):
        arr = np.frombuffer(data, dtype=np.uint8, count=min(_CHUNK, len(data) - start), offset=start)
        n = arr.size
        bs = np.flatnonzero(arr == 0x5C)
        # Each backslash's run start (position of the run's first backslash).
        new_run = np.diff(bs, prepend=-2) != 1
        run_start = bs[np.maximum.accumulate(np.where(new_run, np.arange(bs.size), 0))]
        quotes = np.flatnonzero(arr == 0x22)
        # The backslash run just before each quote (a run from the chunk's start continues run_in).
        j = np.searchsorted(bs, quotes) - 1
        after_run = j >= 0
        after_run[after_run] = bs[j[after_run]] == quotes[after_run] - 1
        starts = run_start[j[after_run]]
        run = np.where(quotes == 0, run_in, 0)
        run[after_run] = quotes[after_run] - starts + np.where(starts == 0, run_in, 0)
        toggles = quotes[run % 2 == 0]
        brackets = np.flatnonzero((arr == 0x5B) | (arr == 0x7B) | (arr == 0x5D) | (arr == 0x7D))
        outside = (np.searchsorted(toggles, brackets) + inside) % 2 == 0
        kept = brackets[outside]
        opens = arr[kept]
        step = np.where((opens == 0x5B) | (opens == 0x7B), 1, -1)
        depth = np.cumsum(step, dtype=np.int64) + base
        if depth.size:
            deepest = max(deepest, int(depth.max()))
            if first < 0 and deepest > limit:
                first = start + int(kept[int((depth > limit).argmax())])
            base = int(depth[-1])
        inside = (inside + toggles.size) % 2
        if n and arr[-1] == 0x5C:
            last = int(run_start[-1])
            run_in = n - last + (run_in if last == 0 else 0)
        else:
            run_in = 0
    return deepest, first


def read_spec_json(
    data: bytes, name: str, *, expected: str = "a JSON document", limits: Limits | None = None
) -> Any:
    """``data`` parsed as one JSON document, or :class:`SpecFileError` naming ``name`` and where."""
    limits = limits or Limits()
    text = read_spec_text(data, name, expected=expected, limits=limits)
    deepest, at = json_nesting(data, limits.nesting_depth)
    if at >= 0:
        line, column = _line_col(data, at)
        raise SpecFileError(
            name,
            f"{expected} nested at most {limits.nesting_depth} deep (Limits.nesting_depth)",
            f"nesting depth {deepest}, deeper than {limits.nesting_depth} from line {line}, column {column}",
            line=line,
            column=column,
            offset=at,
            limit="nesting_depth",
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecFileError(
            name,
            expected,
            f"invalid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
            line=e.lineno,
            column=e.colno,
        ) from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4300 digits
        raise SpecFileError(name, expected, f"not JSON that Python can read: {e}") from None
