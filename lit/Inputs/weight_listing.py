"""Reads the tensor list that `archc -emit=weights` prints: one `NAME [dims] ...` per line,
`//` comment lines and blank lines skipped."""
import json


def read_listing(stream):
    """Returns [(name, shape)] in the listing's order."""
    tensors = []
    for line in stream:
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        name, rest = line.split(" ", 1)
        tensors.append((name, json.loads(rest[: rest.index("]") + 1])))
    return tensors
