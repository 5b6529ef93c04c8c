//===- RegionSink.h - Where the bytes of one weight region go ---*- C++ -*-===//
//
// This file declares RegionSink (internal to emit/weights): the bytes of one
// region of a weight (its float data, or its codes, scales or zero points)
// are appended in order, or, where the region's place is known (an external
// data file, an embedded initializer), written at offsets into it, which is
// how a transposed tensor is written band by band without holding it. Two
// sinks: a region of an external data file (small appends gathered into
// one buffer of 1 MiB, a checkpoint's own bytes copied by the kernel) and a
// byte string of the region's size (embedded).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_WEIGHTS_REGIONSINK_H
#define ARCHC_EMIT_WEIGHTS_REGIONSINK_H

#include "emit/weights/ExternalData.h"
#include "support/Diagnostics.h"
#include "support/Progress.h"

#include <cstdint>
#include <string>
#include <vector>

namespace archc::weights {

class RegionSink {
public:
  virtual ~RegionSink() = default;
  /// Bytes appended or skipped so far.
  uint64_t cursor() const { return at; }
  /// Appends bytes at the cursor.
  virtual bool append(const uint8_t *p, uint64_t n, DiagnosticEngine &d) = 0;
  /// Appends bytes that are also `n` bytes of the open file `fd` from
  /// `offset` (a checkpoint's own bytes): a file sink has the kernel copy
  /// them.
  virtual bool appendCopy(const uint8_t *p, uint64_t n, int fd, uint64_t offset,
                          DiagnosticEngine &d) {
    (void)fd;
    (void)offset;
    return append(p, n, d);
  }
  /// Whether writeAt works.
  virtual bool positional() const { return false; }
  /// Writes bytes at `offset` bytes into the region, at or past the cursor
  /// (positional sinks only).
  virtual bool writeAt(uint64_t offset, const uint8_t *p, uint64_t n,
                       DiagnosticEngine &d);
  /// Moves the cursor past `n` bytes written with writeAt.
  virtual void skip(uint64_t n) { at += n; }
  /// Writes out what is buffered.
  virtual bool flush(DiagnosticEngine &d) {
    (void)d;
    return true;
  }

protected:
  uint64_t at = 0;
};

/// A region of an external data file.
class FileRegionSink : public RegionSink {
public:
  FileRegionSink(ExternalDataWriter &out, const DataRegion &region)
      : out(out), region(region) {}
  bool append(const uint8_t *p, uint64_t n, DiagnosticEngine &d) override;
  bool appendCopy(const uint8_t *p, uint64_t n, int fd, uint64_t offset,
                  DiagnosticEngine &d) override;
  bool positional() const override { return true; }
  bool writeAt(uint64_t offset, const uint8_t *p, uint64_t n,
               DiagnosticEngine &d) override;
  bool flush(DiagnosticEngine &d) override;

private:
  ExternalDataWriter &out;
  DataRegion region;
  std::vector<uint8_t> buffer; ///< appended bytes before the cursor
};

/// An embedded region: a string of the region's size.
class StringRegionSink : public RegionSink {
public:
  StringRegionSink(std::string &bytes, uint64_t size, ProgressBar *progress)
      : bytes(bytes), progress(progress) {
    bytes.assign(size, '\0');
  }
  bool append(const uint8_t *p, uint64_t n, DiagnosticEngine &d) override;
  bool positional() const override { return true; }
  bool writeAt(uint64_t offset, const uint8_t *p, uint64_t n,
               DiagnosticEngine &d) override;

private:
  std::string &bytes;
  ProgressBar *progress;
};

} // namespace archc::weights

#endif // ARCHC_EMIT_WEIGHTS_REGIONSINK_H
