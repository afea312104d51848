"""Regenerate ``props/corpus/data/toolcall_tags.json``: the structural tags the installed xgrammar's
model templates make of the built-in tools lists (``props.corpus.toolcalls``), with its version.

Run after an xgrammar upgrade: ``python ci/gen_toolcall_tags.py`` (``--check`` only compares).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata

from props.corpus.toolcalls import SNAPSHOT, load_snapshot, snapshot, tool_call_tags


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the snapshot is not up to date")
    args = ap.parse_args()
    import xgrammar

    version = metadata.version("xgrammar")
    records = tool_call_tags(xgrammar)
    data = snapshot(records, "xgrammar", version)
    # Not sort_keys: the order of a schema's properties is part of its language.
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
    refused = sum(1 for r in records if r.tag is None)
    print(f"xgrammar {version}: {len(records)} option sets, {len(data['tags'])} tags, {refused} refused")
    if args.check:
        _, old = load_snapshot()
        same = [(r.options, r.tag, r.refused) for r in old] == [
            (r.options, r.tag, r.refused) for r in records
        ]
        print("snapshot up to date" if same else f"snapshot {SNAPSHOT} is stale: rerun without --check")
        return 0 if same else 1
    SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"wrote {SNAPSHOT} ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
