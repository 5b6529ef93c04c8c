//===- Package.cpp - Several-graph packages in the driver -----------------===//
//
// This file implements the union of a package's weights and the call into
// the ONNX back end's package entry point.
//
//===----------------------------------------------------------------------===//
#include "driver/Package.h"

#include "driver/OnnxLoader.h"
#include "emit/package/VlmPackage.h"

#include <set>

namespace archc {

std::unique_ptr<ir::Module> packageWeights(const Compilation &c) {
  auto all = std::make_unique<ir::Module>();
  all->name = c.module->name;
  std::set<std::string> seen;
  std::vector<const ir::Module *> modules = {c.module.get()};
  for (const NamedGraph &g : c.graphs)
    modules.push_back(g.module.get());
  for (const ir::Module *m : modules)
    for (const ir::WeightDecl &w : m->weights) {
      std::vector<int64_t> layers =
          w.layers.empty() ? std::vector<int64_t>{-1} : w.layers;
      for (int64_t layer : layers)
        for (int64_t e = 0; e < std::max<int64_t>(w.experts, 1); ++e) {
          std::string name = w.instantiate(layer, w.experts ? e : -1);
          if (!seen.insert(name).second)
            continue;
          ir::WeightDecl one;
          one.pattern = name;
          one.type = w.type;
          one.buffer = w.buffer;
          one.loc = w.loc;
          all->weights.push_back(std::move(one));
        }
    }
  return all;
}

bool runOnnxPackageBackend(const Compilation &c, const OnnxEmitOptions &opts,
                           DiagnosticEngine &diags, std::ostream &out) {
  using EntryFn =
      bool (*)(const PackageGraph *, size_t, const OnnxEmitOptions *,
               DiagnosticEngine *, std::ostream *);
  auto fn = reinterpret_cast<EntryFn>(
      onnxBackendSymbol("archc_emit_onnx_package", diags));
  if (!fn)
    return false;
  std::vector<PackageGraph> graphs;
  for (const NamedGraph &g : c.graphs)
    graphs.push_back({g.name, g.module.get()});
  return fn(graphs.data(), graphs.size(), &opts, &diags, &out);
}

} // namespace archc
