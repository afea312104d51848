"""The worker process of :class:`props.backends.worker.WorkerBackend`:
``python -m props.backends._worker_main READ_FD WRITE_FD MEMORY_MB SPIN_US``.

The parent passes its ``sys.path`` twice: as ``PYTHONPATH``, so that ``-m`` finds this module even
where maskcert is not installed, and as JSON in ``MASKCERT_WORKER_SYS_PATH``, which goes first here,
in the parent's order, before anything else is imported, so the child loads the same modules (a
``module:Class`` adapter from a test folder included).
"""

from __future__ import annotations

import json
import os
import sys

if __name__ == "__main__":
    sys.path[:0] = json.loads(os.environ.get("MASKCERT_WORKER_SYS_PATH", "[]"))
    from props.backends.worker import _child_main

    _child_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
