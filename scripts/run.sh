#!/usr/bin/env bash
# Sets up, builds, and runs archc's main job on a bundled model: the profile
# of Llama-3.1-8B (prefill 2048 tokens, decode at 2048 past) on an H200.
# Extra arguments are passed to archc (e.g. --device=h100-sxm,rtx-4090).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
scripts/build.sh >/dev/null
exec build/bin/archc archs/llama.arch --config archs/configs/Llama-3.1-8B.json \
  -emit=profile --device=h200 --seq=2048 "$@"
