//===- ModelInput.h - A model folder as input -------------------*- C++ -*-===//
//
// This file declares resolveModelInput(): `archc MODEL_DIR ...` or
// `--config MODEL_DIR` reads MODEL_DIR/config.json, and the folder's
// safetensors (one file, a sharded index, or several files) are the
// default --weights of -emit=onnx. The folder is also where a model-folder
// output finds the tokenizer and generation_config.json.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_MODELINPUT_H
#define ARCHC_DRIVER_MODELINPUT_H

#include "driver/Options.h"

#include <optional>
#include <string>

namespace archc {

/// Whether `dir` holds checkpoint weights: model.safetensors.index.json or
/// a *.safetensors file other than a fixture's expected.safetensors.
bool folderHasWeights(const std::string &dir);

/// The local Hugging Face cache's folder of model `id` (ORG/NAME): the
/// snapshot refs/main names, under $HF_HUB_CACHE, $HF_HOME/hub,
/// $XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub. nullopt
/// when `id` is not of that form; "" with `error` set when the cache does
/// not hold it (archc never downloads).
std::optional<std::string> resolveHubId(const std::string &id,
                                        std::string &error);

/// Rewrites a Hugging Face id given as the input or as --config into its
/// folder in the local cache, a config.json given as the input into
/// opts.config, and a model folder given as the input or as --config into
/// opts.config (its config.json), opts.modelDir and, for -emit=onnx without
/// --weights or --init, opts.weights. Prints an error and returns false when
/// the folder has no config.json, both name different folders, or
/// -emit=onnx has no weights to bind from the folder and no --init.
bool resolveModelInput(Options &opts);

/// Outputs never alias inputs (docs/limits.md): refuses, before anything
/// is read or written, a model-folder output (-o OUT/ of -emit=onnx) that is
/// or contains the input model folder or the checkpoint's folder (symlinks
/// resolved), and an -o or --plot file that is the .arch file, the config or
/// the checkpoint file. Prints the error and returns false. (OutputSet
/// refuses any other file the run read when it publishes.)
bool checkOutputsAgainstInputs(const Options &opts);

} // namespace archc

#endif // ARCHC_DRIVER_MODELINPUT_H
