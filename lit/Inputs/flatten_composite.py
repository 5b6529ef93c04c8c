#!/usr/bin/python3
"""flatten_composite.py COMPOSITE.json OUT.json CLASS: the text model of a
*ForConditionalGeneration config as its own config: text_config's keys at
the top level, architectures [CLASS], the composite's top-level
tie_word_embeddings (which ties the head) and dtype."""
import json
import sys

d = json.load(open(sys.argv[1]))
flat = dict(d["text_config"])
flat["architectures"] = [sys.argv[3]]
flat["tie_word_embeddings"] = d.get("tie_word_embeddings", False)
for k in ("torch_dtype", "dtype"):
    if k in d:
        flat[k] = d[k]
json.dump(flat, open(sys.argv[2], "w"), indent=1)
