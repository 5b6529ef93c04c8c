"""edit_config.py IN OUT KEY=JSON...: IN with each KEY set to the JSON value
(lit/driver/hardening.test builds its hostile configs from the tiny ones)."""
import json
import sys

config = json.load(open(sys.argv[1]))
for assignment in sys.argv[3:]:
    key, value = assignment.split("=", 1)
    config[key] = json.loads(value)
json.dump(config, open(sys.argv[2], "w"), indent=1)
