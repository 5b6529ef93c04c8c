#!/usr/bin/env bash
# Checks that the C++ sources follow .clang-format (LLVM style): every file
# under compiler/, tests/unit/ and fuzz/ must be unchanged by clang-format.
# Exit 0 when clean, 1 with the list of files otherwise, 77 (skip) when
# clang-format is not installed. Fix with: scripts/check_format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
cf="${CLANG_FORMAT:-$(command -v clang-format || command -v clang-format-14 || true)}"
if [ -z "$cf" ]; then
  echo "check_format: clang-format not found (apt-get install clang-format)"
  exit 77
fi
mapfile -t files < <(git ls-files 'compiler/*.cpp' 'compiler/*.h' 'tests/unit/*.cpp' 'tests/unit/*.h' 'fuzz/*.cpp' 'fuzz/*.h' 2>/dev/null ||
                     find compiler tests/unit fuzz -name '*.cpp' -o -name '*.h')
if [ "${1:-}" = "--fix" ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) differ from clang-format (LLVM style):"
  printf '  %s\n' "${bad[@]}"
  echo "run scripts/check_format.sh --fix"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
