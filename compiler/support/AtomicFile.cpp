//===- AtomicFile.cpp - Write-then-rename output files --------------------===//
//
// This file implements AtomicFile and writeFileAtomically().
//
//===----------------------------------------------------------------------===//
#include "support/AtomicFile.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace archc {

AtomicFile::~AtomicFile() { discard(); }

bool AtomicFile::open(const std::string &t, DiagnosticEngine &diags) {
  target = t;
  std::filesystem::path p(t);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) {
    diags.error(SourceRange(), "cannot write '{}': it is a directory", t);
    return false;
  }
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  std::string tmpl = dir + "/." + p.filename().string() + ".tmp-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0) {
    diags.error(SourceRange(), "cannot write '{}': {}", t,
                std::strerror(errno));
    return false;
  }
  temp = buf.data();
  file = fdopen(fd, "wb");
  if (!file) {
    diags.error(SourceRange(), "cannot write '{}': {}", t,
                std::strerror(errno));
    ::close(fd);
    discard();
    return false;
  }
  return true;
}

bool AtomicFile::write(const void *data, size_t size, DiagnosticEngine &diags) {
  if (!file)
    return false;
  if (size && std::fwrite(data, 1, size, file) != size) {
    diags.error(SourceRange(), "cannot write '{}': {}", target,
                std::strerror(errno));
    discard();
    return false;
  }
  written += size;
  return true;
}

bool AtomicFile::resize(uint64_t size, DiagnosticEngine &diags) {
  if (!file || std::fflush(file) != 0 ||
      ftruncate(fileno(file), static_cast<off_t>(size)) != 0) {
    diags.error(SourceRange(), "cannot write '{}': {}", target,
                std::strerror(errno));
    discard();
    return false;
  }
  written = size;
  return true;
}

bool AtomicFile::commit(DiagnosticEngine &diags) {
  if (!file)
    return false;
  bool ok = std::fflush(file) == 0 && fsync(fileno(file)) == 0;
  int err = errno;
  ok &= std::fclose(file) == 0;
  file = nullptr;
  if (!ok) {
    diags.error(SourceRange(), "cannot write '{}': {}", target,
                std::strerror(err ? err : errno));
    discard();
    return false;
  }
  // Keep the usual permissions of a newly created file (mkstemp uses 0600).
  mode_t mask = umask(0);
  umask(mask);
  chmod(temp.c_str(), 0666 & ~mask);
  if (std::rename(temp.c_str(), target.c_str()) != 0) {
    diags.error(SourceRange(), "cannot write '{}': {}", target,
                std::strerror(errno));
    discard();
    return false;
  }
  temp.clear();
  return true;
}

void AtomicFile::discard() {
  if (file) {
    std::fclose(file);
    file = nullptr;
  }
  if (!temp.empty()) {
    std::remove(temp.c_str());
    temp.clear();
  }
}

bool writeFileAtomically(const std::string &path, std::string_view data,
                         DiagnosticEngine &diags) {
  AtomicFile f;
  if (!f.open(path, diags))
    return false;
  if (!f.write(data.data(), data.size(), diags))
    return false;
  return f.commit(diags);
}

} // namespace archc
