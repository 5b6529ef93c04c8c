//===- OutputSet.h - The files of one emission, published together -*- C++ -*-//
//
// This file declares OutputSet, the writer behind every file archc emits.
// An emission (a model with its external data and side files, a model
// folder, or a single text file) is staged in a private temporary directory
// inside the output directory, then published under a lock on that
// directory:
//
//  - every destination is checked first: a regular file or nothing is
//    replaced atomically (rename), a symlink is followed and its target
//    replaced (the link stays), a directory, device, FIFO or socket is
//    refused, and so is a file this run read (an input, however it is
//    reached: FileRead.h); nothing is renamed unless every destination is
//    acceptable;
//  - files are renamed in the order they were staged (external data before
//    the model that refers to it);
//  - files of an earlier emission that this one does not produce (as the
//    caller's stale filter recognises them) are removed;
//  - concurrent writers to one output directory are serialised by the lock,
//    so the published set is always one run's.
//
// The temporary directory (`.archc-tmp-<pid>-XXXXXX`) is held with a lock
// for the life of the run. SIGINT, SIGTERM and SIGHUP remove it before the
// process dies; a later run into the same directory removes any such folder
// whose owner is gone (its lock is free), e.g. after SIGKILL.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_OUTPUTSET_H
#define ARCHC_SUPPORT_OUTPUTSET_H

#include "support/Diagnostics.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace archc {

class OutputSet {
public:
  /// Decides whether an existing file (path relative to the output
  /// directory) belongs to an earlier emission of this output and should be
  /// removed when this emission does not produce it.
  using StaleFilter = std::function<bool(const std::string &relPath)>;

  OutputSet() = default;
  OutputSet(const OutputSet &) = delete;
  OutputSet &operator=(const OutputSet &) = delete;
  /// Removes the staging directory unless published.
  ~OutputSet();

  /// Prepares publishing into `dir` (created with its parents): removes
  /// stale temporary folders of killed runs and creates this run's.
  /// Reports and returns false on error.
  bool begin(const std::string &dir, DiagnosticEngine &diags);

  /// Registers `relPath` (e.g. "onnx/model.onnx") as a file of this
  /// emission and returns the path to write it to in the staging directory
  /// (its parent folders exist). Files publish in registration order.
  std::string stage(const std::string &relPath);

  /// The path a staged file will have once published (for messages).
  std::string finalPath(const std::string &relPath) const;

  /// Files in these subdirectories of the output directory ("" is the
  /// directory itself) that `filter` accepts and this emission does not
  /// produce are removed on publish.
  void removeStale(std::vector<std::string> subdirs, StaleFilter filter);

  /// Checks every destination, then publishes the staged files and removes
  /// stale ones, under the output directory's lock. Reports and returns
  /// false on error; nothing is renamed if a destination is refused.
  bool publish(DiagnosticEngine &diags);

  /// Removes the staging directory (also done by the destructor), and,
  /// unless the set was published, the folders begin() and publish()
  /// created for it (while they are empty): a failed emission leaves
  /// nothing it created.
  void discard();

  const std::string &directory() const { return dir; }
  const std::string &stagingDirectory() const { return staging; }
  /// Whether `relPath` was registered with stage().
  bool produces(const std::string &relPath) const;
  /// The files registered with stage(), in registration order.
  const std::vector<std::string> &stagedFiles() const { return files; }

private:
  std::string dir, staging;
  int stagingLock = -1;
  std::vector<std::string> files;
  std::vector<std::pair<std::vector<std::string>, StaleFilter>> staleRules;
  /// Folders created for this set, outermost first.
  std::vector<std::string> createdFolders;
  bool published = false;
  void removeCreatedFolders();
};

/// Checks that `path` may be published to: nothing, a regular file, or a
/// symlink to either. Reports (naming `path` and why) and returns false
/// otherwise, before anything is staged.
bool checkDestination(const std::string &path, DiagnosticEngine &diags);

/// Removes the `.archc-tmp-*` folders in `dir` whose owning run has ended
/// (their lock is free). Returns how many were removed.
unsigned removeStaleTempDirs(const std::string &dir);

/// Writes one text file: a regular file (or a symlink to one, or nothing)
/// is replaced atomically through an OutputSet; a character device, FIFO or
/// socket is written through (`-o /dev/null`, a pipe); a directory is an
/// error. Missing parent directories are created. Errors name `path` and
/// the OS reason.
bool writeOutputFile(const std::string &path, std::string_view data,
                     DiagnosticEngine &diags);

/// Writes `data` to standard output (after flushing what std::cout and
/// stdout hold), checking every write: a full device or a closed pipe is
/// reported ("cannot write to standard output: No space left on device")
/// and returns false.
bool writeStandardOutput(std::string_view data, DiagnosticEngine &diags);

/// Follows `path` if it is a symlink (a chain, relative targets resolved
/// against the link's folder, a dangling final target allowed). Returns
/// `path` itself when it is not a link; empty after a loop.
std::string resolveSymlinks(const std::string &path);

} // namespace archc

#endif // ARCHC_SUPPORT_OUTPUTSET_H
