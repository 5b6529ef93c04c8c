#!/usr/bin/env bash
# Bounded fuzzing of archc's input parsers (docs/testing.md, "Fuzzing").
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s each; all
#   targets: arch config safetensors weights index quantized folder)
# Builds the libFuzzer targets with clang-14, ASan and UBSan (the
# scripts/sanitize.sh build, ./build-asan), seeds each from the tree
# (archs/, archs/configs/, lit/, a tiny checkpoint, the regression inputs),
# runs it for the time given, and copies every input that crashed, went past
# the memory limit or timed out into
# fuzz/regressions/<target>/, which the ctest tests fuzz.replay.<target>
# replay with the normal build. Exit 1 if any target found a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(arch config safetensors weights index quantized folder)
if ! command -v clang++-14 >/dev/null ||
   ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: needs clang++-14 and libFuzzer (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi
# The sanitizer build (scripts/sanitize.sh) holds the fuzz targets when it is
# compiled with clang.
if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^ARCHC_FUZZ:BOOL=ON' build-asan/CMakeCache.txt; then
  echo "fuzz.sh: build-asan was configured without clang/ARCHC_FUZZ; remove it and rerun" >&2
  exit 2
fi
scripts/sanitize.sh --build-only
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
export ARCHC_ARCHS_DIR="$PWD/archs"
work="build-asan/fuzz-runs"
failed=0
for t in "${targets[@]}"; do
  seeds="$work/$t/seeds"
  corpus="$work/$t/corpus"
  artifacts="$work/$t/artifacts"
  rm -rf "$seeds" "$artifacts"
  mkdir -p "$seeds" "$corpus" "$artifacts"
  # Seeds are named by their path (several folders hold an h8.json).
  seed() { while IFS= read -r -d '' f; do cp "$f" "$seeds/$(echo "$f" | tr / _)"; done; }
  case "$t" in
    arch) find archs lit -name '*.arch' -size -64k -print0 | seed ;;
    config) find archs/configs lit -name '*.json' -size -64k -print0 | seed ;;
    safetensors|weights)
      # The tiny Llama's checkpoint in two dtypes (make_safetensors.py).
      for dtype in F32 BF16; do
        build-asan/bin/archc archs/llama.arch --config archs/configs/tiny/llama.json -emit=weights |
          /usr/bin/python3 lit/Inputs/make_safetensors.py "$seeds/tiny-$dtype.safetensors" --dtype "$dtype"
      done ;;
    index)
      # A real index of the tiny Llama in two shards.
      build-asan/bin/archc archs/llama.arch --config archs/configs/tiny/llama.json -emit=weights |
        /usr/bin/python3 lit/Inputs/make_safetensors.py "$work/$t/sharded" --shards 2
      cp "$work/$t/sharded/model.safetensors.index.json" "$seeds/tiny-index.json" ;;
    quantized)
      # The released layouts: FP8 with F32 scales, DeepSeek-V4 FP8 + FP4,
      # gpt-oss MXFP4.
      for layout in "llama fp8" "llama v4" "gpt_oss mxfp4"; do
        set -- $layout
        build-asan/bin/archc "archs/$1.arch" --config "archs/configs/tiny/$1.json" -emit=weights |
          /usr/bin/python3 lit/Inputs/make_quantized_checkpoint.py "archs/configs/tiny/$1.json" "$work/$t/$2" "$2"
        cp "$work/$t/$2/model.safetensors" "$seeds/$2.safetensors"
      done ;;
    folder)
      # Side files: a selector byte, then the content (ModelFolder.h).
      for i in 0 1 2 7; do
        { printf "\\$(printf '%03o' "$i")"; cat archs/configs/tiny/llama.json; } > "$seeds/side-$i"
      done ;;
  esac
  cp -r "fuzz/regressions/$t/." "$seeds/" 2>/dev/null || true
  echo "fuzz.sh: $t for $seconds s ($(ls "$seeds" | wc -l) seeds)"
  set +e
  "build-asan/bin/archc-fuzz-$t" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" "$seeds" \
    > "$work/$t/log.txt" 2>&1
  rc=$?
  set -e
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$work/$t/log.txt" | sed "s/^/fuzz.sh: $t: /"
  if ls "$artifacts"/* >/dev/null 2>&1; then
    failed=1
    for a in "$artifacts"/*; do
      cp "$a" "fuzz/regressions/$t/"
      echo "fuzz.sh: $t: FAILURE kept as fuzz/regressions/$t/$(basename "$a") (log: $work/$t/log.txt)"
    done
  elif [ $rc -ne 0 ]; then
    failed=1
    echo "fuzz.sh: $t: libFuzzer exited with $rc (log: $work/$t/log.txt)"
  fi
done
exit $failed
