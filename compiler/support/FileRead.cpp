//===- FileRead.cpp - Bounded reads of regular input files ----------------===//
#include "support/FileRead.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace archc {

namespace {
const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

std::string sizeText(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 20) && bytes % (uint64_t(1) << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}
} // namespace

int openRegularFile(const std::string &path, uint64_t &size,
                    std::string &error) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer; on a regular file the flag has no effect on reads, and it is
  // cleared below anyway.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    const char *kind = kindOf(st.st_mode);
    error = std::strcmp(kind, "not a regular file") == 0
                ? std::string(kind)
                : std::string("it is ") + kind + ", not a regular file";
    ::close(fd);
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0)
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

bool readRegularFile(const std::string &path, uint64_t maxBytes,
                     std::string &out, std::string &error) {
  uint64_t size = 0;
  int fd = openRegularFile(path, size, error);
  if (fd < 0)
    return false;
  if (size > maxBytes) {
    error = "the file has " + std::to_string(size) +
            " bytes, more than the limit of " + sizeText(maxBytes);
    ::close(fd);
    return false;
  }
  out.clear();
  out.resize(static_cast<size_t>(size));
  size_t got = 0;
  // Read at most maxBytes + 1: a file that grows while it is read is cut
  // off at the limit and refused, not read without bound.
  char extra;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0)
      break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  ssize_t more;
  do
    more = ::read(fd, &extra, 1);
  while (more < 0 && errno == EINTR);
  ::close(fd);
  if (more > 0) {
    error = "the file grew while it was read";
    return false;
  }
  return true;
}

} // namespace archc
