//===- QuantConfig.h - Quantization settings of a compilation ---*- C++ -*-===//
//
// This file declares how the driver turns the command line (`--quant*`) and
// config.json (`quantization_config`, `expert_dtype`) into the quantization
// settings the back ends share (ir/WeightQuant.h), and how the profile
// learns the bytes a checkpoint really stores.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_QUANTCONFIG_H
#define ARCHC_DRIVER_QUANTCONFIG_H

#include "config/JsonSource.h"
#include "driver/Options.h"
#include "ir/WeightQuant.h"

#include <map>
#include <string>

namespace archc {

/// `--quant*` as QuantOptions.
ir::QuantOptions quantOptions(const Options &opts);

/// Reads `quantization_config` (at the root or in `text_config`): quant
/// method gptq, awq, compressed-tensors (PrequantConfig.cpp), fp8 (fmt
/// e4m3, weight_block_size, scale_fmt ue8m0) or mxfp4, and DeepSeek-V4's
/// `expert_dtype`. An unsupported method, field or value is an error
/// located in config.json.
bool readCheckpointQuant(const JsonSource &config, DiagnosticEngine &diags,
                         ir::CheckpointQuant &out);

/// Reads a GPTQ, AWQ or compressed-tensors `quantization_config` (`qc` at
/// JSON pointer `at`) closed-world: every key honoured, inert, or refused
/// by name with an error located in config.json (PrequantConfig.cpp).
bool readPrequantConfig(const JsonSource &config, DiagnosticEngine &diags,
                        const nlohmann::json &qc, const std::string &at,
                        const std::string &method, ir::CheckpointQuant &out);

/// The keys of an fp8 / mxfp4 release config that readCheckpointQuant does
/// not read itself: inert ones accepted, the rest refused by name.
bool checkReleaseConfigKeys(const JsonSource &config, DiagnosticEngine &diags,
                            const nlohmann::json &qc, const std::string &at,
                            const std::string &method);

/// Binds the module's weights to the checkpoint at `path` (headers only)
/// and returns the bytes each weight declaration's tensors occupy there
/// (quantized data plus scales), by ir::weightKey (pattern and type). Binding
/// problems are reported as for -emit=onnx.
bool checkpointBytes(const ir::Module &m, const std::string &path,
                     const ir::CheckpointQuant &quant, DiagnosticEngine &diags,
                     std::map<std::string, double> &bytesByPattern);

} // namespace archc

#endif // ARCHC_DRIVER_QUANTCONFIG_H
