//===- Seq2SeqPackage.h - Encoder-decoder model folders ---------*- C++ -*-===//
//
// This file declares the emission of an encoder-decoder package (an arch
// whose named graphs are `encoder` and `decoder`: T5, BART, mBART, Marian,
// Whisper) as the model folder transformers.js and Optimum load:
// OUT/onnx/encoder_model.onnx and OUT/onnx/decoder_model_merged.onnx (one
// decoder graph for the first step and the cached ones, use_cache_branch
// selecting the cross-attention state), the dtype and quantization
// variants under transformers.js's suffixes (_fp16, _q4, _q4f16, _int8),
// config.json with the fields transformers.js names the cache from,
// generation_config.json, the tokenizer and the feature extractor's
// preprocessor_config.json.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_SEQ2SEQPACKAGE_H
#define ARCHC_EMIT_SEQ2SEQPACKAGE_H

#include "emit/package/VlmPackage.h"

namespace archc {

/// Whether the package is an encoder-decoder's (graphs `encoder` and
/// `decoder`).
bool isSeq2SeqPackage(const std::vector<PackageGraph> &graphs);

/// Emits the encoder-decoder package into the folder `opts.output` (or,
/// with opts.text, prints both graphs as ONNX text).
bool emitSeq2SeqPackage(const std::vector<PackageGraph> &graphs,
                        const OnnxEmitOptions &opts, DiagnosticEngine &diags,
                        std::ostream &out);

/// The model file of graph `stem` (encoder_model, decoder_model_merged) for
/// the activation dtype and quantization: transformers.js's suffixes, as
/// folderModelFile names model.onnx's variants.
std::string seq2seqModelFile(const std::string &stem, ir::DType dtype,
                             const ir::QuantOptions &quant);

/// OUT/config.json's additions for transformers.js: is_encoder_decoder and
/// the fields it names the cache from (T5's num_layers, num_decoder_layers,
/// num_heads, d_kv; BART's, Marian's and Whisper's encoder_layers,
/// decoder_layers, encoder_attention_heads, decoder_attention_heads,
/// d_model) where config.json lacks them, from the values the decoder
/// graph bound.
void addSeq2SeqClientFields(nlohmann::json &config, const ir::Module &decoder);

} // namespace archc

#endif // ARCHC_EMIT_SEQ2SEQPACKAGE_H
