//===- BoundedJson.cpp - JSON that a file controls, bounded ---------------===//
//
// This file implements the bounded JSON reader (BoundedJson.h). Non-finite
// literals are parsed as in config/JsonSource.cpp: each is replaced by a
// string sentinel of the same length, and a string value that ends exactly
// where a literal ended becomes its double.
//
//===----------------------------------------------------------------------===//
#include "support/BoundedJson.h"
#include "support/TrackingIterator.h"

#include <iterator>
#include <limits>

namespace archc {

namespace {
struct NonFiniteLiteral {
  std::string_view literal;
  std::string_view sentinel;
  double value;
};
const NonFiniteLiteral kNonFinite[] = {
    {"-Infinity", "\"-Infini\"", -std::numeric_limits<double>::infinity()},
    {"Infinity", "\"Infini\"", std::numeric_limits<double>::infinity()},
    {"NaN", "\"N\"", std::numeric_limits<double>::quiet_NaN()},
};

bool isWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '+' || c == '-';
}

std::string tooDeepMessage(size_t at, size_t limit) {
  return "nested more than " + std::to_string(limit) +
         " levels deep (the limit) at byte " + std::to_string(at);
}
} // namespace

void scanJsonOutsideStrings(std::string_view text,
                            const std::function<size_t(size_t)> &visit) {
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
      continue;
    }
    size_t consumed = visit(i);
    if (consumed == kStopJsonScan)
      return;
    i += consumed;
  }
}

std::optional<size_t> firstJsonTooDeep(std::string_view text, size_t limit) {
  size_t depth = 0;
  std::optional<size_t> found;
  scanJsonOutsideStrings(text, [&](size_t i) -> size_t {
    char c = text[i];
    if (c == '{' || c == '[') {
      if (++depth > limit) {
        found = i;
        return kStopJsonScan;
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
    return 0;
  });
  return found;
}

std::unordered_map<size_t, double> substituteJsonNonFinite(std::string &text) {
  std::unordered_map<size_t, double> values;
  scanJsonOutsideStrings(text, [&](size_t i) -> size_t {
    if (i > 0 && isWordChar(text[i - 1]))
      return 0;
    for (const NonFiniteLiteral &l : kNonFinite) {
      size_t n = l.literal.size();
      if (text.compare(i, n, l.literal) != 0 ||
          (i + n < text.size() && isWordChar(text[i + n])))
        continue;
      text.replace(i, n, l.sentinel);
      values[i + n] = l.value;
      return n - 1;
    }
    return 0;
  });
  return values;
}

std::string restoreJsonNonFinite(std::string msg) {
  for (const NonFiniteLiteral &l : kNonFinite)
    for (size_t at = msg.find(l.sentinel); at != std::string::npos;
         at = msg.find(l.sentinel, at + l.literal.size()))
      msg.replace(at, l.sentinel.size(), l.literal);
  return msg;
}

std::string cleanJsonParseMessage(const std::string &what) {
  std::string msg = what;
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
  if (size_t colon = msg.find(": ");
      msg.rfind("[json.exception", 0) == 0 && colon != std::string::npos)
    msg = msg.substr(colon + 2);
  if (size_t last = msg.find("; last read:"); last != std::string::npos)
    msg.resize(last);
  return msg;
}

bool parseBoundedJson(std::string_view input, nlohmann::json &out,
                      std::string &error, const JsonParseOptions &opts) {
  if (std::optional<size_t> at = firstJsonTooDeep(input, opts.maxDepth)) {
    error = tooDeepMessage(*at, opts.maxDepth);
    return false;
  }
  try {
    if (!opts.allowNonFinite) {
      out = nlohmann::json::parse(input.begin(), input.end());
      return true;
    }
    std::string text(input);
    std::unordered_map<size_t, double> nonFinite =
        substituteJsonNonFinite(text);
    if (nonFinite.empty()) {
      out = nlohmann::json::parse(text);
      return true;
    }
    const char *base = text.data();
    const char *furthest = base;
    TrackingIterator first{base, &furthest};
    TrackingIterator last{base + text.size(), nullptr};
    auto callback = [&](int, nlohmann::json::parse_event_t ev,
                        nlohmann::json &parsed) {
      if (ev == nlohmann::json::parse_event_t::value && parsed.is_string()) {
        auto it = nonFinite.find(static_cast<size_t>(furthest - base));
        if (it != nonFinite.end())
          parsed = it->second;
      }
      return true;
    };
    out = nlohmann::json::parse(first, last, callback);
    return true;
  } catch (const std::exception &e) {
    error = restoreJsonNonFinite(cleanJsonParseMessage(e.what()));
    out = nullptr;
    return false;
  }
}

bool isBoundedJson(std::string_view input, std::string &error,
                   const JsonParseOptions &opts) {
  if (std::optional<size_t> at = firstJsonTooDeep(input, opts.maxDepth)) {
    error = tooDeepMessage(*at, opts.maxDepth);
    return false;
  }
  std::string text(input);
  if (opts.allowNonFinite)
    substituteJsonNonFinite(text);
  // A SAX pass that builds nothing and keeps the parser's message.
  struct Check : nlohmann::json_sax<nlohmann::json> {
    std::string message;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t &) override {
      return true;
    }
    bool string(string_t &) override { return true; }
    bool binary(binary_t &) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t &) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string &,
                     const nlohmann::detail::exception &e) override {
      message = e.what();
      return false;
    }
  } check;
  if (nlohmann::json::sax_parse(text, &check))
    return true;
  error = restoreJsonNonFinite(cleanJsonParseMessage(
      check.message.empty() ? std::string("invalid JSON") : check.message));
  return false;
}

} // namespace archc
