//===- StagedFile.cpp - A file written into a staging directory -----------===//
//
// This file implements StagedFile over a file descriptor: pwrite at the
// append position or at an offset, copy_file_range from another file, fsync
// on close.
//
//===----------------------------------------------------------------------===//
#include "support/StagedFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace archc {

StagedFile::StagedFile(StagedFile &&o) noexcept
    : staged(std::move(o.staged)), shown(std::move(o.shown)), fd(o.fd),
      appendAt(o.appendAt), end(o.end) {
  o.fd = -1;
}

StagedFile::~StagedFile() {
  if (fd >= 0)
    ::close(fd);
}

bool StagedFile::fail(DiagnosticEngine &diags, int err) {
  diags.error(SourceRange(), "cannot write '{}': {}", shown,
              std::strerror(err ? err : EIO));
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
  return false;
}

bool StagedFile::open(const std::string &s, const std::string &sh,
                      DiagnosticEngine &diags) {
  staged = s;
  shown = sh;
  appendAt = end = 0;
  errno = 0;
  fd = ::open(staged.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return fail(diags, errno);
  return true;
}

bool StagedFile::writeAt(uint64_t offset, const void *data, size_t size,
                         DiagnosticEngine &diags) {
  if (fd < 0)
    return false;
  const char *p = static_cast<const char *>(data);
  uint64_t at = offset;
  size_t left = size;
  while (left > 0) {
    errno = 0;
    ssize_t n = ::pwrite(fd, p, left, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(diags, n == 0 ? ENOSPC : errno);
    p += n;
    at += static_cast<uint64_t>(n);
    left -= static_cast<size_t>(n);
  }
  end = std::max(end, offset + size);
  return true;
}

bool StagedFile::copyAt(uint64_t offset, int srcFd, uint64_t srcOffset,
                        const void *srcData, size_t size,
                        DiagnosticEngine &diags) {
  if (fd < 0)
    return false;
  size_t done = 0;
  while (done < size && srcFd >= 0) {
    off_t in = static_cast<off_t>(srcOffset + done),
          out = static_cast<off_t>(offset + done);
    errno = 0;
    ssize_t n = ::copy_file_range(srcFd, &in, fd, &out, size - done, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      // Not between these files (another file system on an old kernel, a
      // special file): the rest from memory. A full disk is an error.
      if (n < 0 && (errno == ENOSPC || errno == EDQUOT || errno == EIO ||
                    errno == EFBIG))
        return fail(diags, errno);
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (done < size &&
      !writeAt(offset + done, static_cast<const char *>(srcData) + done,
               size - done, diags))
    return false;
  end = std::max(end, offset + size);
  return true;
}

bool StagedFile::write(const void *data, size_t size, DiagnosticEngine &diags) {
  if (!writeAt(appendAt, data, size, diags))
    return false;
  appendAt += size;
  return true;
}

bool StagedFile::resize(uint64_t size, DiagnosticEngine &diags) {
  if (fd < 0)
    return false;
  errno = 0;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0)
    return fail(diags, errno);
  appendAt = end = size;
  return true;
}

bool StagedFile::close(DiagnosticEngine &diags) {
  if (fd < 0)
    return false;
  errno = 0;
  if (fsync(fd) != 0)
    return fail(diags, errno);
  int f = fd;
  fd = -1;
  if (::close(f) != 0) {
    diags.error(SourceRange(), "cannot write '{}': {}", shown,
                std::strerror(errno ? errno : EIO));
    return false;
  }
  return true;
}

} // namespace archc
