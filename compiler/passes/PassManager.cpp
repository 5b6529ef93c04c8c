//===- PassManager.cpp - Running pipelines --------------------------------===//
//
// This file implements the PassManager and the pass registry.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"

namespace archc {

bool PassManager::run(ir::Module &m, PassContext &ctx) {
  for (auto &p : passes) {
    unsigned before = ctx.diags.getNumErrors();
    bool ok = p->run(m, ctx);
    if (!ok || ctx.diags.getNumErrors() != before) {
      if (ctx.diags.getNumErrors() == before)
        ctx.diags.error(SourceRange(),
                        "pass '" + std::string(p->getArgument()) + "' failed");
      return false;
    }
    if (verifyEach && !ir::verifyModule(m, ctx.diags))
      return false;
    if (printStream && (printAfter.count(std::string(p->getArgument())) ||
                        printAfter.count("all"))) {
      *printStream << "// -----// IR after " << p->getArgument()
                   << " //----- //\n";
      ir::PrintOptions opts;
      opts.printLocations = printLoc;
      opts.sourceMgr = &ctx.sourceMgr;
      ir::printModule(m, *printStream, opts);
    }
  }
  return true;
}

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> registry = {
      {"shape-inference", "infer dtypes and symbolic shapes",
       createShapeInferencePass},
      {"kv-cache", "add past/present state I/O and the attention mask",
       createKVCachePass},
      {"attention-mask", "add the padding attention mask (no cache)",
       createAttentionMaskPass},
      {"expand-repeat", "unroll layer loops with concrete weight names",
       createExpandRepeatPass},
      {"dead-code", "remove ops whose results are unused", createDeadCodePass},
  };
  return registry;
}

const PassInfo *lookupPass(const std::string &name) {
  for (const PassInfo &p : passRegistry())
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace archc
