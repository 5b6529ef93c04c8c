//===- ClientIo.h - Graph I/O as a client runtime names it ------*- C++ -*-===//
//
// This file declares the I/O conventions of the runtimes that load archc's
// models. archc's graph names follow onnxruntime-genai (docs/onnx.md); a
// model folder's onnx/model.onnx follows transformers.js 4.3.1, which
// creates and feeds the cache inputs by name (getCacheNames in its
// configs.js) and builds Qwen-VL-family position ids as [3, batch, seq]:
//
//   key / value                    unchanged
//   Gated DeltaNet conv_state      past_conv.{i} / present_conv.{i}
//   Gated DeltaNet recurrent_state past_recurrent.{i} / present_recurrent.{i}
//   LFM2 conv_state                past_conv.{i} / present_conv.{i}
//   Mamba-2 conv_state / ssm_state past_conv.{i} / past_ssm.{i} (present_*)
//   (Granite-4, Falcon-H1, Nemotron-H)
//   MLA compressed_kv / k_pe       past_key_values.{i}.key / .value
//   DeepSeek-V4 kv                 past_key_values.{i}.key
//   DeepSeek-V4 compressed_kv      past_key_values.{i}.value (CSA layers:
//   [+ index_kv]                   both concatenated on the last axis)
//   DeepSeek-V4 compressed_kv_state past_compressor.{i}.kv | .gate (halves)
//   DeepSeek-V4 index_kv_state     past_indexer.{i}.kv | .gate (halves)
//   key / value of a `multi_query` past_key_values.{i}.key_value: one tensor
//   config (Falcon)                [batch, kv_heads, past, dk + dv], split
//                                  in the graph
//   position_ids (Qwen-VL family)  [3, batch, seq], taken; the graph's text
//                                  positions come from attention_mask
//
// Where the client has no name for a state or no class for the model type,
// the model is reported as one the client cannot run, with the reason.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_CLIENTIO_H
#define ARCHC_EMIT_CLIENTIO_H

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace archc {

/// State tensors that the client holds in another grouping than the graph:
/// the concatenation along the last axis of `client` (the client's names,
/// in order) equals that of `graph` (the graph's). The graph takes the
/// client's past tensors and gives the client's present ones (Concat, then
/// Split where both sides have several).
struct RegroupedState {
  std::vector<std::string> graphPast, graphPresent;
  std::vector<std::string> clientPast, clientPresent;
};

/// A client's view of one graph's I/O.
struct ClientIo {
  bool runs = true;   ///< whether the client can run the graph at all
  std::string whyNot; ///< why not, when !runs
  /// Graph input/output name -> the client's name (only those that differ).
  std::map<std::string, std::string> rename;
  bool positionIds3d = false; ///< position_ids as [3, batch, seq]
  /// Layers whose key and value are one `key_value` state for the client.
  std::set<std::string> fusedKeyValue;
  /// States the client splits or joins (DeepSeek-V4's compressor windows).
  std::vector<RegroupedState> regrouped;
  /// Whether applying this changes the graph.
  bool changesGraph() const {
    return !rename.empty() || positionIds3d || !fusedKeyValue.empty() ||
           !regrouped.empty();
  }
};

/// Whether transformers.js 4.3.1's AutoModelForCausalLM has a class for
/// `modelType` (its MODEL_FOR_CAUSAL_LM_MAPPING_NAMES).
bool transformersJsKnowsModelType(const std::string &modelType);

/// transformers.js 4.3.1's view of `graph` for a config of `modelType`;
/// `multiQuery`: the config's `multi_query` is true (transformers.js then
/// names one `key_value` cache per layer, whatever the model type).
ClientIo transformersJsIo(const onnx::GraphProto &graph,
                          const std::string &modelType,
                          bool multiQuery = false);

/// Renames the graph's I/O (and every use), fuses key/value states and
/// adapts position_ids.
void applyClientIo(onnx::GraphProto &graph, const ClientIo &io);

} // namespace archc

#endif // ARCHC_EMIT_CLIENTIO_H
