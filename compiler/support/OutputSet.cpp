//===- OutputSet.cpp - The files of one emission, published together ------===//
//
// This file implements OutputSet, writeOutputFile() and the signal handlers
// that remove staging directories when a run is interrupted.
//
//===----------------------------------------------------------------------===//
#include "support/OutputSet.h"

#include "support/FileRead.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <iostream>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace archc {

namespace {
constexpr const char *kTempPrefix = ".archc-tmp-";
constexpr const char *kNewPrefix = ".archc-new-";

//===----------------------------------------------------------------------===//
// Staging directories removed from a signal handler.
//===----------------------------------------------------------------------===//

constexpr int kMaxStaging = 8;
char gStaging[kMaxStaging][PATH_MAX];
volatile sig_atomic_t gStagingUsed[kMaxStaging];

bool isDotOrDotDot(const char *n) {
  return n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0));
}

/// Removes `name` under `parentFd` recursively with async-signal-safe calls
/// only (openat, getdents64, unlinkat, close).
void removeTreeAt(int parentFd, const char *name, int depth) {
  if (unlinkat(parentFd, name, 0) == 0 || errno == ENOENT)
    return;
  if (depth > 16)
    return;
  int fd = openat(parentFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (fd < 0)
    return;
  struct Dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[1];
  };
  alignas(8) char buf[4096];
  for (int pass = 0; pass < 64; ++pass) {
    lseek(fd, 0, SEEK_SET);
    bool any = false;
    for (;;) {
      long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0)
        break;
      for (long off = 0; off < n;) {
        auto *d = reinterpret_cast<Dirent *>(buf + off);
        off += d->reclen;
        if (isDotOrDotDot(d->name))
          continue;
        any = true;
        removeTreeAt(fd, d->name, depth + 1);
      }
    }
    if (!any)
      break;
  }
  close(fd);
  unlinkat(parentFd, name, AT_REMOVEDIR);
}

extern "C" void onFatalSignal(int sig) {
  int saved = errno;
  for (int i = 0; i < kMaxStaging; ++i)
    if (gStagingUsed[i])
      removeTreeAt(AT_FDCWD, gStaging[i], 0);
  errno = saved;
  // Die of the same signal, so the parent sees the usual status.
  signal(sig, SIG_DFL);
  raise(sig);
}

void installSignalHandlers() {
  static bool installed = false;
  if (installed)
    return;
  installed = true;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN)
      continue; // keep nohup's and the shell's choice
    struct sigaction sa {};
    sa.sa_handler = onFatalSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

/// Registers a staging directory for removal on a signal; returns its slot.
int registerStaging(const std::string &path) {
  installSignalHandlers();
  if (path.size() >= PATH_MAX)
    return -1;
  for (int i = 0; i < kMaxStaging; ++i) {
    if (gStagingUsed[i])
      continue;
    std::memcpy(gStaging[i], path.c_str(), path.size() + 1);
    gStagingUsed[i] = 1;
    return i;
  }
  return -1;
}

void unregisterStaging(const std::string &path) {
  for (int i = 0; i < kMaxStaging; ++i)
    if (gStagingUsed[i] && path == gStaging[i])
      gStagingUsed[i] = 0;
}

//===----------------------------------------------------------------------===//
// Helpers.
//===----------------------------------------------------------------------===//

std::string describeNonRegular(mode_t mode) {
  if (S_ISDIR(mode))
    return "it is a directory";
  if (S_ISCHR(mode))
    return "it is a character device";
  if (S_ISBLK(mode))
    return "it is a block device";
  if (S_ISFIFO(mode))
    return "it is a FIFO";
  if (S_ISSOCK(mode))
    return "it is a socket";
  return "it is not a regular file";
}

std::string joinRel(const std::string &dir, const std::string &rel) {
  if (rel.empty())
    return dir;
  return (fs::path(dir) / rel).lexically_normal().string();
}

/// fsync of a directory, for durable renames (best effort).
void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    ::close(fd);
  }
}

/// Moves `from` onto `to`. A rename when both are on one filesystem, else a
/// copy to a temporary file beside `to`, then a rename.
bool moveInto(const std::string &from, const std::string &to,
              std::string &err) {
  if (std::rename(from.c_str(), to.c_str()) == 0)
    return true;
  if (errno != EXDEV) {
    err = std::strerror(errno);
    return false;
  }
  fs::path target(to);
  std::string tmp =
      (target.parent_path() / (kTempPrefix + std::to_string(getpid()) + "-" +
                               target.filename().string()))
          .string();
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    err = ec.message();
    fs::remove(tmp, ec);
    return false;
  }
  int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    ::close(fd);
  }
  if (std::rename(tmp.c_str(), to.c_str()) != 0) {
    err = std::strerror(errno);
    fs::remove(tmp, ec);
    return false;
  }
  fs::remove(from, ec);
  return true;
}
/// Creates `path` and its missing parents, appending each folder it created
/// to `created` (outermost first), so that a failed emission can remove
/// them again.
void createFolders(const fs::path &path, std::vector<std::string> &created,
                   std::error_code &ec) {
  std::vector<fs::path> missing;
  for (fs::path p = path; !p.empty(); p = p.parent_path()) {
    std::error_code sec;
    if (fs::exists(fs::symlink_status(p, sec)) || p == p.parent_path())
      break;
    missing.push_back(p);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0777) == 0) {
      created.push_back(it->string());
      continue;
    }
    if (errno == EEXIST && fs::is_directory(*it, ec))
      continue;
    ec = std::error_code(errno ? errno : ENOTDIR, std::generic_category());
    return;
  }
  if (!fs::is_directory(path, ec) && !ec)
    ec = std::make_error_code(std::errc::not_a_directory);
}
} // namespace

bool writeStandardOutput(std::string_view data, DiagnosticEngine &diags) {
  std::cout.flush();
  if (!std::cout.good() || std::fflush(stdout) != 0) {
    diags.error(SourceRange(), "cannot write to standard output: {}",
                std::strerror(errno ? errno : EIO));
    return false;
  }
  const char *p = data.data();
  size_t left = data.size();
  while (left) {
    ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      diags.error(SourceRange(), "cannot write to standard output: {}",
                  std::strerror(n < 0 ? errno : EIO));
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

std::string resolveSymlinks(const std::string &path) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return p.string();
    std::error_code ec;
    fs::path target = fs::read_symlink(p, ec);
    if (ec)
      return p.string();
    p = target.is_absolute() ? target
                             : (p.parent_path() / target).lexically_normal();
  }
  return "";
}

bool checkDestination(const std::string &path, DiagnosticEngine &diags) {
  std::string dest = resolveSymlinks(path);
  if (dest.empty()) {
    diags.error(SourceRange(),
                "cannot write '{}': too many levels of symbolic links", path);
    return false;
  }
  struct stat st;
  if (lstat(dest.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    diags.error(SourceRange(),
                "cannot write '{}': {}; archc does not replace it", path,
                describeNonRegular(st.st_mode));
    return false;
  }
  return true;
}

unsigned removeStaleTempDirs(const std::string &dir) {
  unsigned removed = 0;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(kNewPrefix, 0) == 0) {
      // A run killed between creating its staging folder and naming it
      // (microseconds) leaves it empty: removed once it is a minute old.
      struct stat st;
      if (lstat(it->path().c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
          time(nullptr) - st.st_mtime > 60 && ::rmdir(it->path().c_str()) == 0)
        ++removed;
      continue;
    }
    if (name.rfind(kTempPrefix, 0) != 0)
      continue;
    int fd = ::open(it->path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0)
      continue;
    // A live run holds its staging folder's lock; a free lock means the
    // owner died without cleaning up (SIGKILL, power loss).
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code rec;
      fs::remove_all(it->path(), rec);
      if (!rec)
        ++removed;
    }
    ::close(fd);
  }
  return removed;
}

OutputSet::~OutputSet() { discard(); }

bool OutputSet::begin(const std::string &d, DiagnosticEngine &diags) {
  dir = d.empty() ? "." : d;
  std::error_code ec;
  createFolders(fs::path(dir), createdFolders, ec);
  if (ec || !fs::is_directory(dir)) {
    diags.error(SourceRange(), "cannot create folder '{}': {}", dir,
                ec ? ec.message() : std::string("it is not a directory"));
    return false;
  }
  removeStaleTempDirs(dir);
  // Created under a name the stale-folder sweep ignores, locked, then given
  // its final name: another run can never see it unlocked.
  std::string tmpl =
      (fs::path(dir) / (std::string(kNewPrefix) + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    diags.error(SourceRange(), "cannot write into folder '{}': {}", dir,
                std::strerror(errno));
    removeCreatedFolders();
    return false;
  }
  std::string created = buf.data();
  stagingLock = ::open(created.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (stagingLock < 0 || flock(stagingLock, LOCK_EX) != 0) {
    diags.error(SourceRange(), "cannot write into folder '{}': {}", dir,
                std::strerror(errno));
    fs::remove(created, ec);
    return false;
  }
  std::string suffix = created.substr(created.size() - 6);
  staging = (fs::path(dir) / (std::string(kTempPrefix) +
                              std::to_string(getpid()) + "-" + suffix))
                .string();
  if (std::rename(created.c_str(), staging.c_str()) != 0) {
    diags.error(SourceRange(), "cannot write into folder '{}': {}", dir,
                std::strerror(errno));
    fs::remove(created, ec);
    staging.clear();
    return false;
  }
  staging = fs::absolute(staging, ec).string();
  registerStaging(staging);
  return true;
}

std::string OutputSet::stage(const std::string &relPath) {
  files.push_back(relPath);
  fs::path p = fs::path(staging) / relPath;
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  return p.string();
}

std::string OutputSet::finalPath(const std::string &relPath) const {
  return joinRel(dir, relPath);
}

bool OutputSet::produces(const std::string &relPath) const {
  fs::path want = fs::path(relPath).lexically_normal();
  for (const std::string &f : files)
    if (fs::path(f).lexically_normal() == want)
      return true;
  return false;
}

void OutputSet::removeStale(std::vector<std::string> subdirs,
                            StaleFilter filter) {
  staleRules.emplace_back(std::move(subdirs), std::move(filter));
}

bool OutputSet::publish(DiagnosticEngine &diags) {
  if (staging.empty())
    return false;
  int lockFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lockFd < 0 || flock(lockFd, LOCK_EX) != 0) {
    diags.error(SourceRange(), "cannot lock folder '{}': {}", dir,
                std::strerror(errno));
    if (lockFd >= 0)
      ::close(lockFd);
    return false;
  }
  struct Move {
    std::string from, to, shown;
  };
  std::vector<Move> moves;
  bool ok = true;
  // 1. Every destination must be acceptable before anything moves.
  for (const std::string &rel : files) {
    std::string shown = finalPath(rel);
    std::string dest = resolveSymlinks(shown);
    if (dest.empty()) {
      diags.error(SourceRange(),
                  "cannot write '{}': too many levels of "
                  "symbolic links",
                  shown);
      ok = false;
      continue;
    }
    InputFile input;
    if (findInputFile(dest, input)) {
      diags.error(SourceRange(),
                  "cannot write '{}': it is '{}', an input of this run; "
                  "archc never replaces its inputs",
                  shown, input.path);
      ok = false;
      continue;
    }
    struct stat st;
    if (lstat(dest.c_str(), &st) == 0) {
      if (!S_ISREG(st.st_mode)) {
        diags.error(SourceRange(),
                    "cannot write '{}': {}; archc does not replace it", shown,
                    describeNonRegular(st.st_mode));
        ok = false;
        continue;
      }
    } else if (errno != ENOENT) {
      diags.error(SourceRange(), "cannot write '{}': {}", shown,
                  std::strerror(errno));
      ok = false;
      continue;
    } else {
      std::error_code ec;
      fs::path parent = fs::path(dest).parent_path();
      if (!parent.empty())
        createFolders(parent, createdFolders, ec);
      if (ec) {
        diags.error(SourceRange(), "cannot write '{}': {}", shown,
                    ec.message());
        ok = false;
        continue;
      }
    }
    moves.push_back({(fs::path(staging) / rel).string(), dest, shown});
  }
  // 2. Publish in order.
  bool renamedAny = false;
  for (size_t i = 0; ok && i < moves.size(); ++i) {
    std::string err;
    if (moveInto(moves[i].from, moves[i].to, err)) {
      renamedAny = true;
    } else {
      diags.error(SourceRange(), "cannot write '{}': {}", moves[i].shown, err);
      ok = false;
    }
  }
  // 3. Files of an earlier emission that this one does not produce.
  for (const auto &[subdirs, filter] : staleRules) {
    if (!ok)
      break;
    for (const std::string &sub : subdirs) {
      std::error_code ec;
      fs::path base = fs::path(dir) / sub;
      fs::directory_iterator it(base, ec), end;
      std::vector<std::string> doomed;
      for (; !ec && it != end; it.increment(ec)) {
        std::string rel =
            (fs::path(sub) / it->path().filename()).lexically_normal().string();
        std::error_code sec;
        auto status = it->symlink_status(sec);
        if (sec || (!fs::is_regular_file(status) && !fs::is_symlink(status)))
          continue;
        if (!produces(rel) && filter(rel))
          doomed.push_back(it->path().string());
      }
      for (const std::string &path : doomed) {
        if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
          diags.error(SourceRange(),
                      "cannot remove '{}' (a file of an earlier emission): {}",
                      path, std::strerror(errno));
          ok = false;
        }
      }
    }
  }
  std::set<std::string> dirs;
  for (const Move &m : moves)
    dirs.insert(fs::path(m.to).parent_path().string());
  for (const std::string &d : dirs)
    syncDirectory(d.empty() ? "." : d);
  flock(lockFd, LOCK_UN);
  ::close(lockFd);
  // Nothing was renamed: the folders this set created go as well.
  published = ok || renamedAny;
  discard();
  return ok;
}

void OutputSet::discard() {
  if (!staging.empty()) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    unregisterStaging(staging);
    staging.clear();
  }
  if (stagingLock >= 0) {
    ::close(stagingLock);
    stagingLock = -1;
  }
  if (!published)
    removeCreatedFolders();
  createdFolders.clear();
}

void OutputSet::removeCreatedFolders() {
  // Innermost first; rmdir removes a folder only while it is empty.
  for (auto it = createdFolders.rbegin(); it != createdFolders.rend(); ++it)
    ::rmdir(it->c_str());
  createdFolders.clear();
}

bool writeOutputFile(const std::string &path, std::string_view data,
                     DiagnosticEngine &diags) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
      diags.error(SourceRange(), "cannot write '{}': {}", path,
                  describeNonRegular(st.st_mode));
      return false;
    }
    // A device or a pipe: written through, never replaced.
    int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      diags.error(SourceRange(), "cannot write '{}': {}", path,
                  std::strerror(errno));
      return false;
    }
    const char *p = data.data();
    size_t left = data.size();
    while (left) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        diags.error(SourceRange(), "cannot write '{}': {}", path,
                    std::strerror(n < 0 ? errno : EIO));
        ::close(fd);
        return false;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    if (::close(fd) != 0) {
      diags.error(SourceRange(), "cannot write '{}': {}", path,
                  std::strerror(errno));
      return false;
    }
    return true;
  }
  fs::path p(path);
  if (p.filename().empty()) {
    diags.error(SourceRange(), "cannot write '{}': it names a folder", path);
    return false;
  }
  OutputSet set;
  if (!set.begin(p.parent_path().string(), diags))
    return false;
  std::string staged = set.stage(p.filename().string());
  FILE *f = std::fopen(staged.c_str(), "wb");
  bool ok = f && std::fwrite(data.data(), 1, data.size(), f) == data.size();
  int err = errno;
  ok = f && std::fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
  err = ok ? 0 : (errno ? errno : err);
  if (f && std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    diags.error(SourceRange(), "cannot write '{}': {}", path,
                std::strerror(err ? err : EIO));
    return false;
  }
  return set.publish(diags);
}

} // namespace archc
