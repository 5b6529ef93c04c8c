//===- ConfigReport.cpp - -emit=config ------------------------------------===//
#include "driver/ConfigReport.h"

#include <fmt/format.h>

#include <filesystem>

namespace archc {

namespace {
/// A compile-time config value as JSON (config values are scalars, lists and
/// dicts).
nlohmann::ordered_json toJson(const EvalValue &v) {
  switch (v.getKind()) {
  case EvalValue::Kind::None:
    return nullptr;
  case EvalValue::Kind::Bool:
    return v.getBool();
  case EvalValue::Kind::Int:
  case EvalValue::Kind::Index:
    return v.getInt();
  case EvalValue::Kind::Float:
    return v.getNumber();
  case EvalValue::Kind::String:
    return v.getString();
  case EvalValue::Kind::List:
  case EvalValue::Kind::Tuple: {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const EvalValue &e : v.getList())
      a.push_back(toJson(e));
    return a;
  }
  case EvalValue::Kind::Dict: {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto &[k, e] : v.getDict())
      o[k] = toJson(e);
    return o;
  }
  default:
    return v.str();
  }
}

std::string sourceName(const BoundField::Source s) {
  switch (s) {
  case BoundField::Source::Config:
    return "config";
  case BoundField::Source::Default:
    return "default";
  case BoundField::Source::Inert:
    return "inert";
  }
  return "?";
}

/// Where the value came from, in words: "config.json /x", "default of llama",
/// "inert (config.json /x)".
std::string describe(const BoundField &f, const std::string &configName) {
  switch (f.source) {
  case BoundField::Source::Config:
    return configName + " " + f.pointer;
  case BoundField::Source::Default:
    return "default of " + (f.declaredBy.empty() ? f.arch : f.declaredBy);
  case BoundField::Source::Inert:
    return "inert, " + configName + " " + f.pointer;
  }
  return "";
}
} // namespace

void printBoundConfig(const Compilation &c, const std::string &format,
                      std::ostream &out) {
  std::string configName =
      c.config
          ? std::filesystem::path(c.sourceMgr.getName(c.config->getFileId()))
                .filename()
                .string()
          : "";
  if (format == "json") {
    nlohmann::ordered_json doc;
    doc["arch"] = c.arch->name;
    doc["config"] = configName;
    nlohmann::ordered_json fields = nlohmann::ordered_json::array();
    for (const BoundField &f : c.boundFields) {
      nlohmann::ordered_json j;
      j["arch"] = f.arch;
      j["name"] = f.name;
      j["value"] = toJson(f.value);
      j["source"] = sourceName(f.source);
      if (!f.pointer.empty())
        j["at"] = f.pointer;
      if (!f.declaredBy.empty())
        j["declared_by"] = f.declaredBy;
      fields.push_back(std::move(j));
    }
    doc["fields"] = std::move(fields);
    out << doc.dump(2) << "\n";
    return;
  }
  out << fmt::format("// {} bound to {}\n", c.arch->name, configName);
  size_t width = 5;
  for (const BoundField &f : c.boundFields)
    width = std::max(width, f.arch.size() + 1 + f.name.size());
  for (const BoundField &f : c.boundFields) {
    std::string name = f.arch == c.arch->name ? f.name : f.arch + "." + f.name;
    std::string value = toJson(f.value).dump();
    if (value.size() > 48)
      value = value.substr(0, 45) + "...";
    out << fmt::format("{:<{}}  {:<48}  {}\n", name, width, value,
                       describe(f, configName));
  }
}

} // namespace archc
