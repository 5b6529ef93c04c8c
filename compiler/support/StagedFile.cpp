//===- StagedFile.cpp - A file written into a staging directory -----------===//
//
// This file implements StagedFile.
//
//===----------------------------------------------------------------------===//
#include "support/StagedFile.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace archc {

StagedFile::StagedFile(StagedFile &&o) noexcept
    : staged(std::move(o.staged)), shown(std::move(o.shown)), file(o.file),
      written(o.written) {
  o.file = nullptr;
}

StagedFile::~StagedFile() {
  if (file)
    std::fclose(file);
}

bool StagedFile::fail(DiagnosticEngine &diags, int err) {
  diags.error(SourceRange(), "cannot write '{}': {}", shown,
              std::strerror(err ? err : EIO));
  if (file) {
    std::fclose(file);
    file = nullptr;
  }
  return false;
}

bool StagedFile::open(const std::string &s, const std::string &sh,
                      DiagnosticEngine &diags) {
  staged = s;
  shown = sh;
  written = 0;
  errno = 0;
  file = std::fopen(staged.c_str(), "wb");
  if (!file)
    return fail(diags, errno);
  return true;
}

bool StagedFile::write(const void *data, size_t size, DiagnosticEngine &diags) {
  if (!file)
    return false;
  errno = 0;
  if (size && std::fwrite(data, 1, size, file) != size)
    return fail(diags, errno);
  written += size;
  return true;
}

bool StagedFile::resize(uint64_t size, DiagnosticEngine &diags) {
  if (!file)
    return false;
  errno = 0;
  if (std::fflush(file) != 0 ||
      ftruncate(fileno(file), static_cast<off_t>(size)) != 0 ||
      std::fseek(file, 0, SEEK_END) != 0)
    return fail(diags, errno);
  written = size;
  return true;
}

bool StagedFile::close(DiagnosticEngine &diags) {
  if (!file)
    return false;
  errno = 0;
  if (std::fflush(file) != 0 || fsync(fileno(file)) != 0)
    return fail(diags, errno);
  FILE *f = file;
  file = nullptr;
  if (std::fclose(f) != 0) {
    diags.error(SourceRange(), "cannot write '{}': {}", shown,
                std::strerror(errno ? errno : EIO));
    return false;
  }
  return true;
}

} // namespace archc
