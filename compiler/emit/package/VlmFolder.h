//===- VlmFolder.h - transformers.js's side of a VLM folder -----*- C++ -*-===//
//
// This file declares what makes a vision-language package one model folder
// for both of its clients: the file names transformers.js 4.3.1's
// image-text-to-text classes load (onnx/vision_encoder*.onnx,
// onnx/embed_tokens*.onnx, onnx/decoder_model_merged*.onnx), which
// onnxruntime-genai's genai_config.json names too; the default that lets
// transformers.js call the embedding graph with input_ids alone while
// onnxruntime-genai feeds it the image features; and the decoder inputs
// transformers.js never feeds.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_VLMFOLDER_H
#define ARCHC_EMIT_VLMFOLDER_H

#include "ir/IR.h"
#include "support/Diagnostics.h"

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace archc {

/// transformers.js 4.3.1's session name of a package graph, the stem of its
/// file in OUT/onnx/: vision_encoder, embed_tokens (the embedding graph),
/// decoder_model_merged (the decoder); another graph keeps its name.
std::string vlmSessionName(const std::string &graph);

/// The file of a package graph in OUT/onnx/ for the activation dtype:
/// the session name with folderModelFile's dtype suffix
/// (vision_encoder.onnx, embed_tokens_fp16.onnx, ...).
std::string vlmModelFile(const std::string &graph, ir::DType dtype);

/// Writes config.json's transformers.js_config.dtype of a vision-language
/// folder as one entry per session of `graphs` (vision_encoder,
/// embed_tokens, decoder_model_merged): `dtype`, the transformers.js dtype
/// of this run's files, so that from_pretrained(OUT) without options loads
/// them; where this run's files have none (bf16), the entries of
/// `previous` (the folder's earlier config.json), else none.
void setSessionDtypes(nlohmann::json &config, const nlohmann::json &previous,
                      const std::string &dtype,
                      const std::vector<std::string> &graphs);

/// Gives the graph input `name` a default: an initializer of its element
/// type with zero rows (first dimension 0, the others as declared). ONNX
/// Runtime then no longer lists it among the session's inputs, so a
/// client that does not feed it (transformers.js, which calls embed_tokens
/// with input_ids alone and merges the image features itself) gets the
/// zero rows, and one that feeds it (onnxruntime-genai) overrides them.
/// False when the graph has no such input or a later dimension is not a
/// constant.
bool giveZeroRowDefault(onnx::GraphProto &graph, const std::string &name);

/// Makes every half-precision (float16 / bfloat16) input of the graph a
/// float32 input cast to its type first: a half-precision vision encoder
/// takes the pixel values image processors give (float32:
/// transformers.js's, Hugging Face's) and passes no conversion to its
/// caller. Returns the inputs changed.
std::vector<std::string> takeFloat32Inputs(onnx::GraphProto &graph);

/// The client contracts of the package graph `graph` once its weights are
/// placed: the vision encoder takes float32 inputs (takeFloat32Inputs),
/// the embedding's image_features get their zero-row default
/// (giveZeroRowDefault). An embedding without that input is an internal
/// error, reported.
bool adaptForClients(const std::string &graph, onnx::GraphProto &g,
                     DiagnosticEngine &diags);

/// The decoder inputs transformers.js 4.3.1's image-text-to-text forward
/// never feeds: it passes decoder_model_merged only inputs_embeds,
/// attention_mask, position_ids and the past_key_values.* cache (what else
/// a family's decoder needs travels in side channels of inputs_embeds:
/// Gemma 3's image marker, Qwen3-VL's deepstack features). Empty when it
/// feeds everything the decoder reads.
std::vector<std::string>
transformersJsUnfedDecoderInputs(const ir::Module &decoder);

} // namespace archc

#endif // ARCHC_EMIT_VLMFOLDER_H
