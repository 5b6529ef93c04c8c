//===- Safetensors.cpp - Memory-mapped safetensors checkpoints ------------===//
//
// This file implements the safetensors reader. Layout: an 8-byte
// little-endian header length N, N bytes of JSON (name -> {dtype, shape,
// data_offsets [begin, end)} plus optional __metadata__), then the data;
// offsets are relative to the first byte after the header.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/Safetensors.h"
#include "support/FileRead.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

MappedFile::~MappedFile() {
  if (base && length)
    munmap(const_cast<uint8_t *>(base), length);
  if (fd >= 0)
    ::close(fd);
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
    return true;
  }
  void *p = mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    error = std::strerror(errno);
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
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(data + 8, data + 8 + n);
  } catch (const std::exception &e) {
    error = std::string("header is not valid JSON: ") + e.what();
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
      error = "tensor '" + t.name + "': " + why;
      return false;
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      return fail("needs dtype, shape and data_offsets");
    if (!v["dtype"].is_string() ||
        !parseStDType(v["dtype"].get<std::string>(), t.dtype))
      return fail("unsupported dtype " + v["dtype"].dump());
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

bool Checkpoint::openIndex(const std::string &path, DiagnosticEngine &diags) {
  std::string text, readError;
  if (!readRegularFile(path, kMaxIndexBytes, text, readError)) {
    diags.error(SourceRange(), "cannot read checkpoint index '{}': {}", path,
                readError);
    return false;
  }
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
  } catch (const std::exception &e) {
    diags.error(SourceRange(), "invalid checkpoint index '{}': {}", path,
                e.what());
    return false;
  }
  if (!index.is_object() || !index.contains("weight_map") ||
      !index["weight_map"].is_object()) {
    diags.error(SourceRange(), "invalid checkpoint index '{}': no weight_map",
                path);
    return false;
  }
  std::vector<std::string> shards;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end();
       ++it) {
    if (!it.value().is_string()) {
      diags.error(SourceRange(),
                  "invalid checkpoint index '{}': entry '{}' "
                  "is not a file name",
                  path, it.key());
      return false;
    }
    std::string shard = it.value().get<std::string>();
    if (std::find(shards.begin(), shards.end(), shard) == shards.end())
      shards.push_back(shard);
  }
  fs::path dir = fs::path(path).parent_path();
  for (const std::string &s : shards)
    if (!openFile((dir / s).string(), diags))
      return false;
  // The index must agree with the shards' headers.
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end();
       ++it) {
    const StTensor *t = find(it.key());
    std::string shard = it.value().get<std::string>();
    if (!t || fs::path(mapped[t->file]->path()).filename() != shard) {
      diags.error(SourceRange(),
                  "checkpoint index '{}' lists '{}' in '{}' "
                  "but that shard does not hold it",
                  path, it.key(), shard);
      return false;
    }
  }
  return true;
}

bool Checkpoint::open(const std::string &path, DiagnosticEngine &diags) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path index = fs::path(path) / "model.safetensors.index.json";
    if (fs::exists(index, ec))
      return openIndex(index.string(), diags);
    fs::path single = fs::path(path) / "model.safetensors";
    if (fs::exists(single, ec))
      return openFile(single.string(), diags);
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
