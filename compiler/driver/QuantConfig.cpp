//===- QuantConfig.cpp - Quantization settings of a compilation -----------===//
//
// This file implements the reading of `quantization_config` and the
// checkpoint byte count of -emit=profile --weights.
//
//===----------------------------------------------------------------------===//
#include "driver/QuantConfig.h"

#include "checkpoint/QuantizedCheckpoint.h"

#include <fmt/format.h>

namespace archc {

ir::QuantOptions quantOptions(const Options &opts) {
  ir::QuantOptions q;
  q.bits = opts.quantBits;
  q.block = opts.quantBlock;
  q.symmetric = !opts.quantAsymmetric;
  q.embeddings = opts.quantEmbeddings;
  q.accuracyLevel = opts.quantAccuracy;
  q.unrollExperts = opts.quantUnrollExperts;
  q.qmoeInt4 = opts.quantQmoe;
  q.readerOptionsGiven = opts.quantReaderOptionSeen;
  return q;
}

bool readCheckpointQuant(const JsonSource &config, DiagnosticEngine &diags,
                         ir::CheckpointQuant &out) {
  const nlohmann::json &root = config.root();
  std::string at = "/quantization_config";
  const nlohmann::json *qc = nullptr;
  if (root.contains("quantization_config")) {
    qc = &root["quantization_config"];
  } else if (root.contains("text_config") && root["text_config"].is_object() &&
             root["text_config"].contains("quantization_config")) {
    qc = &root["text_config"]["quantization_config"];
    at = "/text_config/quantization_config";
  }
  out = ir::CheckpointQuant();
  if (!qc || qc->is_null())
    return true;
  auto fail = [&](const std::string &pointer, const std::string &msg) {
    diags.error(config.rangeOf(pointer), msg);
    return false;
  };
  if (!qc->is_object())
    return fail(at, "quantization_config must be an object");
  if (!qc->contains("quant_method") || !(*qc)["quant_method"].is_string())
    return fail(at, "quantization_config has no quant_method");
  std::string method = (*qc)["quant_method"].get<std::string>();
  if (method == "gptq" || method == "awq" || method == "compressed-tensors") {
    if (!readPrequantConfig(config, diags, *qc, at, method, out))
      return false;
  } else if (method == "fp8") {
    out.method = ir::CheckpointQuant::Method::FP8;
    if (qc->contains("fmt")) {
      const auto &f = (*qc)["fmt"];
      if (!f.is_string() || f.get<std::string>() != "e4m3")
        return fail(at + "/fmt", fmt::format("fp8 fmt {} is not supported "
                                             "(the releases use e4m3)",
                                             f.dump()));
    }
    const nlohmann::json *bs = qc->contains("weight_block_size")
                                   ? &(*qc)["weight_block_size"]
                                   : nullptr;
    if (!bs || bs->is_null())
      return fail(at, "fp8 without weight_block_size (one scale per tensor) "
                      "is not supported; the fine-grained releases give "
                      "[128, 128]");
    if (!bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
        !(*bs)[1].is_number_integer() || (*bs)[0].get<int64_t>() <= 0 ||
        (*bs)[1].get<int64_t>() <= 0)
      return fail(at + "/weight_block_size",
                  "weight_block_size must be two positive integers");
    out.blockRows = (*bs)[0].get<int64_t>();
    out.blockCols = (*bs)[1].get<int64_t>();
    if (qc->contains("scale_fmt") && !(*qc)["scale_fmt"].is_null()) {
      const auto &f = (*qc)["scale_fmt"];
      if (!f.is_string() || f.get<std::string>() != "ue8m0")
        return fail(
            at + "/scale_fmt",
            fmt::format("scale_fmt {} is not supported (ue8m0)", f.dump()));
      out.ue8m0 = true;
    }
    if (!checkReleaseConfigKeys(config, diags, *qc, at, method))
      return false;
  } else if (method == "mxfp4") {
    out.method = ir::CheckpointQuant::Method::MXFP4;
    if (!checkReleaseConfigKeys(config, diags, *qc, at, method))
      return false;
  } else {
    return fail(at + "/quant_method",
                fmt::format("quantization_config.quant_method '{}' is not "
                            "supported (supported: gptq, awq, "
                            "compressed-tensors, fp8, mxfp4); bind a "
                            "dequantised bf16/f16/f32 checkpoint",
                            method));
  }
  if (root.contains("expert_dtype") && !root["expert_dtype"].is_null()) {
    const auto &e = root["expert_dtype"];
    std::string v = e.is_string() ? e.get<std::string>() : e.dump();
    if (v == "fp4")
      out.fp4Experts = true;
    else if (v != "fp8" && v != "bf16")
      return fail(
          "/expert_dtype",
          fmt::format("expert_dtype '{}' is not supported (fp4, fp8)", v));
  }
  return true;
}

bool checkpointBytes(const ir::Module &m, const std::string &path,
                     const ir::CheckpointQuant &quant, DiagnosticEngine &diags,
                     std::map<std::string, double> &bytesByPattern) {
  Checkpoint ckpt;
  if (!ckpt.open(path, diags))
    return false;
  std::set<std::string> inOut;
  for (const ir::LinearWeightUse &u : ir::findLinearWeightUses(m))
    if (u.slice && u.inOut)
      inOut.insert(u.param->attr<std::string>("name"));
  CheckpointBinder binder(ckpt, quant);
  std::vector<int64_t> shape;
  for (const ir::WeightDecl &w : m.weights) {
    shape.clear();
    for (const ir::SymExpr &d : w.type.dims)
      shape.push_back(d.getConstant().value_or(0));
    std::vector<int64_t> layers =
        w.layers.empty() ? std::vector<int64_t>{-1} : w.layers;
    double bytes = 0;
    for (int64_t l : layers)
      for (int64_t e = 0; e < std::max<int64_t>(w.experts, 1); ++e) {
        std::string name = w.instantiate(l, w.experts ? e : -1);
        if (const StoredTensor *t =
                binder.bind(name, shape, ir::isFloat(w.type.dtype),
                            inOut.count(w.pattern) > 0))
          bytes += static_cast<double>(t->storedBytes());
      }
    bytesByPattern[ir::weightKey(w.pattern, w.type)] = bytes;
  }
  return binder.report(diags, path);
}

} // namespace archc
