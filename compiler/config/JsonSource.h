//===- JsonSource.h - JSON documents with source positions ------*- C++ -*-===//
//
// This file declares JsonSource: a JSON file parsed with nlohmann-json whose
// object keys keep their source positions, so config errors can point at
// `config.json:LINE:COL`. The file text lives in the SourceMgr, so diagnostics
// render the offending line with a caret like any .arch error.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_CONFIG_JSONSOURCE_H
#define ARCHC_CONFIG_JSONSOURCE_H

#include "support/Diagnostics.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>

namespace archc {

/// The deepest nesting of objects and arrays a config file may have
/// (docs/limits.md); real configs nest 3 levels.
constexpr size_t kMaxConfigDepth = 64;

/// A parsed JSON file with key positions.
class JsonSource {
public:
  /// Loads and parses `path`. Reports located errors and returns null on
  /// failure (unreadable file, syntax error, non-object root).
  static std::unique_ptr<JsonSource> load(const std::string &path,
                                          SourceMgr &sm, DiagnosticEngine &d);
  /// Parses text already registered as `fileId`.
  static std::unique_ptr<JsonSource> parse(uint32_t fileId, const SourceMgr &sm,
                                           DiagnosticEngine &d);

  const nlohmann::json &root() const { return doc; }
  uint32_t getFileId() const { return fileId; }

  /// Range of the key at JSON pointer `path` (e.g. "/text_config/hidden_size");
  /// the start of the file when unknown.
  SourceRange rangeOf(const std::string &pointer) const;
  SourceRange fileStart() const;

private:
  uint32_t fileId = 0;
  const SourceMgr *sm = nullptr;
  nlohmann::json doc;
  std::map<std::string, std::pair<size_t, size_t>> keyOffsets; // [begin, end)
};

} // namespace archc

#endif // ARCHC_CONFIG_JSONSOURCE_H
