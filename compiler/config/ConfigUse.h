//===- ConfigUse.h - Which parts of a config.json were read -----*- C++ -*-===//
//
// This file declares ConfigUse, the record of the config.json keys one
// compilation accounts for, which makes config binding closed-world: a key
// that no family field reads, no `inert` declaration names and no driver
// option consumes is reported by name (ConfigUse::unused).
//
// Keys are JSON pointers ("/text_config/rope_scaling/factor", unescaped as
// elsewhere in archc). A *consumed* pointer accounts for its whole subtree
// (a scalar field, a list, a dict handed to an op that checks its keys). An
// *opened* pointer is an object whose keys are accounted for one by one:
// the root, `text_config`, an object a dotted alias reads into, and a dict
// field whose keys the family's code reads (EvalValue keeps the dict's
// origin so that `d.key`, `d["key"]`, `get(d, ...)` and `"key" in d`
// consume only that key).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_CONFIG_CONFIGUSE_H
#define ARCHC_CONFIG_CONFIGUSE_H

#include "support/SourceMgr.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace archc {

/// The config.json keys a compilation accounted for.
class ConfigUse {
public:
  /// Accounts for the node at `pointer` and everything beneath it.
  void consume(const std::string &pointer);
  /// Marks the object at `pointer` (and its ancestors) as one whose keys are
  /// accounted for one by one.
  void open(const std::string &pointer);
  /// Whether `pointer` or one of its ancestors was consumed.
  bool isConsumed(const std::string &pointer) const;
  /// Whether `pointer` was opened.
  bool isOpened(const std::string &pointer) const {
    return opened.count(pointer) != 0;
  }

  /// The pointers of keys under the root and the opened objects that were
  /// neither consumed nor opened themselves, in document order.
  std::vector<std::string> unused(const nlohmann::json &root) const;

  /// Where config.json's keys are (for notes at a key); may stay unset.
  std::function<SourceRange(const std::string &pointer)> locate;

private:
  std::set<std::string> consumed;
  std::set<std::string> opened;
};

/// Where a dict value of the evaluator came from: the config.json object at
/// `pointer`, whose keys are consumed in `use` as they are read.
struct ConfigOrigin {
  std::shared_ptr<ConfigUse> use;
  std::string pointer;

  /// Accounts for `key` of the object: consumed, or opened when its value
  /// is an object (`nested` true), whose own keys are then read one by one.
  void readKey(const std::string &key, bool nested = false) const {
    if (nested)
      use->open(pointer + "/" + key);
    else
      use->consume(pointer + "/" + key);
  }
  /// Accounts for the whole object.
  void readAll() const { use->consume(pointer); }
};

} // namespace archc

#endif // ARCHC_CONFIG_CONFIGUSE_H
