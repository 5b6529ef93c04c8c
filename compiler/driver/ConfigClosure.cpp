//===- ConfigClosure.cpp - Closed-world config binding --------------------===//
#include "driver/ConfigClosure.h"

#include <fmt/format.h>

#include <algorithm>

namespace archc {

namespace {
std::string joinQuoted(const std::vector<std::string> &items) {
  std::string out;
  for (const std::string &s : items)
    out += (out.empty() ? "'" : ", '") + s + "'";
  return out;
}

/// A JSON pointer as the dotted key path users write ("text_config.x").
std::string dotted(const std::string &pointer) {
  std::string out = pointer.substr(1);
  std::replace(out.begin(), out.end(), '/', '.');
  return out;
}
} // namespace

bool checkConfigClaims(const ast::ArchDecl &arch, const JsonSource &config,
                       const Options &opts, ConfigUse &use,
                       DiagnosticEngine &diags) {
  const nlohmann::json &root = config.root();
  Severity severity = opts.archOverride ? Severity::Warning : Severity::Error;
  const char *hint =
      "--arch-override compiles it as this family anyway (its fields are "
      "still checked)";
  bool ok = true;
  auto mt = root.find("model_type");
  if (mt != root.end() && mt->is_string() && !arch.modelTypes.empty() &&
      std::find(arch.modelTypes.begin(), arch.modelTypes.end(),
                mt->get<std::string>()) == arch.modelTypes.end()) {
    Diagnostic &d = diags.report(
        severity, config.rangeOf("/model_type"),
        fmt::format("model_type '{}' is not a model type of '{}' ({})",
                    mt->get<std::string>(), arch.name,
                    joinQuoted(arch.modelTypes)));
    d.notes.push_back({arch.modelTypesRange, "claimed here"});
    d.notes.push_back({SourceRange(), hint});
    ok = !opts.archOverride ? false : ok;
  }
  auto archs = root.find("architectures");
  if (archs != root.end() && archs->is_array() && !archs->empty() &&
      (*archs)[0].is_string() && !arch.matches.empty()) {
    std::string cls = (*archs)[0].get<std::string>();
    if (std::find(arch.matches.begin(), arch.matches.end(), cls) ==
        arch.matches.end()) {
      Diagnostic &d = diags.report(
          severity, config.rangeOf("/architectures"),
          fmt::format("config architecture '{}' is not one of '{}''s ({})", cls,
                      arch.name, joinQuoted(arch.matches)));
      d.notes.push_back({arch.nameRange, "arch declared here"});
      d.notes.push_back({SourceRange(), hint});
      ok = !opts.archOverride ? false : ok;
    }
  }
  // What the driver reads itself: the checks above, and the checkpoint's
  // own quantization (read by the checkpoint reader when weights are bound).
  for (const char *key :
       {"model_type", "architectures", "quantization_config", "expert_dtype"}) {
    use.consume(std::string("/") + key);
    use.consume(std::string("/text_config/") + key);
  }
  return ok;
}

bool checkConfigUsed(const ast::ArchDecl &arch, const JsonSource &config,
                     const Options &opts, const ConfigUse &use,
                     DiagnosticEngine &diags) {
  std::vector<std::string> unused = use.unused(config.root());
  // In the file's order, so the first error is the first offending line.
  std::stable_sort(unused.begin(), unused.end(),
                   [&](const std::string &a, const std::string &b) {
                     return config.rangeOf(a).begin < config.rangeOf(b).begin;
                   });
  Severity severity =
      opts.allowUnknownConfig ? Severity::Warning : Severity::Error;
  const auto &root = config.root();
  std::string modelType =
      root.contains("model_type") && root["model_type"].is_string()
          ? " (model_type '" + root["model_type"].get<std::string>() + "')"
          : "";
  for (const std::string &pointer : unused) {
    Diagnostic &d = diags.report(
        severity, config.rangeOf(pointer),
        fmt::format("config field '{}' is not a field of '{}'{}: archc "
                    "neither implements it nor knows it to be inert",
                    dotted(pointer), arch.name, modelType));
    if (!opts.allowUnknownConfig && pointer == unused.front()) {
      d.notes.push_back({arch.nameRange, "family declared here"});
      d.notes.push_back({SourceRange(),
                         "--allow-unknown-config turns this into a warning "
                         "for fields known not to change the model"});
    }
  }
  return opts.allowUnknownConfig || unused.empty();
}

} // namespace archc
