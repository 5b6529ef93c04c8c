//===- FuzzCommon.h - Shared helpers of the fuzz targets --------*- C++ -*-===//
//
// The fuzz targets (fuzz/Fuzz*.cpp) each define LLVMFuzzerTestOneInput.
// They are linked into libFuzzer binaries (-DARCHC_FUZZ=ON, clang) and into
// plain replay executables that run a corpus folder (ReplayMain.cpp): the
// regression inputs under fuzz/regressions/ are a normal ctest test.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FUZZ_FUZZCOMMON_H
#define ARCHC_FUZZ_FUZZCOMMON_H

#include "driver/Compiler.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace archc::fuzz {

/// A file of this process's scratch folder (created on first use, under
/// $TMPDIR or /tmp), e.g. scratchPath("input.arch").
std::string scratchPath(const std::string &name);

/// Writes `size` bytes to `path` (replacing it); false on an I/O error.
bool writeBytes(const std::string &path, const uint8_t *data, size_t size);

/// The bundled tiny config of a family (archs/configs/tiny/<name>.json).
std::string tinyConfig(const std::string &family);

/// Runs the front half (load, Sema, config binding, IR, verifier, passes)
/// on `opts` with diagnostics captured, not printed. Returns whether it
/// succeeded; every failure must be a reported error, never a crash (an
/// int64 overflow of a symbolic dim is one: the driver reports it).
bool compileQuietly(const Options &opts, Compilation &c);

} // namespace archc::fuzz

#endif // ARCHC_FUZZ_FUZZCOMMON_H
