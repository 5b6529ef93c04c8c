//===- Progress.cpp - A progress bar for long work on stderr --------------===//
//
// This file implements ProgressBar.
//
//===----------------------------------------------------------------------===//
#include "support/Progress.h"

#include <fmt/format.h>

#include <sys/ioctl.h>
#include <unistd.h>

namespace archc {

std::string formatBytes(double bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0)
    return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.{}f} {}", bytes,
                     bytes < 10    ? 2
                     : bytes < 100 ? 1
                                   : 0,
                     units[u]);
}

namespace {
std::string formatDuration(double seconds) {
  if (!(seconds >= 0) || seconds > 359999)
    return "--:--";
  auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600)
    return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

unsigned terminalWidth(FILE *out) {
  struct winsize ws {};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
    return ws.ws_col;
  return 80;
}
} // namespace

ProgressBar::ProgressBar(std::string l, uint64_t t, bool e, FILE *o)
    : label(std::move(l)), total(t), enabled(e && t > 0), out(o),
      start(std::chrono::steady_clock::now()), lastDraw(start) {}

ProgressBar::~ProgressBar() {
  // An abandoned bar (an error) ends its line so the error starts clean.
  if (enabled && !finished && done > 0)
    std::fputs("\n", out);
}

bool ProgressBar::stderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

std::string ProgressBar::render(const std::string &label, uint64_t done,
                                uint64_t total, double seconds,
                                unsigned width) {
  double frac = total ? static_cast<double>(done) / total : 1.0;
  if (frac > 1)
    frac = 1;
  double rate = seconds > 0 ? done / seconds : 0;
  std::string eta = done >= total ? formatDuration(seconds)
                    : rate > 0 ? "ETA " + formatDuration((total - done) / rate)
                               : "ETA --:--";
  std::string tail =
      fmt::format(" {:3.0f}% {} / {} {}/s {}", frac * 100, formatBytes(done),
                  formatBytes(total), formatBytes(rate), eta);
  std::string head = label + " ";
  int barWidth = static_cast<int>(width) - 1 - static_cast<int>(head.size()) -
                 static_cast<int>(tail.size()) - 2;
  if (barWidth < 10)
    barWidth = 10;
  int filled = static_cast<int>(frac * barWidth + 0.5);
  return head + "[" + std::string(filled, '#') +
         std::string(barWidth - filled, '.') + "]" + tail;
}

void ProgressBar::draw(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!force && now - lastDraw < std::chrono::milliseconds(100))
    return;
  lastDraw = now;
  double seconds = std::chrono::duration<double>(now - start).count();
  std::string line = render(label, done, total, seconds, terminalWidth(out));
  // \r and erase-to-end-of-line: redraw in place.
  std::fprintf(out, "\r%s\x1b[K", line.c_str());
  std::fflush(out);
}

void ProgressBar::advance(uint64_t bytes) {
  done += bytes;
  if (enabled)
    draw(false);
}

void ProgressBar::finish() {
  if (!enabled || finished)
    return;
  finished = true;
  draw(true);
  std::fputs("\n", out);
  std::fflush(out);
}

} // namespace archc
