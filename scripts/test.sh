#!/usr/bin/env bash
# Sets up (Debian packages, onnxruntime-node), builds, and runs every test:
# GoogleTest unit tests, lit/FileCheck goldens, ONNX Runtime execution tests,
# transformers.js client tests (Node, and the browser bundle in headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
(cd tests/ort && { [ -f node_modules/onnxruntime-node/package.json ] || npm ci --ignore-scripts --no-audit --no-fund; })
(cd tests/transformersjs && { [ -f node_modules/@huggingface/transformers/package.json ] || npm ci --ignore-scripts --no-audit --no-fund; })
(cd tests/browser && { [ -f node_modules/puppeteer-core/package.json ] || npm ci --ignore-scripts --no-audit --no-fund; })
scripts/build.sh
jobs="${ARCHC_JOBS:-$(nproc 2>/dev/null || echo 2)}"
cd build
ctest -j "$jobs" --output-on-failure "$@" || { ../scripts/failure_summary.sh; exit 8; }
