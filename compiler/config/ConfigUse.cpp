//===- ConfigUse.cpp - Which parts of a config.json were read -------------===//
#include "config/ConfigUse.h"

namespace archc {

void ConfigUse::consume(const std::string &pointer) {
  consumed.insert(pointer);
}

void ConfigUse::open(const std::string &pointer) {
  // "/a/b/c" opens "/a/b/c", "/a/b" and "/a": the keys on the way are read
  // into, not ignored.
  std::string p = pointer;
  while (!p.empty() && opened.insert(p).second) {
    size_t slash = p.rfind('/');
    if (slash == std::string::npos)
      break;
    p.resize(slash);
  }
}

bool ConfigUse::isConsumed(const std::string &pointer) const {
  std::string p = pointer;
  while (!p.empty()) {
    if (consumed.count(p))
      return true;
    size_t slash = p.rfind('/');
    if (slash == std::string::npos)
      break;
    p.resize(slash);
  }
  return false;
}

namespace {
void collectUnused(const ConfigUse &use, const nlohmann::json &node,
                   const std::string &pointer, std::vector<std::string> &out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string child = pointer + "/" + it.key();
    if (use.isConsumed(child))
      continue;
    if (use.isOpened(child) && it.value().is_object()) {
      collectUnused(use, it.value(), child, out);
      continue;
    }
    out.push_back(child);
  }
}
} // namespace

std::vector<std::string> ConfigUse::unused(const nlohmann::json &root) const {
  std::vector<std::string> out;
  if (root.is_object())
    collectUnused(*this, root, "", out);
  return out;
}

} // namespace archc
