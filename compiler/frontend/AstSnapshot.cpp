//===- AstSnapshot.cpp - Pre-parsed ASTs of the bundled files -------------===//
//
// This file implements reading and writing the snapshot layout described in
// AstSnapshot.h. Reading never trusts a size: every offset and length is
// checked against the bytes that are there before it is used.
//
//===----------------------------------------------------------------------===//
#include "frontend/AstSnapshot.h"

#include "frontend/AstCodec.h"
#include "support/ContentHash.h"

#include <cstdio>

#include <sys/stat.h>

namespace archc {

namespace {

constexpr std::string_view kMagic = "ARCHCAST";
constexpr size_t kHeaderSize = 8 + 4 * 4 + 8 + 8;
/// A snapshot larger than this is not read (the bundled one is ~100 KiB).
constexpr long long kMaxSnapshotBytes = 256ll << 20;

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void putVarint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

/// Bounds-checked reads from a byte range; the first failed read makes
/// every later one fail.
class ByteReader {
public:
  explicit ByteReader(std::string_view bytes) : rest(bytes) {}
  bool ok = true;

  uint64_t fixed(unsigned width) {
    if (!ok || rest.size() < width)
      return fail();
    uint64_t v = 0;
    for (unsigned i = 0; i < width; ++i)
      v |= uint64_t(static_cast<unsigned char>(rest[i])) << (8 * i);
    rest.remove_prefix(width);
    return v;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && ok; shift += 7) {
      if (rest.empty())
        return fail();
      auto b = static_cast<unsigned char>(rest.front());
      rest.remove_prefix(1);
      if (shift == 63 && b > 1)
        return fail();
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    return fail();
  }
  std::string_view bytes(uint64_t n) {
    if (!ok || n > rest.size()) {
      fail();
      return {};
    }
    std::string_view v = rest.substr(0, n);
    rest.remove_prefix(n);
    return v;
  }
  size_t left() const { return rest.size(); }

private:
  std::string_view rest;
  uint64_t fail() {
    ok = false;
    rest = {};
    return 0;
  }
};

} // namespace

std::unique_ptr<AstSnapshot> AstSnapshot::fromBytes(std::string data,
                                                    std::string &error) {
  auto s = std::unique_ptr<AstSnapshot>(new AstSnapshot());
  s->bytes = std::move(data);
  std::string_view all = s->bytes;
  if (all.size() < kHeaderSize || all.substr(0, kMagic.size()) != kMagic) {
    error = "not an AST snapshot";
    return nullptr;
  }
  ByteReader header(all.substr(kMagic.size(), kHeaderSize - kMagic.size()));
  uint64_t version = header.fixed(4);
  uint64_t codec = header.fixed(4);
  uint64_t layout = header.fixed(4);
  uint64_t numEntries = header.fixed(4);
  uint64_t indexSize = header.fixed(8);
  uint64_t indexHash = header.fixed(8);
  if (version != kAstSnapshotVersion || codec != ast::kCodecVersion ||
      layout != ast::astLayoutFingerprint()) {
    error = "written by another version of archc";
    return nullptr;
  }
  std::string_view body = all.substr(kHeaderSize);
  if (indexSize > body.size()) {
    error = "truncated";
    return nullptr;
  }
  std::string_view index = body.substr(0, indexSize);
  std::string_view asts = body.substr(indexSize);
  if (contentHash(index) != indexHash) {
    error = "index checksum mismatch";
    return nullptr;
  }
  ByteReader r(index);
  // An entry takes at least 20 bytes of index.
  if (numEntries > index.size() / 20) {
    error = "malformed index";
    return nullptr;
  }
  s->entries.reserve(numEntries);
  for (uint64_t i = 0; i < numEntries && r.ok; ++i) {
    Entry e;
    e.path = r.bytes(r.varint());
    e.textHash = r.fixed(8);
    e.textSize = r.varint();
    uint64_t offset = r.varint();
    uint64_t size = r.varint();
    e.astHash = r.fixed(8);
    if (!r.ok || offset > asts.size() || size > asts.size() - offset) {
      r.ok = false;
      break;
    }
    e.ast = asts.substr(offset, size);
    s->entries.push_back(e);
  }
  if (!r.ok || r.left() != 0) {
    error = "malformed index";
    return nullptr;
  }
  return s;
}

std::unique_ptr<AstSnapshot> AstSnapshot::open(const std::string &path,
                                               std::string &error) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = "cannot open";
    return nullptr;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > kMaxSnapshotBytes) {
    std::fclose(f);
    error = "not a regular file of at most 256 MiB";
    return nullptr;
  }
  // One read of the whole file, then whatever it grew by meanwhile.
  std::string data(static_cast<size_t>(st.st_size), '\0');
  data.resize(std::fread(data.data(), 1, data.size(), f));
  char buf[1 << 14];
  size_t n;
  while (data.size() <= kMaxSnapshotBytes &&
         (n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    data.append(buf, n);
  bool readError = std::ferror(f);
  std::fclose(f);
  if (readError) {
    error = "read error";
    return nullptr;
  }
  return fromBytes(std::move(data), error);
}

std::unique_ptr<ast::File> AstSnapshot::find(std::string_view relativePath,
                                             std::string_view text,
                                             uint32_t fileId,
                                             Miss *miss) const {
  for (const Entry &e : entries) {
    if (e.path != relativePath)
      continue;
    if (e.textSize != text.size() || e.textHash != contentHash(text)) {
      if (miss)
        *miss = Miss::TextDiffers;
      return nullptr;
    }
    std::unique_ptr<ast::File> file;
    if (contentHash(e.ast) == e.astHash)
      file = ast::decodeFile(e.ast, fileId);
    if (!file && miss)
      *miss = Miss::CorruptEntry;
    return file;
  }
  if (miss)
    *miss = Miss::NoEntry;
  return nullptr;
}

std::vector<std::string> AstSnapshot::getPaths() const {
  std::vector<std::string> paths;
  for (const Entry &e : entries)
    paths.emplace_back(e.path);
  return paths;
}

bool AstSnapshotWriter::add(const std::string &relativePath,
                            std::string_view text, const ast::File &file) {
  for (const Entry &e : entries)
    if (e.path == relativePath)
      return false;
  Entry e{relativePath, contentHash(text), text.size(), {}};
  if (!ast::encodeFile(file, e.ast))
    return false;
  entries.push_back(std::move(e));
  return true;
}

std::string AstSnapshotWriter::finish() const {
  std::string index;
  uint64_t offset = 0;
  for (const Entry &e : entries) {
    putVarint(index, e.path.size());
    index += e.path;
    putU64(index, e.textHash);
    putVarint(index, e.textSize);
    putVarint(index, offset);
    putVarint(index, e.ast.size());
    putU64(index, contentHash(e.ast));
    offset += e.ast.size();
  }
  std::string out(kMagic);
  putU32(out, kAstSnapshotVersion);
  putU32(out, ast::kCodecVersion);
  putU32(out, ast::astLayoutFingerprint());
  putU32(out, static_cast<uint32_t>(entries.size()));
  putU64(out, index.size());
  putU64(out, contentHash(index));
  out += index;
  for (const Entry &e : entries)
    out += e.ast;
  return out;
}

} // namespace archc
