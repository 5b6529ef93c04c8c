//===- Safetensors.cpp - Memory-mapped safetensors checkpoints ------------===//
//
// This file implements the safetensors reader. Layout: an 8-byte
// little-endian header length N, N bytes of JSON (name -> {dtype, shape,
// data_offsets [begin, end)} plus optional __metadata__), then the data;
// offsets are relative to the first byte after the header.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/Safetensors.h"
#include "support/BoundedJson.h"
#include "support/FileRead.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace fs = std::filesystem;

namespace archc {

size_t stDTypeSize(StDType t) {
  switch (t) {
  case StDType::F64:
  case StDType::I64:
    return 8;
  case StDType::F32:
  case StDType::I32:
    return 4;
  case StDType::F16:
  case StDType::BF16:
  case StDType::I16:
    return 2;
  case StDType::I8:
  case StDType::U8:
  case StDType::Bool:
  case StDType::F8E4M3:
  case StDType::F8E8M0:
    return 1;
  }
  return 1;
}

const char *stDTypeName(StDType t) {
  switch (t) {
  case StDType::F64:
    return "F64";
  case StDType::F32:
    return "F32";
  case StDType::F16:
    return "F16";
  case StDType::BF16:
    return "BF16";
  case StDType::I64:
    return "I64";
  case StDType::I32:
    return "I32";
  case StDType::I16:
    return "I16";
  case StDType::I8:
    return "I8";
  case StDType::U8:
    return "U8";
  case StDType::Bool:
    return "BOOL";
  case StDType::F8E4M3:
    return "F8_E4M3";
  case StDType::F8E8M0:
    return "F8_E8M0";
  }
  return "?";
}

/// A name or value from a file, cut for a message.
static std::string shortened(const std::string &s) {
  return s.size() > 256 ? s.substr(0, 253) + "..." : s;
}

static bool parseStDType(const std::string &s, StDType &out) {
  static const std::map<std::string, StDType> names = {
      {"F64", StDType::F64},        {"F32", StDType::F32},
      {"F16", StDType::F16},        {"BF16", StDType::BF16},
      {"I64", StDType::I64},        {"I32", StDType::I32},
      {"I16", StDType::I16},        {"I8", StDType::I8},
      {"U8", StDType::U8},          {"BOOL", StDType::Bool},
      {"F8_E4M3", StDType::F8E4M3}, {"F8_E8M0", StDType::F8E8M0}};
  auto it = names.find(s);
  if (it == names.end())
    return false;
  out = it->second;
  return true;
}

namespace {
/// Descriptors MappedFile keeps open (for copy_file_range): at most 256
/// and a quarter of the process's limit, so a checkpoint of any number of
/// shards never runs out of descriptors; a file past them is closed once
/// mapped and copied from memory.
std::atomic<unsigned> keptDescriptors{0};
unsigned descriptorBudget() {
  static const unsigned budget = [] {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
      return 256u;
    return static_cast<unsigned>(std::min<rlim_t>(256, r.rlim_cur / 4));
  }();
  return budget;
}
} // namespace

MappedFile::~MappedFile() {
  if (base && length)
    munmap(const_cast<uint8_t *>(base), length);
  if (fd >= 0) {
    ::close(fd);
    --keptDescriptors;
  }
}

bool MappedFile::open(const std::string &path, std::string &error) {
  filePath = path;
  // Non-blocking open and fstat before anything is read: a FIFO named by
  // --weights is refused instead of waiting for a writer.
  fd = openRegularFile(path, length, error);
  if (fd < 0) {
    length = 0;
    return false;
  }
  if (length == 0) {
    base = nullptr;
    ::close(fd);
    fd = -1;
    return true;
  }
  void *p = mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
  int mapError = errno;
  // The mapping keeps the file; its descriptor stays open for the kernel's
  // copies while the budget allows, else it is closed at once, so a
  // checkpoint of any number of shards fits the descriptor limit.
  if (p == MAP_FAILED || keptDescriptors >= descriptorBudget()) {
    ::close(fd);
    fd = -1;
  } else {
    ++keptDescriptors;
  }
  if (p == MAP_FAILED) {
    error = std::strerror(mapError);
    length = 0;
    return false;
  }
  base = static_cast<const uint8_t *>(p);
  return true;
}

void MappedFile::release(const uint8_t *begin, uint64_t bytes) const {
  // Rounded out to whole pages: the mapping is private and never written,
  // so a page dropped while a neighbouring range still needs it is mapped
  // again from the page cache on its next read. Rounded in, the pages that
  // straddle two released ranges would never be dropped and would add up
  // over a large checkpoint.
  if (!base || bytes == 0)
    return;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  uintptr_t hi = lo + length;
  uintptr_t b = reinterpret_cast<uintptr_t>(begin) / page * page;
  uintptr_t e =
      (reinterpret_cast<uintptr_t>(begin) + bytes + page - 1) / page * page;
  b = std::max(b, lo);
  e = std::min(e, (hi + page - 1) / page * page);
  if (e > b)
    madvise(reinterpret_cast<void *>(b), e - b, MADV_DONTNEED);
}

bool parseSafetensorsHeader(const uint8_t *data, uint64_t size,
                            const std::string &path, std::vector<StTensor> &out,
                            std::string &error) {
  if (size < 8) {
    error = "file is too short to be safetensors (" + std::to_string(size) +
            " bytes; the 8-byte header length is missing)";
    return false;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | data[i];
  if (n > size - 8) {
    error = "header length " + std::to_string(n) + " exceeds the file (" +
            std::to_string(size) +
            " bytes): the file is truncated or not "
            "safetensors";
    return false;
  }
  if (n > (100u << 20)) {
    error = "header length " + std::to_string(n) + " is implausibly large";
    return false;
  }
  // Bounded like every JSON a file controls (support/BoundedJson.h); a
  // tensor named twice is an error, not the last copy.
  std::string_view text(reinterpret_cast<const char *>(data + 8), n);
  if (std::optional<size_t> at = firstJsonTooDeep(text, kMaxJsonDepth)) {
    error = "header nested more than " + std::to_string(kMaxJsonDepth) +
            " levels deep (the limit) at byte " + std::to_string(*at + 8);
    return false;
  }
  nlohmann::json header;
  std::unordered_set<std::string> names;
  std::string duplicate;
  try {
    auto callback = [&](int depth, nlohmann::json::parse_event_t ev,
                        nlohmann::json &parsed) {
      if (ev == nlohmann::json::parse_event_t::key && depth == 1 &&
          !names.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    header = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const std::exception &e) {
    error = "header is not valid JSON: " + cleanJsonParseMessage(e.what());
    return false;
  }
  if (!duplicate.empty()) {
    error = "tensor '" + shortened(duplicate) + "' appears twice in the header";
    return false;
  }
  if (!header.is_object()) {
    error = "header is not a JSON object";
    return false;
  }
  const uint8_t *base = data + 8 + n;
  uint64_t dataSize = size - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    const auto &v = it.value();
    StTensor t;
    t.name = it.key();
    auto fail = [&](const std::string &why) {
      error = "tensor '" + shortened(t.name) + "': " + why;
      return false;
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      return fail("needs dtype, shape and data_offsets");
    if (!v["dtype"].is_string())
      return fail(std::string("dtype is not a string but ") +
                  v["dtype"].type_name());
    if (!parseStDType(v["dtype"].get<std::string>(), t.dtype))
      return fail("unsupported dtype \"" +
                  shortened(v["dtype"].get<std::string>()) + "\"");
    if (!v["shape"].is_array())
      return fail("shape is not a list");
    uint64_t numel = 1;
    for (const auto &d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return fail("shape has a non-integer or negative dim");
      int64_t dim = d.get<int64_t>();
      if (dim > 0 && numel > UINT64_MAX / static_cast<uint64_t>(dim))
        return fail("shape overflows");
      numel *= static_cast<uint64_t>(dim);
      t.shape.push_back(dim);
    }
    const auto &off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return fail("data_offsets must be two non-negative integers");
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (e < b)
      return fail("data_offsets end before they begin");
    if (e > dataSize)
      return fail("data ends at byte " + std::to_string(e) +
                  " of the data section but the file only has " +
                  std::to_string(dataSize) +
                  " data bytes: the file is "
                  "truncated");
    // The byte count is checked: 2^61 F64 elements would wrap to 0 bytes.
    uint64_t need = 0;
    if (__builtin_mul_overflow(numel, uint64_t(stDTypeSize(t.dtype)), &need))
      return fail("shape and dtype need more than 2^64 bytes");
    if (e - b != need)
      return fail("holds " + std::to_string(e - b) +
                  " bytes but shape and "
                  "dtype need " +
                  std::to_string(need));
    t.data = base + b;
    t.size = e - b;
    ranges.emplace_back(b, e);
    out.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) {
      error = "tensor byte ranges overlap";
      return false;
    }
  (void)path;
  return true;
}

bool Checkpoint::openFile(const std::string &path, DiagnosticEngine &diags) {
  auto f = std::make_unique<MappedFile>();
  std::string err;
  if (!f->open(path, err)) {
    diags.error(SourceRange(), "cannot read weights '{}': {}", path, err);
    return false;
  }
  std::vector<StTensor> tensors;
  if (!parseSafetensorsHeader(f->data(), f->size(), path, tensors, err)) {
    diags.error(SourceRange(), "invalid safetensors file '{}': {}", path, err);
    return false;
  }
  size_t index = mapped.size();
  mapped.push_back(std::move(f));
  for (StTensor &t : tensors) {
    t.file = index;
    std::string name = t.name;
    auto [it, inserted] = byName.emplace(name, std::move(t));
    if (!inserted) {
      diags.error(SourceRange(),
                  "tensor '{}' appears in two checkpoint files "
                  "('{}' and '{}')",
                  name, mapped[it->second.file]->path(), path);
      return false;
    }
  }
  return true;
}

namespace {
/// Why a shard name of an index may not be read: empty, absolute, or with
/// a `..` component; "" when it is a plain relative path.
std::string badShardName(const std::string &shard) {
  if (shard.empty())
    return "an empty file name";
  if (shard[0] == '/')
    return "an absolute path";
  if (shard.find('\0') != std::string::npos)
    return "a name with a NUL byte";
  for (const auto &part : fs::path(shard))
    if (part == "..")
      return "a path out of the folder ('..')";
  return "";
}
} // namespace

bool Checkpoint::openIndex(const std::string &path, DiagnosticEngine &diags) {
  std::string text, readError;
  if (!readRegularFile(path, kMaxIndexBytes, text, readError)) {
    diags.error(SourceRange(), "cannot read checkpoint index '{}': {}", path,
                readError);
    return false;
  }
  // One streaming pass (linear in the index: 250,000 entries take well
  // under a second): the weight_map entries are collected as they are
  // parsed, nothing else of the document is kept, and a tensor listed
  // twice is an error naming both files.
  if (std::optional<size_t> at = firstJsonTooDeep(text, kMaxJsonDepth)) {
    diags.error(SourceRange(),
                "invalid checkpoint index '{}': nested more than {} levels "
                "deep (the limit) at byte {}",
                path, kMaxJsonDepth, *at);
    return false;
  }
  std::vector<std::pair<std::string, std::string>> entries;
  std::unordered_map<std::string, size_t> entryOf;
  std::string problem;
  bool sawWeightMap = false;
  std::string key;
  bool inWeightMap = false;
  try {
    using E = nlohmann::json::parse_event_t;
    auto callback = [&](int depth, E ev, nlohmann::json &parsed) -> bool {
      if (ev == E::key && depth == 1) {
        key = parsed.get<std::string>();
        return true;
      }
      if (depth == 1 && key == "weight_map" &&
          (ev == E::object_start || ev == E::array_start))
        inWeightMap = ev == E::object_start;
      if (depth == 1 && key == "weight_map" && ev == E::object_start) {
        sawWeightMap = true;
        return true;
      }
      if (inWeightMap && depth == 2 && ev == E::key) {
        key = "weight_map/" + parsed.get<std::string>();
        return true;
      }
      if (inWeightMap && depth == 2 && ev == E::value) {
        std::string tensor = key.substr(11);
        if (!parsed.is_string()) {
          if (problem.empty())
            problem = "entry '" + shortened(tensor) +
                      "' is not a file name but " + parsed.type_name();
          return false;
        }
        std::string file = parsed.get<std::string>();
        auto [it, fresh] = entryOf.emplace(tensor, entries.size());
        if (!fresh && problem.empty())
          problem = "tensor '" + shortened(tensor) + "' is listed twice (in '" +
                    shortened(entries[it->second].second) + "' and '" +
                    shortened(file) + "')";
        if (fresh)
          entries.emplace_back(tensor, std::move(file));
        return false; // not kept in the document
      }
      if (inWeightMap && depth == 2 &&
          (ev == E::object_start || ev == E::array_start)) {
        if (problem.empty())
          problem =
              "entry '" + shortened(key.substr(11)) + "' is not a file name";
        return true;
      }
      if (inWeightMap && depth == 1 && ev == E::object_end) {
        inWeightMap = false;
        key.clear();
      }
      return true;
    };
    nlohmann::json::parse(text, callback);
  } catch (const std::exception &e) {
    diags.error(SourceRange(), "invalid checkpoint index '{}': {}", path,
                cleanJsonParseMessage(e.what()));
    return false;
  }
  if (problem.empty() && !sawWeightMap)
    problem = "no weight_map";
  if (!problem.empty()) {
    diags.error(SourceRange(), "invalid checkpoint index '{}': {}", path,
                problem);
    return false;
  }
  // Each shard once, in the order the index names them, opened as soon as
  // it is checked (the first absent one ends the work at once); a name that
  // leaves the folder (`..`, an absolute path, a symlink out of it) is
  // refused before the file is opened.
  fs::path dir = fs::path(path).parent_path();
  FolderBounds bounds(dir.empty() ? std::string(".") : dir.string());
  std::unordered_map<std::string, size_t> shardIndex;
  size_t firstFile = mapped.size();
  for (const auto &[tensor, shard] : entries) {
    if (shardIndex.count(shard))
      continue;
    std::string why = badShardName(shard);
    if (why.empty())
      bounds.contains((dir / shard).string(), why);
    if (!why.empty()) {
      diags.error(SourceRange(),
                  "checkpoint index '{}' lists '{}' in '{}', {}; archc reads "
                  "only the shards inside the checkpoint's folder",
                  path, shortened(tensor), shortened(shard), why);
      return false;
    }
    shardIndex.emplace(shard, shardIndex.size());
    if (!openFile((dir / shard).string(), diags))
      return false;
  }
  // The index must agree with the shards' headers.
  for (const auto &[tensor, shard] : entries) {
    const StTensor *t = find(tensor);
    if (!t || t->file != firstFile + shardIndex[shard]) {
      diags.error(SourceRange(),
                  "checkpoint index '{}' lists '{}' in '{}' "
                  "but that shard does not hold it",
                  path, shortened(tensor), shortened(shard));
      return false;
    }
  }
  return true;
}

bool Checkpoint::open(const std::string &path, DiagnosticEngine &diags) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // Hugging Face's order (transformers' modeling_utils: model.safetensors
    // before model.safetensors.index.json): a folder holding both binds the
    // single file, as from_pretrained does.
    fs::path index = fs::path(path) / "model.safetensors.index.json";
    fs::path single = fs::path(path) / "model.safetensors";
    if (fs::exists(single, ec)) {
      if (fs::exists(index, ec))
        diags.report(Severity::Note, SourceRange(),
                     fmt::format("'{}' holds both model.safetensors and "
                                 "model.safetensors.index.json: binding "
                                 "model.safetensors, as Hugging Face loads it",
                                 path));
      return openFile(single.string(), diags);
    }
    if (fs::exists(index, ec))
      return openIndex(index.string(), diags);
    // Several files without an index: every *.safetensors of the folder
    // (a fixture's expected.safetensors is never a checkpoint file); a
    // tensor in two of them is an error.
    std::vector<fs::path> files;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end;
         it.increment(ec))
      if (it->path().extension() == ".safetensors" &&
          it->path().filename() != "expected.safetensors")
        files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const fs::path &f : files)
      if (!openFile(f.string(), diags))
        return false;
    if (!files.empty())
      return true;
    diags.error(SourceRange(),
                "no model.safetensors, model.safetensors.index.json or "
                "*.safetensors in '{}'",
                path);
    return false;
  }
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".json")
    return openIndex(path, diags);
  return openFile(path, diags);
}

const StTensor *Checkpoint::find(const std::string &name) const {
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : &it->second;
}

uint64_t Checkpoint::totalBytes() const {
  uint64_t n = 0;
  for (auto &[k, t] : byName)
    n += t.size;
  return n;
}

} // namespace archc
