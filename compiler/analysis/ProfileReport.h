//===- ProfileReport.h - -emit=profile ---------------------------*- C++
//-*-===//
//
// This file declares the profile back end: it evaluates the profile at every
// requested point (batch x prompt length x past), projects latency on every
// requested device, builds one JSON document holding every number, and
// renders it as a terminal table, JSON, CSV or Markdown. The JSON schema is
// documented in docs/profile.md.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_ANALYSIS_PROFILEREPORT_H
#define ARCHC_ANALYSIS_PROFILEREPORT_H

#include "analysis/DeviceDb.h"
#include "ir/IR.h"
#include "ir/WeightQuant.h"

#include <nlohmann/json.hpp>

#include <ostream>

namespace archc {

struct ProfileRequest {
  std::vector<int64_t> batches = {1};
  std::vector<int64_t> seqs = {2048};
  std::vector<int64_t> pasts; ///< decode pasts; empty = each seq
  std::vector<std::string> devices;
  std::string runtime;
  std::string format = "table"; ///< table | json | csv | md
  bool perOp = false;
  std::string profileDir;
  /// A vision-language model's vision encoder graph: its parameters, cost
  /// per image and the TTFT of prompts with `images` images.
  const ir::Module *vision = nullptr;
  int64_t images = 1;
  /// --quant: weights counted as the ONNX writer stores them.
  ir::QuantOptions quant;
  /// -emit=profile --weights: bytes each weight declaration occupies in the
  /// checkpoint (ir::weightKey -> bytes), and a description of its format.
  const std::map<std::string, double> *checkpointBytes = nullptr;
  std::string checkpointFormat;
};

/// Computes the profile as JSON. Reports and returns false on error
/// (unknown device, bad YAML, a device without the compute dtype).
bool computeProfile(const ir::Module &m, const ProfileRequest &req,
                    SourceMgr &sm, DiagnosticEngine &diags,
                    nlohmann::ordered_json &out);

/// Renders the JSON profile in the requested format.
void renderProfile(const nlohmann::ordered_json &profile,
                   const std::string &format, bool perOp, std::ostream &os);

} // namespace archc

#endif // ARCHC_ANALYSIS_PROFILEREPORT_H
