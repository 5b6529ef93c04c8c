//===- FileRead.cpp - Bounded reads of regular input files ----------------===//
#include "support/FileRead.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

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
std::mutex &inputsMutex() {
  static std::mutex m;
  return m;
}
/// (device, inode) -> the path it was first read through.
std::map<std::pair<uint64_t, uint64_t>, std::string> &inputs() {
  static std::map<std::pair<uint64_t, uint64_t>, std::string> files;
  return files;
}
} // namespace

void noteInputFile(const InputFile &file) {
  std::lock_guard<std::mutex> lock(inputsMutex());
  // The latest path: an inode of a file deleted since may be reused.
  inputs().insert_or_assign(std::make_pair(file.device, file.inode), file.path);
}

std::vector<InputFile> inputFilesRead() {
  std::lock_guard<std::mutex> lock(inputsMutex());
  std::vector<InputFile> out;
  for (const auto &[id, path] : inputs())
    out.push_back({id.first, id.second, path});
  return out;
}

bool findInputFile(const std::string &path, InputFile &found) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return false;
  std::lock_guard<std::mutex> lock(inputsMutex());
  auto it = inputs().find(
      {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
  if (it == inputs().end())
    return false;
  // The input is still there under the path it was read through (a file
  // deleted since may have left its inode number to another).
  struct stat again;
  if (::stat(it->second.c_str(), &again) != 0 || again.st_dev != st.st_dev ||
      again.st_ino != st.st_ino)
    return false;
  found = {it->first.first, it->first.second, it->second};
  return true;
}

std::string realPath(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A dangling symlink names its target (weakly_canonical would keep the
  // link's own name).
  fs::path p = path;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec));
       ++hops) {
    fs::path target = fs::read_symlink(p, ec);
    if (ec)
      break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  p = fs::weakly_canonical(p, ec);
  if (ec)
    return path;
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s;
}

bool pathWithin(const std::string &inner, const std::string &outer) {
  if (outer.empty())
    return false;
  if (inner == outer)
    return true;
  std::string prefix = outer.back() == '/' ? outer : outer + "/";
  return inner.compare(0, prefix.size(), prefix) == 0;
}

FolderBounds::FolderBounds(const std::string &folder) : dir(realPath(folder)) {
  namespace fs = std::filesystem;
  // A Hugging Face cache: models--org--name/snapshots/<rev>/... hold
  // symlinks into models--org--name/blobs/.
  for (fs::path a = fs::path(dir);
       a.has_relative_path() && a != a.parent_path(); a = a.parent_path())
    if (a.filename() == "snapshots") {
      blobs = (a.parent_path() / "blobs").string();
      break;
    }
}

bool FolderBounds::contains(const std::string &path, std::string &why) const {
  std::string real = realPath(path);
  if ((pathWithin(real, dir) && real != dir) ||
      (!blobs.empty() && pathWithin(real, blobs) && real != blobs))
    return true;
  why = "it leads to '" + real + "', outside the folder '" + dir + "'";
  return false;
}

bool staysInFolder(const std::string &path, const std::string &folder,
                   std::string &why) {
  return FolderBounds(folder).contains(path, why);
}

int openRegularFile(const std::string &path, uint64_t &size, std::string &error,
                    bool input) {
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
  if (input)
    noteInputFile({static_cast<uint64_t>(st.st_dev),
                   static_cast<uint64_t>(st.st_ino), path});
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0)
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

bool readRegularFile(const std::string &path, uint64_t maxBytes,
                     std::string &out, std::string &error, bool input) {
  uint64_t size = 0;
  int fd = openRegularFile(path, size, error, input);
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
