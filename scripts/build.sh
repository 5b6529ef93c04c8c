#!/usr/bin/env bash
# Configures and builds archc in ./build (Release, Ninja when available).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${ARCHC_JOBS:-$(nproc 2>/dev/null || echo 2)}"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j "$jobs"
