//===- AstSnapshotTest.cpp - The AST snapshot of the bundled files --------===//
//
// The snapshot must be invisible: for every bundled file the AST it gives
// equals a fresh parse (compared through the independent dump of
// AstDump.h), a file whose text differs is not found, and a corrupt,
// truncated or foreign snapshot is rejected (or its damaged entry skipped)
// without crashing, so that Program falls back to parsing.
//
//===----------------------------------------------------------------------===//
#include "AstDump.h"

#include "frontend/AstCodec.h"
#include "frontend/AstSnapshot.h"
#include "frontend/BundledSnapshot.h"
#include "frontend/Parser.h"
#include "frontend/Program.h"
#include "support/ContentHash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace archc;
using archc::test::dumpAst;

namespace {

const fs::path kArchsDir = fs::path(ARCHC_SOURCE_DIR) / "archs";

/// One bundled file, parsed.
struct ParsedFile {
  std::string relative; ///< '/'-separated, relative to archs/
  std::string text;
  uint32_t fileId = 0;
  std::unique_ptr<ast::File> ast;
  std::string dump;
};

/// Every bundled .arch file, parsed into one SourceMgr.
struct BundledFiles {
  SourceMgr sm;
  std::vector<ParsedFile> files;

  BundledFiles() {
    std::vector<std::string> rels;
    for (const auto &e : fs::recursive_directory_iterator(kArchsDir))
      if (e.is_regular_file() && e.path().extension() == ".arch")
        rels.push_back(fs::relative(e.path(), kArchsDir).generic_string());
    std::sort(rels.begin(), rels.end());
    DiagnosticEngine diags(sm);
    diags.setCapture(true);
    for (const std::string &rel : rels) {
      ParsedFile f;
      f.relative = rel;
      std::string err;
      f.fileId = sm.addFile((kArchsDir / rel).string(), err);
      f.text = std::string(sm.getText(f.fileId));
      f.ast = parseArchFile(f.fileId, sm, diags);
      if (f.ast)
        f.dump = dumpAst(*f.ast);
      files.push_back(std::move(f));
    }
  }
};

const BundledFiles &bundled() {
  static const BundledFiles b;
  return b;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/// The snapshot the build wrote beside the test binary.
std::string buildSnapshotBytes() { return readBytes(bundledAstSnapshotPath()); }

/// Whether `snapshot` is harmless: each bundled file is either not found
/// or found with exactly its parsed AST.
void expectHarmless(const AstSnapshot &snapshot, const std::string &what) {
  for (const ParsedFile &f : bundled().files) {
    auto got = snapshot.find(f.relative, f.text, f.fileId);
    if (got) {
      ASSERT_EQ(dumpAst(*got), f.dump) << what << ": " << f.relative;
    }
  }
}

std::string encode(const ast::File &f) {
  std::string out;
  EXPECT_TRUE(ast::encodeFile(f, out));
  return out;
}

} // namespace

TEST(ContentHash, SeesEveryByteAndTheLength) {
  std::string base(100, 'a');
  std::set<uint64_t> seen = {contentHash(base)};
  for (size_t i = 0; i < base.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string s = base;
      s[i] = static_cast<char>(s[i] ^ (1 << bit));
      EXPECT_TRUE(seen.insert(contentHash(s)).second) << i << " " << bit;
    }
  for (size_t n = 0; n < 20; ++n)
    EXPECT_TRUE(seen.insert(contentHash(std::string(n, '\0'))).second) << n;
  EXPECT_EQ(contentHash("archc"), contentHash(std::string("archc")));
}

TEST(AstSnapshot, EveryBundledFileParsesAndRoundTrips) {
  ASSERT_GT(bundled().files.size(), 10u);
  for (const ParsedFile &f : bundled().files) {
    ASSERT_TRUE(f.ast) << f.relative << " does not parse";
    std::string bytes = encode(*f.ast);
    auto decoded = ast::decodeFile(bytes, f.fileId);
    ASSERT_TRUE(decoded) << f.relative;
    EXPECT_EQ(dumpAst(*decoded), f.dump) << f.relative;
  }
}

// The vision-language families' `use` declarations and named graphs
// survive the round trip field by field, and the dump sees them (so the
// comparisons above cover them).
TEST(AstSnapshot, UsesAndNamedGraphsRoundTrip) {
  auto it = std::find_if(
      bundled().files.begin(), bundled().files.end(),
      [](const ParsedFile &f) { return f.relative == "qwen3_vl.arch"; });
  ASSERT_NE(it, bundled().files.end());
  ASSERT_TRUE(it->ast);
  const ast::ArchDecl *arch = nullptr;
  for (const auto &a : it->ast->archs)
    if (a->name == "qwen3_vl")
      arch = a.get();
  ASSERT_TRUE(arch);
  // qwen3_vl extends vision_language: its own `use qwen3_vl_text as text`
  // and graphs (vision_encoder, decoder; the embedding is the base's).
  ASSERT_EQ(arch->uses.size(), 1u);
  ASSERT_EQ(arch->graphs.size(), 2u);
  auto decoded = ast::decodeFile(encode(*it->ast), it->fileId);
  ASSERT_TRUE(decoded);
  ast::ArchDecl *back = nullptr;
  for (const auto &a : decoded->archs)
    if (a->name == "qwen3_vl")
      back = a.get();
  ASSERT_TRUE(back);
  ASSERT_EQ(back->uses.size(), 1u);
  EXPECT_EQ(back->uses[0].arch, "qwen3_vl_text");
  EXPECT_EQ(back->uses[0].alias, "text");
  EXPECT_EQ(back->uses[0].aliasRange.begin, arch->uses[0].aliasRange.begin);
  ASSERT_EQ(back->graphs.size(), 2u);
  EXPECT_EQ(back->graphs[0]->name, "vision_encoder");
  EXPECT_EQ(back->graphs[1]->name, "decoder");
  EXPECT_EQ(back->graphs[1]->nameRange.begin, arch->graphs[1]->nameRange.begin);
  EXPECT_TRUE(arch->graphs[1]->nameRange.begin.isValid());
  EXPECT_FALSE(back->model); // the base's main model
  EXPECT_EQ(back->base, "vision_language");
  EXPECT_EQ(dumpAst(*decoded), it->dump);
  // The dump shows the members: renaming one changes it.
  back->graphs[1]->name = "decoders";
  EXPECT_NE(dumpAst(*decoded), it->dump);
  back->graphs[1]->name = "decoder";
  back->uses[0].alias = "lm";
  EXPECT_NE(dumpAst(*decoded), it->dump);
}

// A named graph whose presence flag says absent is a corrupt encoding.
TEST(AstSnapshot, AnAbsentNamedGraphIsCorrupt) {
  ast::File f;
  f.fileId = 1;
  auto a = std::make_unique<ast::ArchDecl>();
  a->name = "a";
  auto g = std::make_unique<ast::ModelDecl>();
  g->name = "decoder";
  a->graphs.push_back(std::move(g));
  f.archs.push_back(std::move(a));
  std::string bytes = encode(f);
  ASSERT_TRUE(ast::decodeFile(bytes, 1));
  // The encoding ends with the graph: its flag 1, range, name "decoder"
  // (count 7 + 7 bytes), name range, no inputs, outputs or statements.
  size_t flagAt = bytes.size() - (1 + 4 + 8 + 4 + 3);
  ASSERT_EQ(bytes[flagAt], '\x01');
  bytes[flagAt] = '\0';
  EXPECT_FALSE(ast::decodeFile(bytes, 1));
}

TEST(AstSnapshot, DecodingRemapsTheFileId) {
  const ParsedFile &f = bundled().files.front();
  auto decoded = ast::decodeFile(encode(*f.ast), 77);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->fileId, 77u);
  std::string dump = dumpAst(*decoded);
  EXPECT_EQ(dump.find(" " + std::to_string(f.fileId) + ":"), std::string::npos);
  EXPECT_NE(dump.find("[77:"), std::string::npos);
}

TEST(AstSnapshot, TheBuildsSnapshotEqualsAFreshParseOfEveryBundledFile) {
  std::string status;
  const AstSnapshot *snapshot = bundledAstSnapshot(&status);
  ASSERT_TRUE(snapshot) << status;
  std::vector<std::string> expected;
  for (const ParsedFile &f : bundled().files) {
    expected.push_back(f.relative);
    AstSnapshot::Miss miss;
    auto got = snapshot->find(f.relative, f.text, f.fileId, &miss);
    ASSERT_TRUE(got) << f.relative << ": not found (" << int(miss)
                     << "); is the build up to date?";
    EXPECT_EQ(dumpAst(*got), f.dump) << f.relative;
  }
  EXPECT_EQ(snapshot->getPaths(), expected);
}

TEST(AstSnapshot, AnotherTextOrPathIsNotFound) {
  const ParsedFile &f = bundled().files.front();
  AstSnapshotWriter w;
  ASSERT_TRUE(w.add(f.relative, f.text, *f.ast));
  EXPECT_FALSE(w.add(f.relative, f.text, *f.ast)); // the same path twice
  std::string error;
  auto s = AstSnapshot::fromBytes(w.finish(), error);
  ASSERT_TRUE(s) << error;
  AstSnapshot::Miss miss;
  EXPECT_TRUE(s->find(f.relative, f.text, 3));
  std::string edited = f.text;
  edited[edited.size() / 2] ^= 1;
  EXPECT_FALSE(s->find(f.relative, edited, 3, &miss));
  EXPECT_EQ(miss, AstSnapshot::Miss::TextDiffers);
  EXPECT_FALSE(s->find(f.relative, f.text + "\n", 3, &miss));
  EXPECT_EQ(miss, AstSnapshot::Miss::TextDiffers);
  EXPECT_FALSE(s->find("elsewhere/" + f.relative, f.text, 3, &miss));
  EXPECT_EQ(miss, AstSnapshot::Miss::NoEntry);
}

TEST(AstSnapshot, ForeignOrDamagedHeadersAreRejected) {
  std::string good = buildSnapshotBytes();
  ASSERT_GT(good.size(), 40u);
  std::string error;
  ASSERT_TRUE(AstSnapshot::fromBytes(good, error)) << error;
  // Magic, container version, codec version, layout, entry count, index
  // size and checksum: any change is refused.
  for (size_t i = 0; i < 40; ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_FALSE(AstSnapshot::fromBytes(bad, error)) << "header byte " << i;
  }
  EXPECT_FALSE(AstSnapshot::fromBytes("", error));
  EXPECT_FALSE(AstSnapshot::open("/nonexistent/archs.ast-snapshot", error));
}

TEST(AstSnapshot, TruncatedSnapshotsAreRejected) {
  std::string good = buildSnapshotBytes();
  std::string error;
  std::mt19937 rng(7);
  std::vector<size_t> lengths;
  for (size_t n = 0; n < std::min<size_t>(good.size(), 2048); ++n)
    lengths.push_back(n);
  for (int i = 0; i < 300; ++i)
    lengths.push_back(rng() % good.size());
  lengths.push_back(good.size() - 1);
  for (size_t n : lengths)
    EXPECT_FALSE(AstSnapshot::fromBytes(good.substr(0, n), error))
        << "truncated to " << n;
}

TEST(AstSnapshot, FlippedBytesNeverChangeAnAst) {
  std::string good = buildSnapshotBytes();
  std::mt19937 rng(11);
  for (int i = 0; i < 150; ++i) {
    std::string bad = good;
    size_t at = rng() % bad.size();
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    std::string error;
    auto s = AstSnapshot::fromBytes(bad, error);
    if (s)
      expectHarmless(*s, "byte " + std::to_string(at));
  }
}

TEST(AstSnapshot, DecoderSurvivesTruncatedAndMutatedEncodings) {
  std::mt19937 rng(13);
  for (const ParsedFile &f : bundled().files) {
    std::string bytes = encode(*f.ast);
    for (int i = 0; i < 60; ++i) {
      size_t n = rng() % bytes.size();
      EXPECT_FALSE(ast::decodeFile(std::string_view(bytes).substr(0, n), 1))
          << f.relative << " truncated to " << n;
    }
    for (int i = 0; i < 120; ++i) {
      std::string bad = bytes;
      for (int k = 1 + rng() % 3; k > 0; --k)
        bad[rng() % bad.size()] = static_cast<char>(rng());
      // No crash, hang or huge allocation; the result (if any) is a
      // well-formed AST that the dump can walk.
      if (auto d = ast::decodeFile(bad, 1))
        dumpAst(*d);
    }
  }
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 300, '\0');
    for (char &c : junk)
      c = static_cast<char>(rng());
    if (auto d = ast::decodeFile(junk, 1))
      dumpAst(*d);
    std::string error;
    EXPECT_FALSE(AstSnapshot::fromBytes(junk, error));
  }
}

TEST(AstSnapshot, HugeCountsAndDeepNestingAreRefused) {
  // A list count of 2^62 with nothing behind it.
  std::string huge = "\x80\x80\x80\x80\x80\x80\x80\x80\x40";
  EXPECT_FALSE(ast::decodeFile(huge, 1));
  // def f() { return -(-(-...x)) } nested 100,000 times: refused at
  // kMaxCodecDepth, without exhausting the stack.
  auto nested = [](size_t depth) {
    std::string b;
    b += '\0';                 // no imports
    b += '\x01';               // one def
    b += std::string(4, '\0'); // range
    b += "\x01"
         "f";                  // name
    b += std::string(4, '\0'); // name range
    b += '\0';                 // no params
    b += '\x01';               // one statement
    b += '\x05';               // Return + 1
    b += std::string(4, '\0'); // range
    b += '\x01';               // one value
    for (size_t i = 0; i < depth; ++i) {
      b += '\x0c';               // Unary + 1
      b += std::string(4, '\0'); // range
      b += '\0';                 // Neg
    }
    b += '\x06';               // Name + 1
    b += std::string(4, '\0'); // range
    b += "\x01"
         "x";  // name
    b += '\0'; // no archs
    return b;
  };
  EXPECT_TRUE(ast::decodeFile(nested(100), 1));
  EXPECT_FALSE(ast::decodeFile(nested(100000), 1));
  // Encoding refuses the same depth, so the writer leaves such a file out.
  ast::File f;
  f.fileId = 1;
  auto def = std::make_unique<ast::DefDecl>();
  def->fileId = 1;
  ast::ExprPtr e = std::make_unique<ast::NameExpr>(SourceRange(), "x");
  for (unsigned i = 0; i < ast::kMaxCodecDepth + 1; ++i)
    e = std::make_unique<ast::UnaryExpr>(SourceRange(), ast::UnaryOp::Neg,
                                         std::move(e));
  std::vector<ast::ExprPtr> values;
  values.push_back(std::move(e));
  def->body.push_back(
      std::make_unique<ast::ReturnStmt>(SourceRange(), std::move(values)));
  f.defs.push_back(std::move(def));
  std::string out = "kept";
  EXPECT_FALSE(ast::encodeFile(f, out));
  EXPECT_EQ(out, "kept");
}

TEST(AstSnapshot, LocationsOfAnotherFileAreNotEncoded) {
  ast::File f;
  f.fileId = 2;
  f.imports.push_back({SourceRange(SourceLoc{3, 1, 1}), "x.arch"});
  std::string out;
  EXPECT_FALSE(ast::encodeFile(f, out));
}

namespace {

/// The dumps of every file `path` loads, and the trace of how.
struct LoadResult {
  bool ok = false;
  std::vector<std::string> dumps;
  std::string trace;
};

LoadResult loadWith(const std::string &path, const AstSnapshot *snapshot) {
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  diags.setCapture(true);
  Program program;
  std::ostringstream trace;
  program.setAstSnapshot(snapshot, &trace);
  LoadResult r;
  r.ok = program.load(path, {}, sm, diags);
  for (const auto &f : program.getFiles())
    r.dumps.push_back(dumpAst(*f));
  r.trace = trace.str();
  return r;
}

size_t countOf(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST(AstSnapshotProgram, BundledFilesComeFromTheSnapshotUnchanged) {
  const AstSnapshot *snapshot = bundledAstSnapshot();
  ASSERT_TRUE(snapshot);
  std::string llama = (kArchsDir / "llama.arch").string();
  LoadResult parsed = loadWith(llama, nullptr);
  LoadResult restored = loadWith(llama, snapshot);
  ASSERT_TRUE(parsed.ok);
  ASSERT_TRUE(restored.ok);
  ASSERT_GT(parsed.dumps.size(), 2u); // llama imports std files
  EXPECT_EQ(restored.dumps, parsed.dumps);
  EXPECT_EQ(countOf(restored.trace, ": from the snapshot"), parsed.dumps.size())
      << restored.trace;
  EXPECT_EQ(countOf(parsed.trace, ": parsed (no AST snapshot)"),
            parsed.dumps.size())
      << parsed.trace;
}

TEST(AstSnapshotProgram, ACorruptEntryFallsBackToParsing) {
  std::string bytes = buildSnapshotBytes();
  std::string error;
  auto good = AstSnapshot::fromBytes(bytes, error);
  ASSERT_TRUE(good) << error;
  // Damage the last byte of the AST section (an entry's AST, after the
  // index): the index still reads, that entry's checksum fails.
  bytes.back() = static_cast<char>(bytes.back() ^ 0x55);
  auto damaged = AstSnapshot::fromBytes(bytes, error);
  ASSERT_TRUE(damaged) << error;
  std::string victim = damaged->getPaths().back();
  std::string path = (kArchsDir / victim).string();
  LoadResult parsed = loadWith(path, nullptr);
  LoadResult fallback = loadWith(path, damaged.get());
  ASSERT_TRUE(parsed.ok);
  ASSERT_TRUE(fallback.ok);
  EXPECT_EQ(fallback.dumps, parsed.dumps);
  EXPECT_NE(fallback.trace.find(victim + ": parsed (corrupt snapshot entry)"),
            std::string::npos)
      << fallback.trace;
}

TEST(AstSnapshotProgram, UserFilesAndEditedTextsAreParsed) {
  const ParsedFile *llama = nullptr;
  for (const ParsedFile &f : bundled().files)
    if (f.relative == "llama.arch")
      llama = &f;
  ASSERT_TRUE(llama);
  // A snapshot that claims "llama.arch" for other text.
  AstSnapshotWriter w;
  ASSERT_TRUE(w.add("llama.arch", llama->text + "\n", *llama->ast));
  std::string error;
  auto stale = AstSnapshot::fromBytes(w.finish(), error);
  ASSERT_TRUE(stale) << error;
  LoadResult r = loadWith((kArchsDir / "llama.arch").string(), stale.get());
  ASSERT_TRUE(r.ok);
  EXPECT_NE(r.trace.find("llama.arch: parsed (text differs from the "
                         "snapshot's)"),
            std::string::npos)
      << r.trace;
  EXPECT_NE(r.trace.find("decoder.arch: parsed (not in the snapshot)"),
            std::string::npos)
      << r.trace;
  // The same text outside the bundled directory is a user file.
  fs::path dir = fs::temp_directory_path() /
                 ("archc-astsnap-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "llama.arch", std::ios::binary) << llama->text;
  LoadResult user =
      loadWith((dir / "llama.arch").string(), bundledAstSnapshot());
  fs::remove_all(dir);
  ASSERT_TRUE(user.ok);
  EXPECT_NE(user.trace.find("llama.arch: parsed (not a bundled file)"),
            std::string::npos)
      << user.trace;
}
