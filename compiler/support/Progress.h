//===- Progress.h - A progress bar for long work on stderr ------*- C++ -*-===//
//
// This file declares ProgressBar: bytes done of a total, the rate and the
// time left, redrawn in place on stderr at most ten times a second. It draws
// only when enabled (the driver enables it when stderr is a terminal and
// --quiet is not given), so logs and pipes never see it.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_PROGRESS_H
#define ARCHC_SUPPORT_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace archc {

class ProgressBar {
public:
  /// A bar titled `label` for `total` bytes, drawn to `out` when `enabled`.
  ProgressBar(std::string label, uint64_t total, bool enabled,
              FILE *out = stderr);
  ~ProgressBar();

  /// Adds `bytes` to the work done; redraws when due.
  void advance(uint64_t bytes);
  /// Draws the final state and ends the line (once).
  void finish();

  /// Whether stderr is a terminal.
  static bool stderrIsTerminal();

  /// One line of the bar for `done` of `total` bytes after `seconds`, fit to
  /// `width` columns (exposed for tests).
  static std::string render(const std::string &label, uint64_t done,
                            uint64_t total, double seconds, unsigned width);

private:
  void draw(bool force);
  std::string label;
  uint64_t total, done = 0;
  bool enabled, finished = false;
  FILE *out;
  std::chrono::steady_clock::time_point start, lastDraw;
};

/// "1.50 GiB", "12.0 MiB", "512 B".
std::string formatBytes(double bytes);

} // namespace archc

#endif // ARCHC_SUPPORT_PROGRESS_H
