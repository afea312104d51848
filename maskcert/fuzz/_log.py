"""``findings.jsonl``: one ``Finding.to_json()`` per line, appended, flushed and fsynced as found.

Only the campaign's parent process writes it, so lines are never interleaved. A finding whose
:attr:`~props.contract.findings.Finding.id` is already in the file (from an earlier run) or was written in this
run is not written again. Each line is written with one ``write`` of a complete line; a file left with
a torn last line (power loss) gets a newline before the next one and the torn line is skipped when
read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO

from props.contract.findings import Finding, FindingError

__all__ = ["FindingsLog", "read_findings"]


def read_findings(path: str | Path) -> list[Finding]:
    """Every complete, well-formed finding line of ``path`` (a missing file has none)."""
    out: list[Finding] = []
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            out.append(Finding.from_json(json.loads(line)))
        except (json.JSONDecodeError, FindingError):
            continue
    return out


class FindingsLog:
    """Append-only, deduplicated by id; ``add`` returns whether the finding was new."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.known: set[str] = {f.id for f in read_findings(self.path)}
        self.preexisting: frozenset[str] = frozenset(self.known)
        self.written = 0
        torn = False
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
        self._fh: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        if torn:
            self._write("\n")

    def _write(self, text: str) -> None:
        self._fh.write(text)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def add(self, finding: Finding) -> bool:
        if finding.id in self.known:
            return False
        self.known.add(finding.id)
        self._write(json.dumps(finding.to_json(), ensure_ascii=True, sort_keys=True) + "\n")
        self.written += 1
        return True

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> FindingsLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
