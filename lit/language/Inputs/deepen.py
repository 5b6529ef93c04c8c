#!/usr/bin/python3
"""deepen.py IN.json OUT.json key=json-value ... [-key]: a copy of a config
with keys set (values parsed as JSON) or removed (-key)."""
import json
import sys

cfg = json.load(open(sys.argv[1]))
for arg in sys.argv[3:]:
    if arg.startswith("-"):
        cfg.pop(arg[1:], None)
    else:
        k, v = arg.split("=", 1)
        cfg[k] = json.loads(v)
json.dump(cfg, open(sys.argv[2], "w"), indent=1)
