#!/usr/bin/python3
"""Runs archc with transpose / gather tiles of several sizes; fails unless every file it
writes is the same.

Usage: tile_sizes.py ARCHC WORK_DIR ARGS...

ARGS are archc's, with `{out}` standing for the output folder of each run (WORK_DIR/tile-N).
The tiles are ARCHC_WEIGHT_TILE_BYTES=1 (one output row gathered at a time), 1000 (a tall
matrix is read in bands of whole rows and written in pieces at their offsets) and the
default. Prints `same bytes at tiles of 1, 1000 and the default: N files`.
"""
import os
import shutil
import subprocess
import sys


def run(archc, work, args, tile):
    out = os.path.join(work, "tile-%s" % (tile or "default"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ)
    env.pop("ARCHC_WEIGHT_TILE_BYTES", None)
    if tile:
        env["ARCHC_WEIGHT_TILE_BYTES"] = str(tile)
    cmd = [archc] + [a.replace("{out}", out) for a in args]
    if subprocess.run(cmd, env=env).returncode != 0:
        sys.exit("tile_sizes.py: failed: %s" % " ".join(cmd))
    files = {}
    for root, _, names in os.walk(out):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, out)] = f.read()
    return files


def main():
    archc, work, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    default = run(archc, work, args, None)
    for tile in (1, 1000):
        got = run(archc, work, args, tile)
        if sorted(got) != sorted(default):
            sys.exit("tile_sizes.py: tile %d wrote %s, the default %s"
                     % (tile, sorted(got), sorted(default)))
        for name in sorted(default):
            if got[name] != default[name]:
                sys.exit("tile_sizes.py: tile %d: %s differs" % (tile, name))
    print("same bytes at tiles of 1, 1000 and the default: %d files" % len(default))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
