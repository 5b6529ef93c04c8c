#!/usr/bin/env bash
# Builds archc with AddressSanitizer + UBSan into ./build-asan and runs the
# ctest suite there (arguments go to ctest: `scripts/sanitize.sh -R '^lit$'`;
# `--build-only` stops after the build). Any sanitizer report fails the test
# that triggered it (UBSan does not recover; ASan aborts).
# The compiler is clang-14 when installed (then the same build also holds the
# libFuzzer targets that scripts/fuzz.sh runs), else g++; $CXX overrides.
# ARCHC_SANITIZE_SUBSET=1 runs the unit + lit + fuzz-replay subset only
# (docs/testing.md, "Sanitizers").
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${ARCHC_JOBS:-$(nproc 2>/dev/null || echo 2)}"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ ! -f build-asan/CMakeCache.txt ]; then
  if [ -z "${CXX:-}" ] && command -v clang++-14 >/dev/null &&
     ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    export CC=clang-14 CXX=clang++-14
  fi
  fuzz=OFF
  case "$("${CXX:-g++}" --version | head -1)" in *clang*) fuzz=ON ;; esac
  CXX="${CXX:-g++}" cmake -S . -B build-asan "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARCHC_SANITIZE=ON -DARCHC_FUZZ=$fuzz
fi
start=$(date +%s)
cmake --build build-asan -j "$jobs"
echo "sanitize.sh: build took $(( $(date +%s) - start )) s"
[ "${1:-}" = "--build-only" ] && exit 0
# detect_leaks=0: the ANTLR runtime and protobuf keep static caches alive at
# exit, which LeakSanitizer would report as leaks of every run.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
args=("$@")
if [ "${ARCHC_SANITIZE_SUBSET:-0}" = 1 ] && [ ${#args[@]} -eq 0 ]; then
  args=(-E '^(ort|f16|tjs|vlm|vlm-f16|ref|quant|qckpt)\.')
fi
cd build-asan
start=$(date +%s)
ctest -j "$jobs" --output-on-failure "${args[@]}" || { ../scripts/failure_summary.sh; exit 8; }
echo "sanitize.sh: ctest under ASan+UBSan took $(( $(date +%s) - start )) s"
