//===- Options.h - archc command-line options -------------------*- C++ -*-===//
//
// This file declares the command-line options of `archc` and their parser.
// EmitTarget is ordered: later targets run more of the pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_OPTIONS_H
#define ARCHC_DRIVER_OPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace archc {

enum class EmitTarget { Config, Weights, IR, Profile, Onnx, OnnxText };

/// The most rows a profile sweep may have: --batch x --seq x --past values
/// x --device ids (docs/limits.md).
constexpr uint64_t kMaxProfileRows = 16384;

struct Options {
  std::string input;
  std::string config;
  std::string modelDir; ///< the model folder given as input, if any
  bool listArchs = false;
  /// --help, --version, --print-op-reference: the text to print (checked,
  /// like every write to standard output) before exiting 0.
  std::string printAndExit;
  bool quiet = false; ///< no progress bar
  EmitTarget emit = EmitTarget::IR;
  std::string output; ///< -o; "-" or empty = stdout where that makes sense
  std::vector<std::string> includeDirs;
  std::optional<std::vector<std::string>> passes;
  std::vector<std::string> printIRAfter;
  bool printLoc = false;
  bool verifyEach = true;
  bool verifyDiagnostics = false;
  unsigned errorLimit = 20;
  std::string dtype; ///< activation/weight dtype override
  /// Take unmodified bundled files' ASTs from the build's AST snapshot
  /// (--no-ast-snapshot: parse every file).
  bool astSnapshot = true;
  /// --allow-unknown-config: config keys the family does not know are
  /// warnings, not errors.
  bool allowUnknownConfig = false;
  /// --arch-override: a config whose model_type / architectures[0] the arch
  /// does not claim is compiled with a warning.
  bool archOverride = false;
  bool traceAstSnapshot = false; ///< say on stderr how each file was loaded

  // Profile.
  std::vector<int64_t> batch = {1};
  std::vector<int64_t> seq = {};
  std::vector<int64_t> past = {};
  /// Images per prompt of a vision-language model's TTFT (vision + prefill).
  int64_t images = 1;
  std::vector<std::string> devices;
  std::string runtime;
  std::string format = "table";
  bool perOp = false;
  std::string profileDir; ///< runtime_profile directory override
  std::string plot;       ///< --plot: SVG of latency and memory

  // ONNX.
  std::string weights;
  std::string init = "none";   ///< none | random | zeros
  bool initGiven = false;      ///< --init was given
  uint64_t dataChunkBytes = 0; ///< --data-chunk-size (0: under 2 GiB)
  uint64_t seed = 0;
  bool kvCache = true;
  std::string target = "portable"; ///< --target: portable | ort
  bool genaiConfig = true;
  bool embedWeights = false;
  /// --allow-overflow: a weight that overflows the --dtype it is written in
  /// becomes inf instead of an error.
  bool allowOverflow = false;

  // Weight quantization (-emit=onnx, -emit=profile).
  int quantBits = 0;       ///< --quant: 0 (off), 4 or 8
  int64_t quantBlock = 32; ///< --quant-block
  bool quantAsymmetric = false;
  bool quantEmbeddings = false;
  int quantAccuracy = 0; ///< --quant-accuracy (MatMulNBits accuracy_level)
  /// --quant-unroll-experts: the most quantized expert bodies (experts x
  /// MoE layers) unrolled; with more, they scan stacked codes.
  int64_t quantUnrollExperts = 256;
  /// --quant-qmoe: 4-bit MoE layers on ONNX Runtime's QMoE (--target=ort).
  bool quantQmoe = false;
  /// --quant-block, --quant-asymmetric or --quant-embeddings was given.
  bool quantOptionSeen = false;
  /// --quant-accuracy, --quant-unroll-experts or --quant-qmoe was given.
  bool quantReaderOptionSeen = false;
};

/// Parses argv. On error prints a message to stderr and returns false;
/// `exitCode` is set (0 for --help/--version).
bool parseOptions(int argc, char **argv, Options &opts, int &exitCode);

} // namespace archc

#endif // ARCHC_DRIVER_OPTIONS_H
