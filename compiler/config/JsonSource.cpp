//===- JsonSource.cpp - JSON documents with source positions --------------===//
//
// This file implements JsonSource. Positions come from an input iterator that
// publishes how far nlohmann's lexer has read; at each `key` parse event the
// lexer has just consumed the closing quote of that key.
//
// Python's json module (which writes Hugging Face's config.json files) emits
// `Infinity`, `-Infinity` and `NaN`, which strict JSON rejects (Mamba-2
// configs carry `"time_step_limit": [0.0, Infinity]`). Before parsing, each
// such literal outside a string is replaced by a string sentinel of the same
// length (so every offset stays where it was); when the parser reports that
// string value, which ends exactly where the literal ended, it becomes the
// floating-point value. Infinity is a bound some families take; NaN is
// refused at its position wherever it appears (support/BoundedJson.h holds
// the scanners).
//
//===----------------------------------------------------------------------===//
#include "config/JsonSource.h"
#include "support/BoundedJson.h"
#include "support/FileRead.h"
#include "support/TrackingIterator.h"

#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

namespace archc {

namespace {

std::string escapePointerToken(const std::string &key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}
} // namespace

std::unique_ptr<JsonSource>
JsonSource::load(const std::string &path, SourceMgr &sm, DiagnosticEngine &d) {
  uint32_t id = sm.findFile(path);
  if (!id) {
    std::string err;
    id = sm.addFile(path, err, kMaxConfigBytes);
    if (!id) {
      d.error(SourceRange(), "cannot read config file '{}': {}", path, err);
      return nullptr;
    }
  }
  return parse(id, sm, d);
}

std::unique_ptr<JsonSource>
JsonSource::parse(uint32_t fileId, const SourceMgr &sm, DiagnosticEngine &d) {
  auto src = std::make_unique<JsonSource>();
  src->fileId = fileId;
  src->sm = &sm;
  std::string parsedText(sm.getText(fileId));
  std::unordered_map<size_t, double> nonFinite =
      substituteJsonNonFinite(parsedText);
  std::string_view text = parsedText;
  const char *base = text.data();
  const char *furthest = base;
  TrackingIterator first{base, &furthest};
  TrackingIterator last{base + text.size(), nullptr};

  if (std::optional<size_t> at = firstJsonTooDeep(text, kMaxConfigDepth)) {
    SourceLoc loc = sm.getLoc(fileId, *at);
    d.error(SourceRange(loc, SourceLoc{fileId, loc.line, loc.col + 1}),
            "config nested more than {} levels deep (the limit)",
            kMaxConfigDepth);
    return nullptr;
  }

  // The JSON pointer of the container being parsed (the keys or array
  // indexes under which the nested values sit) and its length at each
  // enclosing level, to pop a level in O(1).
  std::vector<bool> isArray;
  std::vector<size_t> arrayIndex;
  std::string pointer;
  std::vector<size_t> pointerLengths;
  std::string pendingKey;
  bool havePendingKey = false;
  // The first NaN: no model computes with it (docs/limits.md).
  std::optional<std::pair<size_t, std::string>> firstNaN;
  auto enterValue = [&]() -> std::string {
    // The token under which a new value in the current container sits.
    if (!isArray.empty() && isArray.back())
      return std::to_string(arrayIndex.back()++);
    if (havePendingKey) {
      havePendingKey = false;
      return pendingKey;
    }
    return "";
  };

  auto callback = [&](int, nlohmann::json::parse_event_t ev,
                      nlohmann::json &parsed) -> bool {
    using E = nlohmann::json::parse_event_t;
    switch (ev) {
    case E::object_start:
    case E::array_start: {
      bool nested = !isArray.empty();
      std::string token = nested ? enterValue() : "";
      if (nested) {
        pointerLengths.push_back(pointer.size());
        pointer += "/" + token;
      }
      isArray.push_back(ev == E::array_start);
      arrayIndex.push_back(0);
      break;
    }
    case E::object_end:
    case E::array_end:
      isArray.pop_back();
      arrayIndex.pop_back();
      if (!pointerLengths.empty() && !isArray.empty()) {
        pointer.resize(pointerLengths.back());
        pointerLengths.pop_back();
      }
      break;
    case E::key: {
      size_t end = static_cast<size_t>(furthest - base);
      // Find the opening quote of the key, skipping escaped quotes.
      size_t b = end >= 2 ? end - 2 : 0;
      while (b > 0 && !(text[b] == '"' && text[b - 1] != '\\'))
        --b;
      pendingKey = escapePointerToken(parsed.get<std::string>());
      havePendingKey = true;
      src->keyOffsets[pointer + "/" + pendingKey] = {b, end};
      break;
    }
    case E::value: {
      std::string token;
      if (!isArray.empty())
        token = enterValue();
      if (!nonFinite.empty() && parsed.is_string()) {
        size_t end = static_cast<size_t>(furthest - base);
        auto it = nonFinite.find(end);
        if (it != nonFinite.end()) {
          parsed = it->second;
          if (std::isnan(it->second) && !firstNaN)
            firstNaN.emplace(end - 3, pointer + "/" + token);
        }
      }
      break;
    }
    }
    return true;
  };

  try {
    src->doc = nlohmann::json::parse(first, last, callback,
                                     /*allow_exceptions=*/true,
                                     /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error &e) {
    size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    SourceLoc loc = sm.getLoc(fileId, offset);
    std::string msg = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at line
    // 1, column 2: "; keep only the explanation.
    size_t colon = msg.find(": ");
    if (colon != std::string::npos)
      msg = msg.substr(colon + 2);
    d.error(SourceRange(loc, loc), "invalid JSON: {}",
            restoreJsonNonFinite(msg));
    return nullptr;
  } catch (const std::exception &e) {
    d.error(SourceRange(SourceLoc{fileId, 1, 1}), "invalid JSON: {}", e.what());
    return nullptr;
  }
  if (firstNaN) {
    SourceLoc loc = sm.getLoc(fileId, firstNaN->first);
    d.error(SourceRange(loc, SourceLoc{fileId, loc.line, loc.col + 3}),
            "config value '{}' is NaN; a model computed with it would give "
            "NaN, so archc refuses it",
            firstNaN->second.substr(1));
    return nullptr;
  }
  if (!src->doc.is_object()) {
    d.error(src->fileStart(), "a config file must hold a JSON object, not {}",
            src->doc.type_name());
    return nullptr;
  }
  return src;
}

SourceRange JsonSource::rangeOf(const std::string &pointer) const {
  auto it = keyOffsets.find(pointer);
  if (it == keyOffsets.end())
    return fileStart();
  return {sm->getLoc(fileId, it->second.first),
          sm->getLoc(fileId, it->second.second)};
}

SourceRange JsonSource::fileStart() const {
  std::string_view text = sm->getText(fileId);
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\n' ||
                             text[i] == '\r' || text[i] == '\t'))
    ++i;
  SourceLoc l = sm->getLoc(fileId, i);
  return {l, SourceLoc{l.fileId, l.line, l.col + 1}};
}

} // namespace archc
