//===- ConfigReport.cpp - -emit=config ------------------------------------===//
#include "driver/ConfigReport.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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
    // JSON has no infinity or NaN: written as config.json writes them.
    if (std::isinf(v.getNumber()))
      return v.getNumber() > 0 ? "Infinity" : "-Infinity";
    if (std::isnan(v.getNumber()))
      return "NaN";
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
/// The source text of `r` (an expression of an .arch file), on one line.
std::string rangeText(const SourceMgr &sm, SourceRange r) {
  if (!r.isValid() || r.end.fileId != r.begin.fileId)
    return "";
  std::string out;
  for (uint32_t line = r.begin.line; line <= r.end.line; ++line) {
    std::string_view text = sm.getLine(r.begin.fileId, line);
    size_t from = line == r.begin.line ? r.begin.col - 1 : 0;
    size_t to = line == r.end.line ? r.end.col - 1 : text.size();
    from = std::min(from, text.size());
    to = std::clamp(to, from, text.size());
    std::string part(text.substr(from, to - from));
    if (line != r.begin.line) {
      size_t first = part.find_first_not_of(' ');
      part = " " + (first == std::string::npos ? "" : part.substr(first));
    }
    out += part;
  }
  return out;
}

/// The arch whose own config block holds `entry`.
const ast::ArchDecl *ownerArch(const Program &program,
                               const ast::ConfigEntry *entry) {
  for (const auto &f : program.getFiles())
    for (const auto &a : f->archs)
      for (const ast::ConfigEntry &e : a->config)
        if (&e == entry)
          return a.get();
  return nullptr;
}

/// The archs `arch` uses, transitively (pretrained, a text model).
void collectUsed(const Program &program, const ast::ArchDecl &arch,
                 std::vector<const ast::ArchDecl *> &out) {
  for (const ast::UseDecl *u : arch.allUses)
    if (const ast::ArchDecl *used = program.findArch(u->arch))
      if (std::find(out.begin(), out.end(), used) == out.end()) {
        out.push_back(used);
        collectUsed(program, *used, out);
      }
}
} // namespace

void printConfigSchema(const Compilation &c, const std::string &format,
                       std::ostream &out) {
  const ast::ArchDecl &arch = *c.arch;
  nlohmann::ordered_json doc;
  doc["arch"] = arch.name;
  doc["file"] =
      std::filesystem::path(c.sourceMgr.getName(arch.nameRange.begin.fileId))
          .filename()
          .string();
  doc["extends"] = arch.base;
  doc["model_types"] = arch.modelTypes;
  doc["matches"] = arch.matches;
  nlohmann::ordered_json fields = nlohmann::ordered_json::array();
  nlohmann::ordered_json refused = nlohmann::ordered_json::array();
  for (const ast::ConfigEntry *e : arch.allConfig) {
    const ast::ArchDecl *owner = ownerArch(c.program, e);
    if (e->kind == ast::ConfigEntry::Kind::Field) {
      nlohmann::ordered_json f;
      f["name"] = e->name;
      f["type"] = e->type ? e->type->str() : "";
      if (arch.defaultsNotInherited.count(e->name))
        f["default"] = nullptr;
      else if (e->value)
        f["default"] = rangeText(c.sourceMgr, e->value->getRange());
      else
        f["default"] = e->type && e->type->optional
                           ? nlohmann::ordered_json("none")
                           : nlohmann::ordered_json(nullptr);
      f["aliases"] = e->aliases;
      f["declared_by"] = owner ? owner->name : "";
      fields.push_back(std::move(f));
    } else if (e->kind == ast::ConfigEntry::Kind::Check) {
      nlohmann::ordered_json r;
      r["message"] = e->message ? *e->message : "config check failed";
      r["condition"] = rangeText(c.sourceMgr, e->value->getRange());
      r["declared_by"] = owner ? owner->name : "";
      refused.push_back(std::move(r));
    }
  }
  doc["fields"] = std::move(fields);
  std::vector<const ast::ArchDecl *> used;
  collectUsed(c.program, arch, used);
  doc["inert"] = arch.allInert;
  nlohmann::ordered_json uses = nlohmann::ordered_json::object();
  for (const ast::ArchDecl *u : used)
    uses[u->name] = u->allInert;
  // The archs it uses and their inert keys (pretrained: PreTrainedConfig's).
  doc["uses"] = std::move(uses);
  doc["refused"] = std::move(refused);
  if (format == "json") {
    out << doc.dump(2) << "\n";
    return;
  }
  out << fmt::format("// {} ({}): model types {}, classes {}\n", arch.name,
                     doc["file"].get<std::string>(),
                     nlohmann::json(arch.modelTypes).dump(),
                     nlohmann::json(arch.matches).dump());
  for (const auto &f : doc["fields"])
    out << fmt::format(
        "field  {:<32} {:<14} = {}  ({})\n", f["name"].get<std::string>(),
        f["type"].get<std::string>(),
        f["default"].is_null() ? "<required>" : f["default"].get<std::string>(),
        f["declared_by"].get<std::string>());
  for (const auto &n : doc["inert"])
    out << "inert  " << n.get<std::string>() << "\n";
  for (const auto &[name, keys] : doc["uses"].items())
    out << fmt::format("uses   {} ({} inert keys)\n", name, keys.size());
  for (const auto &r : doc["refused"])
    out << "check  " << r["message"].get<std::string>() << "\n";
}

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
