#!/usr/bin/env python3
"""Reads `cargo test --no-run --message-format=json` on stdin and prints, one per line,
`<package folder> <test executable>` for the test targets of the packages named as
arguments, or with `--except NAME...` of every package but those (scripts/test.sh runs
them as cargo would)."""

import json
import os
import sys

args = sys.argv[1:]
exclude = bool(args) and args[0] == "--except"
names = set(args[1:] if exclude else args)
seen = set()
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    if not msg.get("profile", {}).get("test"):
        continue
    # package_id: "path+file:///work/main/agent#cairn-agent@0.1.0", or "...#0.1.0" when
    # the folder is named as the package.
    location, _, tail = msg["package_id"].rpartition("#")
    name = tail.split("@", 1)[0] if "@" in tail else os.path.basename(location)
    if (name in names) == exclude or msg["executable"] in seen:
        continue
    seen.add(msg["executable"])
    print(os.path.dirname(msg["manifest_path"]), msg["executable"])
