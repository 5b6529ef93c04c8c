//===- AstSnapshotTool.cpp - Writes the bundled files' AST snapshot -------===//
//
// This file implements `archc-ast-snapshot ARCHS_DIR OUT`, the build step
// that parses every .arch file under ARCHS_DIR (the bundled families and
// std/) with archc's parser and writes their ASTs to OUT (AstSnapshot.h).
// Each encoding is decoded again and compared before it is written. A file
// that does not parse is left out with a note (archc then parses it and
// reports its errors); any other failure exits with status 1.
//
//===----------------------------------------------------------------------===//
#include "frontend/AstCodec.h"
#include "frontend/AstSnapshot.h"
#include "frontend/Parser.h"
#include "support/Diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace fs = std::filesystem;
using namespace archc;

namespace {

/// The .arch files under `dir`, as '/'-separated paths relative to it,
/// sorted.
std::vector<std::string> findArchFiles(const fs::path &dir) {
  std::vector<std::string> files;
  for (const auto &e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".arch")
      files.push_back(fs::relative(e.path(), dir).generic_string());
  std::sort(files.begin(), files.end());
  return files;
}

/// Whether `file` survives encoding and decoding byte for byte.
bool roundTrips(const ast::File &file, std::string_view encoded) {
  auto decoded = ast::decodeFile(encoded, file.fileId);
  std::string again;
  return decoded && ast::encodeFile(*decoded, again) && again == encoded;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: archc-ast-snapshot <archs-dir> <output>\n";
    return 1;
  }
  fs::path dir = argv[1];
  std::string out = argv[2];
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    std::cerr << "archc-ast-snapshot: error: '" << dir.string()
              << "' is not a directory\n";
    return 1;
  }
  SourceMgr sm;
  std::ostringstream diagText;
  DiagnosticEngine diags(sm);
  diags.setOutput(diagText);
  AstSnapshotWriter writer;
  for (const std::string &rel : findArchFiles(dir)) {
    std::string error;
    uint32_t id = sm.addFile((dir / rel).string(), error);
    if (!id) {
      std::cerr << "archc-ast-snapshot: error: cannot read '" << rel
                << "': " << error << "\n";
      return 1;
    }
    auto file = parseArchFile(id, sm, diags);
    if (!file) {
      std::cerr << "archc-ast-snapshot: note: '" << rel
                << "' does not parse; left out of the snapshot\n";
      continue;
    }
    std::string encoded;
    if (!ast::encodeFile(*file, encoded)) {
      std::cerr << "archc-ast-snapshot: note: '" << rel
                << "' nests too deeply for the snapshot; left out\n";
      continue;
    }
    if (!roundTrips(*file, encoded)) {
      std::cerr << "archc-ast-snapshot: error: the AST of '" << rel
                << "' does not survive encoding and decoding\n";
      return 1;
    }
    if (!writer.add(rel, sm.getText(id), *file)) {
      std::cerr << "archc-ast-snapshot: error: cannot add '" << rel << "'\n";
      return 1;
    }
  }
  std::string bytes = writer.finish();
  std::string staged = out + ".tmp";
  {
    std::ofstream f(staged, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f.flush()) {
      std::cerr << "archc-ast-snapshot: error: cannot write '" << staged
                << "'\n";
      return 1;
    }
  }
  fs::rename(staged, out, ec);
  if (ec) {
    std::cerr << "archc-ast-snapshot: error: cannot write '" << out
              << "': " << ec.message() << "\n";
    return 1;
  }
  return 0;
}
