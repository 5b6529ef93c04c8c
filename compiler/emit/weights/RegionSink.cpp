//===- RegionSink.cpp - Where the bytes of one weight region go -----------===//
//
// This file implements the region sinks.
//
//===----------------------------------------------------------------------===//
#include "emit/weights/RegionSink.h"

#include <cassert>
#include <cstring>

namespace archc::weights {

namespace {
/// Appends smaller than this are gathered before they are written.
constexpr uint64_t kAppendBuffer = uint64_t(1) << 20;
} // namespace

bool RegionSink::writeAt(uint64_t, const uint8_t *, uint64_t,
                         DiagnosticEngine &) {
  assert(false && "writeAt on a sink that only appends");
  return false;
}

bool FileRegionSink::append(const uint8_t *p, uint64_t n, DiagnosticEngine &d) {
  assert(at + n <= region.bytes && "appended past the region");
  if (buffer.size() + n > kAppendBuffer && !flush(d))
    return false;
  if (n >= kAppendBuffer) {
    if (!out.writeAt(region, at, p, n, d))
      return false;
    at += n;
    return true;
  }
  if (buffer.capacity() < kAppendBuffer)
    buffer.reserve(kAppendBuffer);
  buffer.insert(buffer.end(), p, p + n);
  at += n;
  return true;
}

bool FileRegionSink::appendCopy(const uint8_t *p, uint64_t n, int fd,
                                uint64_t offset, DiagnosticEngine &d) {
  // Small pieces are gathered like any append.
  if (n < kAppendBuffer)
    return append(p, n, d);
  assert(at + n <= region.bytes && "appended past the region");
  if (!flush(d) || !out.copyAt(region, at, fd, offset, p, n, d))
    return false;
  at += n;
  return true;
}

bool FileRegionSink::writeAt(uint64_t offset, const uint8_t *p, uint64_t n,
                             DiagnosticEngine &d) {
  assert(offset >= at && offset + n <= region.bytes &&
         "written past the cursor, inside the region");
  return out.writeAt(region, offset, p, n, d);
}

bool FileRegionSink::flush(DiagnosticEngine &d) {
  if (buffer.empty())
    return true;
  bool ok =
      out.writeAt(region, at - buffer.size(), buffer.data(), buffer.size(), d);
  buffer.clear();
  return ok;
}

bool StringRegionSink::append(const uint8_t *p, uint64_t n,
                              DiagnosticEngine &d) {
  if (!writeAt(at, p, n, d))
    return false;
  at += n;
  return true;
}

bool StringRegionSink::writeAt(uint64_t offset, const uint8_t *p, uint64_t n,
                               DiagnosticEngine &) {
  assert(offset + n <= bytes.size() && "written past the region");
  std::memcpy(bytes.data() + offset, p, n);
  if (progress)
    progress->advance(n);
  return true;
}

} // namespace archc::weights
