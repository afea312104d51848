"""Checkpoints of a certify run, so that a killed run continues where it stopped (``--resume DIR``).

Layout under the report directory: ``checkpoint/run.json`` holds the run's parameters
(:meth:`maskcert.certification.CertifyConfig.run_params`: what the results depend on, as JSON);
``checkpoint/results/`` holds one
file per finished (case, vocabulary) pair, the pickled :class:`~maskcert.certification.CaseResult`,
named by a digest of the case's name and spec and the vocabulary's fingerprint. Each file is written
to a temporary name and renamed (atomic on POSIX), so a kill leaves either the whole result or none.

A resumed run must have the same parameters: results of another run are never mixed
in. The pickles are this machine's own files, read back by the same maskcert version (``run.json``
records it); they are not an exchange format.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any

from refdecoder.errors import MaskcertError

__all__ = ["Checkpoint", "CheckpointError", "pair_key"]

FORMAT = 1


class CheckpointError(MaskcertError, ValueError):
    """A checkpoint that cannot be resumed: missing, unreadable, or written by a different run."""


def pair_key(case_name: str, spec_digest: str, vocab_fingerprint: str) -> str:
    """The file name stem of one (case, vocabulary) result."""
    return hashlib.sha256(f"{case_name}\0{spec_digest}\0{vocab_fingerprint}".encode()).hexdigest()[:24]


def _digest(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()


class Checkpoint:
    """The checkpoint directory of one run (see the module doc)."""

    def __init__(self, out: str | Path) -> None:
        self.dir = Path(out) / "checkpoint"
        self.results = self.dir / "results"

    def start(self, params: dict[str, Any], version: str) -> None:
        """A fresh checkpoint for a run with ``params`` (results of an earlier run there are removed)."""
        self.results.mkdir(parents=True, exist_ok=True)
        for old in self.results.glob("*.pkl"):
            old.unlink()
        doc = {"format": FORMAT, "maskcert": version, "params": params}
        self._write(self.dir / "run.json", (json.dumps(doc, indent=1, default=str) + "\n").encode())

    def _doc(self) -> dict[str, Any]:
        path = self.dir / "run.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise CheckpointError(
                f"--resume {self.dir.parent}: expected a report directory of a certify run with a "
                f"checkpoint ({path} not found)"
            ) from e
        except (OSError, json.JSONDecodeError) as e:
            raise CheckpointError(
                f"--resume {self.dir.parent}: {path} is not a readable checkpoint: {e}"
            ) from e
        if (
            not isinstance(doc, dict)
            or doc.get("format") != FORMAT
            or not isinstance(doc.get("params"), dict)
        ):
            raise CheckpointError(f"--resume {self.dir.parent}: {path}: expected checkpoint format {FORMAT}")
        return doc

    def params(self) -> dict[str, Any]:
        """The parameters the checkpointed run was started with."""
        return dict(self._doc()["params"])

    def check(self, params: dict[str, Any], version: str) -> None:
        """Raise :class:`CheckpointError` unless the checkpoint is of a run with these ``params``."""
        doc = self._doc()
        stored = doc["params"]
        if doc.get("maskcert") != version:
            raise CheckpointError(
                f"--resume {self.dir.parent}: written by maskcert {doc.get('maskcert')}, this is {version}"
            )
        if _digest(params) != _digest(stored):  # digests: the stored params went through JSON
            differ = sorted(k for k in set(params) | set(stored) if params.get(k) != stored.get(k))
            raise CheckpointError(
                f"--resume {self.dir.parent}: the checkpoint is of a run with other parameters "
                f"({', '.join(differ) or 'their JSON form'} differ); resume with the same ones"
            )
        self.results.mkdir(parents=True, exist_ok=True)

    def load(self) -> dict[str, Any]:
        """Every finished pair's result, by :func:`pair_key` (a file that cannot be read is skipped:
        that pair runs again)."""
        out: dict[str, Any] = {}
        for path in sorted(self.results.glob("*.pkl")):
            try:
                out[path.stem] = pickle.loads(path.read_bytes())  # noqa: S301 - our own file
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                continue
        return out

    def save(self, key: str, result: Any) -> None:
        self._write(self.results / f"{key}.pkl", pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
