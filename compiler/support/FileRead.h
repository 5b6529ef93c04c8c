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
#include <vector>

namespace archc {

/// Size limits of the inputs read whole (docs/limits.md).
constexpr uint64_t kMaxSourceBytes = uint64_t(2) << 20; ///< an .arch file
constexpr uint64_t kMaxConfigBytes = uint64_t(4) << 20; ///< a config.json
constexpr uint64_t kMaxIndexBytes = uint64_t(64) << 20; ///< a weight index

/// Opens `path` read-only for a regular file: O_NONBLOCK for the open, then
/// fstat; a directory, FIFO, device or socket is refused ("it is a FIFO,
/// not a regular file"). Returns the descriptor (blocking mode restored,
/// close-on-exec) and its size, or -1 with `error` set. The file is recorded
/// as an input of this run (noteInputFile) unless `input` is false (a
/// previous output read back).
int openRegularFile(const std::string &path, uint64_t &size, std::string &error,
                    bool input = true);

/// Reads the whole regular file `path` into `out` when it has at most
/// `maxBytes` bytes; otherwise false with `error` set (the OS reason, the
/// kind of a non-regular file, or the size over the limit).
bool readRegularFile(const std::string &path, uint64_t maxBytes,
                     std::string &out, std::string &error, bool input = true);

/// A file this run has read, by device and inode (so that a symlink or a
/// hard link to it is the same file), with the path it was read through.
struct InputFile {
  uint64_t device = 0, inode = 0;
  std::string path;
};

/// Records a file read by this run. openRegularFile records every file it
/// opens; a module with its own copy of this library (the ONNX back end)
/// receives the driver's list and records it too.
void noteInputFile(const InputFile &file);

/// Every file this run has read so far.
std::vector<InputFile> inputFilesRead();

/// The input file that `path` names (following symlinks), or false. An
/// output must never replace one (docs/limits.md, "Outputs never alias
/// inputs").
bool findInputFile(const std::string &path, InputFile &found);

/// The real path of `path`: symlinks of its existing part resolved, the
/// rest appended lexically (std::filesystem::weakly_canonical); `path`
/// itself when that fails.
std::string realPath(const std::string &path);

/// Whether the real path `inner` is `outer` or lies inside it.
bool pathWithin(const std::string &inner, const std::string &outer);

/// Where the files named by an input folder may lead: the folder's real
/// path and, for a folder inside a Hugging Face cache snapshot
/// (`.../snapshots/<revision>/`, whose files are symlinks into
/// `../../blobs/`), that cache's `blobs/` folder. Resolved once, for
/// checking many files.
class FolderBounds {
public:
  explicit FolderBounds(const std::string &folder);
  /// Whether `path` stays in the folder (see above); otherwise false with
  /// `why` set (where it leads).
  bool contains(const std::string &path, std::string &why) const;

private:
  std::string dir, blobs;
};

/// FolderBounds(folder).contains(path, why).
bool staysInFolder(const std::string &path, const std::string &folder,
                   std::string &why);

} // namespace archc

#endif // ARCHC_SUPPORT_FILEREAD_H
