//===- FileRead.h - Bounded reads of regular input files --------*- C++ -*-===//
//
// Every input file archc reads whole (.arch sources, config.json, device
// files, checkpoint indexes) goes through readRegularFile: the file is
// opened without blocking (O_NONBLOCK, so a FIFO cannot hang the open),
// checked with fstat to be a regular file, and refused when it is larger
// than the caller's limit, before a byte is read (docs/limits.md).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_FILEREAD_H
#define ARCHC_SUPPORT_FILEREAD_H

#include <cstdint>
#include <string>

namespace archc {

/// Size limits of the inputs read whole (docs/limits.md).
constexpr uint64_t kMaxSourceBytes = uint64_t(2) << 20; ///< an .arch file
constexpr uint64_t kMaxConfigBytes = uint64_t(4) << 20; ///< a config.json
constexpr uint64_t kMaxIndexBytes = uint64_t(64) << 20; ///< a weight index

/// Opens `path` read-only for a regular file: O_NONBLOCK for the open, then
/// fstat; a directory, FIFO, device or socket is refused ("it is a FIFO,
/// not a regular file"). Returns the descriptor (blocking mode restored,
/// close-on-exec) and its size, or -1 with `error` set.
int openRegularFile(const std::string &path, uint64_t &size,
                    std::string &error);

/// Reads the whole regular file `path` into `out` when it has at most
/// `maxBytes` bytes; otherwise false with `error` set (the OS reason, the
/// kind of a non-regular file, or the size over the limit).
bool readRegularFile(const std::string &path, uint64_t maxBytes,
                     std::string &out, std::string &error);

} // namespace archc

#endif // ARCHC_SUPPORT_FILEREAD_H
