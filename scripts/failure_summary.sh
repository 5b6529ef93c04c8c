#!/usr/bin/env bash
# Prints, after a failed ctest run in the current build folder, the lines
# that say why (archc's and the tools' error lines from the ctest log) and
# the free disk space, in a few lines at the end of the output, where a CI
# report that keeps only the tail of a long log still shows them.
log=Testing/Temporary/LastTest.log
echo "== failure summary"
df -h . "${TMPDIR:-/tmp}" 2>/dev/null
if [ -f "$log" ]; then
  grep -h -E "^[A-Za-z0-9_./-]+: error: |^FAIL: |\*\*\*Failed" "$log" |
    cut -c1-300 | sort | uniq -c | sort -rn | head -30
fi
