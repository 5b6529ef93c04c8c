//===- Compiler.cpp - Front half of the archc pipeline --------------------===//
//
// This file implements compileModule() and the default pipeline per emit
// target (onnx-mlir's ordered EmitTarget style).
//
//===----------------------------------------------------------------------===//
#include "driver/Compiler.h"

#include "driver/ArchCatalog.h"
#include "driver/ConfigClosure.h"
#include "frontend/BundledSnapshot.h"
#include "frontend/Program.h"
#include "frontend/Sema.h"
#include "ir/Verifier.h"
#include "irgen/ConfigBinder.h"
#include "irgen/Evaluator.h"
#include "passes/Passes.h"

#include <filesystem>
#include <iostream>

namespace archc {

std::vector<std::string> defaultPipeline(const Options &opts) {
  switch (opts.emit) {
  case EmitTarget::Config:
  case EmitTarget::Weights:
    return {};
  case EmitTarget::IR:
    return {"shape-inference"};
  case EmitTarget::Profile:
    return {"shape-inference", "kv-cache", "shape-inference"};
  case EmitTarget::Onnx:
  case EmitTarget::OnnxText:
    if (opts.kvCache)
      return {"shape-inference", "kv-cache", "shape-inference",
              "expand-repeat"};
    return {"shape-inference", "attention-mask", "shape-inference",
            "expand-repeat"};
  }
  return {};
}

static bool runPipeline(const Options &opts, Compilation &c, ir::Module &m,
                        const std::vector<std::string> &pipeline,
                        std::ostream &irOut);

bool hasDecodeState(const ir::Module &m) {
  bool found = false;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    found |= op.getKind() == ir::OpKind::Cache ||
             op.getFamily() == ir::OpFamily::Recurrent;
  });
  return found;
}

static ir::DType chooseDType(const Options &opts, const JsonSource &cfg) {
  if (!opts.dtype.empty())
    return ir::parseDType(opts.dtype);
  if (opts.emit == EmitTarget::Onnx || opts.emit == EmitTarget::OnnxText)
    return ir::DType::F32;
  const nlohmann::json &root = cfg.root();
  for (const char *key : {"torch_dtype", "dtype"}) {
    for (const nlohmann::json *obj :
         {&root,
          root.contains("text_config") ? &root["text_config"] : nullptr}) {
      if (!obj || !obj->is_object())
        continue;
      auto it = obj->find(key);
      if (it != obj->end() && it->is_string()) {
        ir::DType t = ir::parseDType(it->get<std::string>());
        if (ir::isFloat(t))
          return t;
      }
    }
  }
  return ir::DType::F32;
}

bool compileModule(const Options &opts, Compilation &c, std::ostream &irOut) {
  DiagnosticEngine &diags = *c.diags;
  std::string architecture;
  if (!opts.config.empty()) {
    c.config = JsonSource::load(opts.config, c.sourceMgr, diags);
    if (!c.config)
      return false;
    const nlohmann::json &root = c.config->root();
    auto it = root.find("architectures");
    if (it != root.end() && it->is_array() && !it->empty() &&
        (*it)[0].is_string())
      architecture = (*it)[0].get<std::string>();
  }
  // Without an .arch file, the bundled family that matches the config's
  // architectures[0] is compiled.
  std::string input = opts.input;
  if (input.empty()) {
    std::vector<std::string> known;
    input = architecture.empty() ? "" : findBundledArch(architecture, known);
    SourceRange at =
        c.config ? c.config->rangeOf("/architectures") : SourceRange();
    if (input.empty()) {
      if (architecture.empty()) {
        const nlohmann::json *given =
            c.config && c.config->root().contains("architectures")
                ? &c.config->root()["architectures"]
                : nullptr;
        if (given && !given->is_null()) {
          // Present but not Hugging Face's form: a list whose first entry
          // is the model class name.
          std::string shown = given->dump();
          if (shown.size() > 60)
            shown = shown.substr(0, 57) + "...";
          diags.error(at,
                      "config field 'architectures' must be a list of model "
                      "class names (strings), got " +
                          shown +
                          "; fix it or pass an .arch file (archc "
                          "--list-archs lists the bundled ones)");
          return false;
        }
        // No `architectures` (older or base-model configs, such as
        // microsoft/deberta-v3-base's): the one bundled family that claims
        // the config's model_type, as AutoConfig resolves it.
        const nlohmann::json *type =
            c.config && c.config->root().contains("model_type")
                ? &c.config->root()["model_type"]
                : nullptr;
        std::vector<const BundledArch *> claiming;
        std::vector<BundledArch> bundled = listBundledArchs();
        if (type && type->is_string())
          for (const BundledArch &a : bundled)
            if (std::find(a.modelTypes.begin(), a.modelTypes.end(),
                          type->get<std::string>()) != a.modelTypes.end())
              claiming.push_back(&a);
        if (claiming.size() == 1) {
          input = claiming[0]->file;
          diags.report(
              Severity::Note, c.config->rangeOf("/model_type"),
              fmt::format(
                  "the config names no architecture: "
                  "compiling '{}' ({}), the bundled family "
                  "of model_type '{}'",
                  claiming[0]->name,
                  std::filesystem::path(claiming[0]->file).filename().string(),
                  type->get<std::string>()));
        } else {
          std::string also;
          for (const BundledArch *a : claiming)
            also += (also.empty() ? "" : ", ") +
                    std::filesystem::path(a->file).filename().string();
          std::string why = "; pass an .arch file";
          if (claiming.size() > 1)
            why = "; model_type '" + type->get<std::string>() +
                  "' is claimed by " + also + ": pass one of them";
          else if (type && type->is_string())
            why = " and no bundled family claims model_type '" +
                  type->get<std::string>() + "'; pass an .arch file";
          diags.error(at, "the config names no architecture" + why +
                              " (archc --list-archs lists the bundled ones)");
          return false;
        }
      }
    }
    if (input.empty()) {
      std::string hint;
      for (const std::string &k : closestNames(architecture, known))
        hint += (hint.empty() ? "" : ", ") + ("'" + k + "'");
      diags.error(
          at, "no bundled architecture file matches '" + architecture + "'" +
                  (hint.empty() ? "" : "; did you mean " + hint + "?") +
                  " (archc --list-archs lists the " +
                  std::to_string(known.size()) +
                  " classes the bundled families match; or pass an .arch "
                  "file)");
      return false;
    }
  }
  if (!opts.astSnapshot || opts.traceAstSnapshot) {
    std::string status = "disabled (--no-ast-snapshot)";
    const AstSnapshot *snapshot =
        opts.astSnapshot ? bundledAstSnapshot(&status) : nullptr;
    std::ostream *trace = opts.traceAstSnapshot ? &std::cerr : nullptr;
    if (trace)
      *trace << "archc: ast-snapshot: " << status << "\n";
    c.program.setAstSnapshot(snapshot, trace);
  }
  if (!c.program.load(input, opts.includeDirs, c.sourceMgr, diags))
    return false;
  // A file of defs only (a library) gets its static checks.
  if (c.program.getMainFile().archs.empty()) {
    if (!runSema(c.program, nullptr, diags))
      return false;
    if (opts.verifyDiagnostics && !c.config)
      return true;
  }
  c.arch = c.program.selectArch(architecture, diags);
  if (!c.arch)
    return false;
  if (!runSema(c.program, c.arch, diags))
    return false;
  // -emit=config without a config: the family's config schema.
  if (!c.config && opts.emit == EmitTarget::Config)
    return true;
  if (!c.config) {
    diags.error(SourceRange(), "--config <config.json> is required to go "
                               "past semantic checks");
    return false;
  }
  // Binding goes on after a refused claim, so that the fields the family
  // does not know are named too (a MiniCPM config given to llama.arch).
  bool claimed =
      checkConfigClaims(*c.arch, *c.config, opts, *c.configUse, diags);

  // The main graph, then each named graph of a package, each its own module
  // with its own pass pipeline.
  std::vector<const ast::ModelDecl *> models = {c.arch->effectiveModel};
  models.insert(models.end(), c.arch->allGraphs.begin(),
                c.arch->allGraphs.end());
  for (const ast::ModelDecl *model : models) {
    auto mod = std::make_unique<ir::Module>();
    ir::Module &m = *mod;
    m.name = c.arch->name;
    m.sourceFile = std::filesystem::path(input).filename().string();
    m.configFile = std::filesystem::path(opts.config).filename().string();
    m.activationDType = chooseDType(opts, *c.config);
    Evaluator eval(c.program, diags, m);
    // Named graphs bind the same config again: the fields are logged once.
    const JsonSource *source = c.config.get();
    c.configUse->locate = [source](const std::string &pointer) {
      return source->rangeOf(pointer);
    };
    BindLog log{c.configUse,
                model == models.front() ? &c.boundFields : nullptr};
    std::shared_ptr<Env> cfgEnv =
        bindConfig(*c.arch, *c.config, eval, diags, c.program, log);
    if (!cfgEnv)
      return false;
    for (auto &[name, value] : cfgEnv->locals()) {
      ir::Attr a;
      if (Evaluator::toAttr(value, a))
        m.info[name] = a;
    }
    if (!eval.buildModel(*c.arch, cfgEnv, model))
      return false;
    if (!ir::verifyModule(m, diags))
      return false;
    std::vector<std::string> pipeline =
        opts.passes ? *opts.passes : defaultPipeline(opts);
    // A named graph without decode-time state (a vision encoder, an
    // embedding) gets no state I/O and no padding mask.
    if (!opts.passes && !model->name.empty() && !hasDecodeState(m))
      std::erase_if(pipeline, [](const std::string &p) {
        return p == "kv-cache" || p == "attention-mask";
      });
    // A package's graphs compute part of what the arch declares (a vision
    // tower up to its feature layer): what they do not use is removed, the
    // weights stay declared.
    if (!opts.passes && !model->name.empty() && !pipeline.empty())
      pipeline.insert(pipeline.begin(), "dead-code");
    if (!runPipeline(opts, c, m, pipeline, irOut))
      return false;
    if (model->name.empty())
      c.module = std::move(mod);
    else
      c.graphs.push_back({model->name, std::move(mod)});
  }
  // Every graph is evaluated: the keys of config dicts the code read are
  // known, and what is left was not honoured.
  return checkConfigUsed(*c.arch, *c.config, opts, *c.configUse, diags) &&
         claimed;
}

static bool runPipeline(const Options &opts, Compilation &c, ir::Module &m,
                        const std::vector<std::string> &pipeline,
                        std::ostream &irOut) {
  DiagnosticEngine &diags = *c.diags;
  PassManager pm;
  pm.setVerifyEach(opts.verifyEach);
  if (!opts.printIRAfter.empty())
    pm.setPrintIRAfter({opts.printIRAfter.begin(), opts.printIRAfter.end()},
                       &irOut, opts.printLoc);
  for (const std::string &name : pipeline) {
    const PassInfo *info = lookupPass(name);
    if (!info) {
      std::string known;
      for (const PassInfo &p : passRegistry())
        known += (known.empty() ? "" : ", ") + p.name;
      diags.error(SourceRange(),
                  "unknown pass '" + name + "' (known: " + known + ")");
      return false;
    }
    pm.addPass(info->create());
  }
  PassContext ctx{diags, c.sourceMgr};
  return pm.run(m, ctx);
}

} // namespace archc
