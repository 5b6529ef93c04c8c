//===- BoundedJson.h - JSON that a file controls, bounded -------*- C++ -*-===//
//
// This file declares the one way archc parses JSON it did not write (an
// output folder's previous config.json, generation_config.json, safetensors
// headers, shard indexes, side files): a linear scan of the nesting depth
// before anything is parsed, so that no parse, copy, comparison or dump of
// the document recurses deeper than the limit (nlohmann's copy and dump
// recurse); Python's non-finite literals (`NaN`, `Infinity`, `-Infinity`,
// valid in Hugging Face's files) read as doubles on request; and error
// messages that never quote the file's bytes (docs/limits.md).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_BOUNDEDJSON_H
#define ARCHC_SUPPORT_BOUNDEDJSON_H

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace archc {

/// The deepest nesting of objects and arrays in any JSON archc reads
/// (docs/limits.md); real files nest 4 levels at most.
constexpr size_t kMaxJsonDepth = 64;

/// Calls `visit(i)` for each offset `i` of `text` outside string literals,
/// in order; `visit` returns how many characters after `i` it consumed, or
/// kStopJsonScan to end the scan. Linear in the text's size.
constexpr size_t kStopJsonScan = static_cast<size_t>(-1);
void scanJsonOutsideStrings(std::string_view text,
                            const std::function<size_t(size_t)> &visit);

/// The offset of the first `{` or `[` nested deeper than `limit` outside
/// strings, if any.
std::optional<size_t> firstJsonTooDeep(std::string_view text, size_t limit);

/// Replaces Python's non-finite literals outside strings (`NaN`, `Infinity`,
/// `-Infinity`) in `text` by string sentinels of the same length, so every
/// offset stays where it was; returns the value of each, keyed by the offset
/// just past it.
std::unordered_map<size_t, double> substituteJsonNonFinite(std::string &text);

/// Puts the original literals back into a parser message.
std::string restoreJsonNonFinite(std::string message);

/// A parser message without the document's bytes: nlohmann's "last read:
/// '...'" suffix and its exception prefix are removed.
std::string cleanJsonParseMessage(const std::string &what);

struct JsonParseOptions {
  size_t maxDepth = kMaxJsonDepth;
  /// Accept Python's NaN / Infinity / -Infinity (as doubles).
  bool allowNonFinite = false;
};

/// Parses `text` after the depth scan. On failure returns false with
/// `error` set ("nested more than 64 levels deep (the limit) at byte N",
/// or the parser's message without the file's bytes).
bool parseBoundedJson(std::string_view text, nlohmann::json &out,
                      std::string &error, const JsonParseOptions &opts = {});

/// Whether `text` is one JSON document within the depth limit, without
/// building it (a side file's check: linear time, constant extra memory).
bool isBoundedJson(std::string_view text, std::string &error,
                   const JsonParseOptions &opts = {});

} // namespace archc

#endif // ARCHC_SUPPORT_BOUNDEDJSON_H
