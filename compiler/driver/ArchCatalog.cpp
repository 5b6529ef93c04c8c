//===- ArchCatalog.cpp - Bundled families: listing and suggestions --------===//
//
// This file implements printBundledArchs() and closestNames().
//
//===----------------------------------------------------------------------===//
#include "driver/ArchCatalog.h"

#include "frontend/Program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

namespace archc {

void printBundledArchs(std::ostream &out) {
  std::vector<BundledArch> archs = listBundledArchs();
  auto join = [](const std::vector<std::string> &items) {
    std::string list;
    for (const std::string &m : items)
      list += (list.empty() ? "" : ",") + m;
    return list.empty() ? std::string("-") : list;
  };
  size_t nameWidth = 4, fileWidth = 4, typesWidth = 11;
  for (const BundledArch &a : archs) {
    nameWidth = std::max(nameWidth, a.name.size());
    fileWidth = std::max(
        fileWidth, std::filesystem::path(a.file).filename().string().size());
    typesWidth = std::max(typesWidth, join(a.modelTypes).size());
  }
  out << fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", "arch", nameWidth, "file",
                     fileWidth, "model types", typesWidth,
                     "matches (config.json architectures)");
  for (const BundledArch &a : archs) {
    std::string list;
    for (const std::string &m : a.matches)
      list += (list.empty() ? "" : ", ") + m;
    out << fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", a.name, nameWidth,
                       std::filesystem::path(a.file).filename().string(),
                       fileWidth, join(a.modelTypes), typesWidth, list);
  }
  out << fmt::format("{} families in {}\n", archs.size(), bundledArchsDir());
}

namespace {
std::string lower(const std::string &s) {
  std::string r = s;
  for (char &c : r)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                         prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

/// "LlamaForCausalLM" -> "llama": the model part of a Hugging Face class.
std::string modelPrefix(const std::string &cls) {
  std::string l = lower(cls);
  for (const char *sep : {"for", "lmhead", "model"}) {
    size_t p = l.find(sep);
    if (p != std::string::npos && p > 0)
      return l.substr(0, p);
  }
  return l;
}
} // namespace

std::vector<std::string>
closestNames(const std::string &name,
             const std::vector<std::string> &candidates, size_t limit) {
  std::string want = lower(name), prefix = modelPrefix(name);
  struct Scored {
    bool samePrefix;
    size_t distance;
    std::string name;
  };
  std::vector<Scored> scored;
  std::set<std::string> seen;
  for (const std::string &c : candidates) {
    if (!seen.insert(c).second)
      continue;
    // The model parts are compared ("Llama" of "LlamaForCausalLM"): the
    // class suffix they share says nothing about a typo.
    std::string other = modelPrefix(c);
    size_t d = editDistance(prefix, other);
    bool same = !prefix.empty() && other == prefix;
    if (same || d <= 1 || d * 3 <= std::max(prefix.size(), other.size()))
      scored.push_back({same, editDistance(want, lower(c)), c});
  }
  std::sort(scored.begin(), scored.end(), [](const Scored &a, const Scored &b) {
    if (a.samePrefix != b.samePrefix)
      return a.samePrefix;
    if (a.distance != b.distance)
      return a.distance < b.distance;
    return a.name < b.name;
  });
  std::vector<std::string> out;
  for (const Scored &s : scored) {
    if (out.size() == limit)
      break;
    out.push_back(s.name);
  }
  return out;
}

} // namespace archc
