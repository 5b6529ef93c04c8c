//===- ModelFolder.h - The side files of a model folder ---------*- C++ -*-===//
//
// This file declares what a model folder (`-o OUT/`) holds beside its ONNX
// graphs: the model file names of transformers.js's dtypes, OUT/config.json
// (the input config plus what clients need: layer_types derived from the
// graph where the input lacks them, transformers.js's external-data chunk
// counts), OUT/generation_config.json, and the tokenizer files copied from
// the input folder.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_MODELFOLDER_H
#define ARCHC_EMIT_MODELFOLDER_H

#include "ir/IR.h"
#include "ir/WeightQuant.h"
#include "support/Diagnostics.h"
#include "support/OutputSet.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace archc {

/// The file name of the model inside OUT/onnx/ for the activation dtype
/// and the weights' quantization tag (`--quant`'s or a quantized
/// checkpoint's codes', WeightStorage::fileTag), after transformers.js 4.3.1's
/// dtype suffixes: model.onnx (fp32), model_fp16.onnx, model_q4.onnx,
/// model_q4f16.onnx, model_int8.onnx (8-bit MatMulNBits weights, f32
/// activations). Combinations without a transformers.js dtype are named by
/// the same rule so that they never overwrite another variant:
/// model_bf16.onnx, model_int8f16.onnx, model_q4bf16.onnx,
/// model_int8bf16.onnx (ir::quantFileTag).
std::string folderModelFile(ir::DType dtype, const std::string &quantTag = "");

/// The summary line's list of a package's model files, in the given order
/// ("onnx/encoder_model.onnx (+ 1 external data file), ..."): each
/// relative path with the count of external data files `chunks` holds for
/// its file name.
std::string describeModelFiles(const std::vector<std::string> &rels,
                               const std::map<std::string, unsigned> &chunks);

/// transformers.js 4.3.1's dtype of the model file folderModelFile names
/// for the same arguments ("fp32", "fp16", "q4", "q4f16", "int8"), or ""
/// where it has none (bf16 activations, int8 weights with half
/// activations): `quantTag` is the stored weights' tag, from --quant or a
/// quantized checkpoint's own codes.
std::string transformersJsDtype(ir::DType dtype,
                                const std::string &quantTag = "");

/// The per-layer kinds of the compiled graph, in the vocabulary of Hugging
/// Face's `layer_types` ("full_attention", "linear_attention",
/// "sliding_attention", "compressed_sparse_attention",
/// "heavily_compressed_attention"), from the states each layer keeps.
/// Empty when the graph has no per-layer state.
std::vector<std::string> deriveLayerTypes(const ir::Module &m);

/// OUT/config.json: `input` without its `quantization_config` (the
/// folder's models never store the checkpoint's format), with `layer_types`
/// added where the input lacks them and the layers are not all of one
/// attention kind (in text_config for a composite config), and
/// transformers.js's external data chunk
/// counts per model file (`dataChunks`, merged with those of `previous`,
/// the config.json already in the folder, for model files that stay), and
/// `transformers.js_config.dtype`: `dtype` (the transformers.js dtype of the
/// model file this run writes), so that from_pretrained(OUT) without a
/// dtype loads it on every device (the browser's WASM default, q8, names a
/// file archc does not write); where this run's file has none, the dtype of
/// `previous`, else none (an input's own dtype names files of its folder,
/// not of this one).
/// With `wasmDtype` (wasmFloatDtype's answer for a quantized run),
/// `transformers.js_config.device_config.wasm.dtype` names it: the model a
/// browser's default device loads in place of this run's.
nlohmann::json outputConfig(const nlohmann::json &input, const ir::Module &m,
                            const std::map<std::string, unsigned> &dataChunks,
                            const nlohmann::json *previous,
                            const std::string &dtype = "",
                            const std::string &wasmDtype = "");

/// The largest float model, as float32 bytes (onnxruntime-web holds a
/// float16 model's weights cast to float32), that wasmFloatDtype offers:
/// WebAssembly's 32-bit memory is 4 GiB, and a session also holds the
/// activations, the cache and the file bytes it is created from (a 2.4 GB
/// float32 Qwen3-0.6B loads and runs in Chromium; docs/performance.md,
/// "Browser: quantized models on WASM").
inline constexpr uint64_t kWasmFloatBytes = uint64_t(5) << 29; // 2.5 GiB

/// The float model of the model folder `dir` that transformers.js should
/// load on its browser default device ("wasm": onnxruntime-web's WASM
/// build) in place of a quantized one: "fp32" (onnx/model.onnx), else
/// "fp16" (onnx/model_fp16.onnx), the first whose weights as float32 are at
/// most kWasmFloatBytes; "" when the folder holds neither or they are
/// larger. onnxruntime-web's WASM build has no MatMulNBits kernel (no MLAS
/// n-bit GEMM for WebAssembly): it dequantizes every matrix to float32 on
/// every call, at any block size or accuracy_level, so a q4 or int8 decode
/// step is several times slower than the float model's there.
std::string wasmFloatDtype(const std::filesystem::path &dir);

/// OUT/generation_config.json when the input folder has none: the
/// defaults Hugging Face derives from the model config (token ids); with
/// `inputGeneration` (an object), that.
nlohmann::json generationConfig(const nlohmann::json *inputGeneration,
                                const nlohmann::json &config);

/// The tokenizer files that a model folder carries (tokenizer.json,
/// tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt,
/// tokenizer.model, added_tokens.json, chat_template.jinja, ...).
const std::vector<std::string> &tokenizerFileNames();

/// The largest side file copied into a model folder (docs/limits.md); the
/// largest real one is a 33 MB tokenizer.json (Gemma 3).
constexpr uint64_t kMaxSideFileBytes = uint64_t(64) << 20;

/// What became of one side file.
enum class SideFileCopy {
  Absent,  ///< the input folder has no file of that name
  Copied,  ///< staged byte for byte
  Skipped, ///< refused with a warning naming it
  Failed   ///< an error was reported (the output could not be written)
};

/// Copies the side file `name` of the input folder `inputDir` into `set`,
/// byte for byte, when it is a regular file whose real path stays in the
/// folder (or, for a Hugging Face cache snapshot, in the cache's blobs/),
/// of at most kMaxSideFileBytes, and, for a `.json` name, one JSON document
/// (Python's NaN and Infinity allowed) nested at most 64 levels. Otherwise
/// the file is skipped with a warning naming it and saying why; it is never
/// rewritten. The one rule for every file a model folder carries over
/// (docs/limits.md, "Side files").
SideFileCopy copySideFile(OutputSet &set, const std::string &inputDir,
                          const std::string &name, DiagnosticEngine &diags);

/// generation_config.json of the input folder, parsed for the search
/// defaults of genai_config.json (bounded: 4 MiB, 64 levels; NaN allowed),
/// or null when it is absent, not allowed (copySideFile's rule) or not
/// readable that way. A search default or token id that is not of the kind
/// genai_config.json holds (NaN, a string, ...) is left out with a warning.
nlohmann::json readInputGenerationConfig(const std::string &inputDir,
                                         DiagnosticEngine &diags);

/// The sentence-transformers files an encoder's model folder carries over
/// (each under copySideFile's rule; absent ones are skipped):
/// modules.json, config_sentence_transformers.json,
/// sentence_bert_config.json and the config.json of each module folder
/// modules.json names (1_Pooling/, 2_Normalize/, ...), relative paths.
std::vector<std::string> sentenceTransformersFiles(const std::string &inputDir,
                                                   DiagnosticEngine &diags);

} // namespace archc

#endif // ARCHC_EMIT_MODELFOLDER_H
