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

/// The most per-op entries --per-op may hold: ops x phases (a prefill and
/// each decode past) x points x devices; each is a JSON object of about
/// 2 KB, held until the report is rendered (docs/limits.md).
constexpr uint64_t kMaxProfileOpEntries = 131072;

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
  /// An encoder-decoder package's graphs (T5, BART, Marian, Whisper): the
  /// profile is then the encoder once per sequence (per 30 s window of
  /// audio for Whisper) and the decoder per token, with self- and
  /// cross-attention cache bytes; the main module counts the parameters.
  const ir::Module *encoder = nullptr;
  const ir::Module *decoder = nullptr;
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
