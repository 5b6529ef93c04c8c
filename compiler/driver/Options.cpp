//===- Options.cpp - archc command-line options ---------------------------===//
//
// This file implements the command-line parser. Flags accept both
// `--flag=value` and `--flag value`; single-dash long forms (`-emit=ir`)
// are accepted as in LLVM tools.
//
//===----------------------------------------------------------------------===//
#include "driver/Options.h"

#include "driver/ModelInput.h"
#include "ir/OpSchema.h"
#include "support/FileRead.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <sstream>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace archc {

namespace {
const char *kUsage =
    R"(usage: archc [<file.arch>] --config <config.json | model folder> [options]
       archc <model folder | config.json | ORG/NAME> [options]
       archc --list-archs

Compiles a model architecture for the Hugging Face config of one model.
Without <file.arch>, the bundled family whose `matches` list names the
config's architectures[0] is used. A model folder is read for its
config.json; its safetensors are the default --weights of -emit=onnx and
-emit=profile. A Hugging Face id ORG/NAME is the model's folder in the
local cache ($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub, the
snapshot refs/main names); archc never downloads.

Output:
  -emit=config         every config field as bound: value and where it came
                       from (config.json, a family's default, inert); of an
                       .arch file without --config, the family's schema
                       (fields, defaults, inert keys, refused values)
  -emit=ir             typed IR (default), deterministic text
  -emit=weights        the checkpoint's weight tensors (name, shape, dtype)
  -emit=profile        parameters, FLOPs, memory, KV bytes, latency
  -emit=onnx           ONNX model (-o model.onnx), with KV-cache I/O
  -emit=onnx-text      the ONNX graph as text
  -o <path>            output file (default: stdout for text outputs);
                       for -emit=onnx a folder (a trailing '/', an
                       existing directory, or a new name without an
                       extension) gets a model folder: onnx/model.onnx,
                       config.json, genai_config.json, ...
  --dtype=<t>          f32 | f16 | bf16 (default: the config's torch_dtype;
                       f32 for ONNX)

Config binding (closed-world: docs/language.md, "Config schema"):
  --allow-unknown-config
                       a config field the family neither honours nor knows
                       to be inert is a warning instead of an error (for
                       fields you know not to change the model)
  --arch-override      compile a config whose model_type / architectures[0]
                       the .arch file does not claim (a warning instead of
                       an error; every field is still checked)

Pipeline and debugging:
  --passes=<a,b,...>   run exactly these passes (shape-inference, kv-cache,
                       attention-mask, expand-repeat)
  --print-ir-after=<p> print the IR after pass p (or "all")
  --print-loc          print op source locations in the IR
  --no-verify-each     do not verify the IR after every pass
  --verify-diagnostics check expected-error comments instead of printing
  --error-limit=<n>    stop after n errors (default 20, 0 = no limit)
  --print-op-reference print the IR op reference (docs/ir.md) and exit
  -I <dir>             add an import search directory
  --no-ast-snapshot    parse the bundled .arch files instead of taking
                       their ASTs from the build's snapshot
  --trace-ast-snapshot say on stderr whether each file was parsed or taken
                       from the snapshot, and why

Profile (-emit=profile):
  --batch=<n[,n]>      batch size(s) (default 1)
  --images=<n>         images per prompt for a vision-language model's TTFT
                       (vision encoder + prefill; default 1)
  --seq=<n[,n...]>     prompt length(s) for prefill (default 2048)
  --past=<n[,n...]>    tokens already cached for decode (default = seq)
  --context=<n>        same as --past
  --device=<id[,id]>   device(s) from runtime_profile/devices/<id>.yaml
  --runtime=<preset>   runtime preset (bf16, fp16, fp8, w4a16, ...) or a YAML
                       file
  --format=<f>         table (default) | json | csv | md
  --per-op             also print one row per op
  --profile-dir=<dir>  runtime_profile directory
  --plot=<file.svg>    also draw latency and memory against context length
                       and batch for the requested devices

ONNX (-emit=onnx):
  --weights=<path>     .safetensors file, sharded index.json, or directory
  --init=<mode>        without --weights: none (external-data layout) |
                       random | zeros
  --seed=<n>           seed for --init=random (default 0)
  --allow-overflow     write a weight that overflows --dtype (1e6 as f16)
                       as inf instead of refusing it
  --no-kv-cache        single-pass model without past/present I/O
  --target=<t>         portable (default): standard ONNX ops only |
                       ort: ONNX Runtime's contrib ops where faster
  --no-genai-config    do not write genai_config.json
  --embed-weights      store weights inside the .onnx (models < 2 GiB)
  --data-chunk-size=<bytes>
                       largest external data file (default: under 2 GiB,
                       what browsers load); later tensors go to
                       model.onnx_data_1, _2, ...

Quantization (-emit=onnx; -emit=profile counts the same bytes):
  --quant=<q>          int4 | int8: weight-only block quantization of every
                       Linear weight (ONNX Runtime MatMulNBits; MLAS
                       round-to-nearest, symmetric); embeddings, routers,
                       norms and other weights stay float. A GPTQ, AWQ or
                       compressed-tensors checkpoint's codes become
                       MatMulNBits without it (bit for bit); with it, the
                       weights it stores in float are quantized too
  --quant-block=<n>    inputs per block: 16, 32 (default), 64, 128, 256
  --quant-asymmetric   unsigned codes with a zero point per block
  --quant-embeddings   also the embedding table (GatherBlockQuantized); a
                       tied table is quantized once for gather and head
  The next three apply to the MatMulNBits of --quant and of a quantized
  checkpoint's codes:
  --quant-accuracy=<n> MatMulNBits accuracy_level: 0 (default: weight-only,
                       activations stay float) .. 4 (ONNX Runtime may quantize
                       activations to int8 at run time: faster on CPU, where
                       8-bit weights have no fast float kernel)
  --quant-unroll-experts=<n>
                       a graph of at most n quantized expert bodies (experts
                       x MoE layers; 256 by default) unrolls them, one
                       MatMulNBits per expert matrix (pre-packed: fast, but
                       the graph grows with them); with more, MoE layers
                       QMoE does not run scan the stacked codes (a graph of
                       any expert count, each selected matrix dequantized
                       per call); --quant=int8 MoE layers run on QMoE with
                       --target=ort
  --quant-qmoe         --target=ort: --quant=int4 MoE layers on QMoE as well
                       (for execution providers with a fast 4-bit QMoE; ONNX
                       Runtime 1.30's CPU kernel pre-packs it for minutes at
                       session creation and runs no faster)

Other:
  --list-archs         list the bundled families and the architectures
                       they match
  -q, --quiet          no progress bar while binding weights, no list of
                       the files of a model folder
  --help, --version
)";

bool splitList(const std::string &s, std::vector<std::string> &out) {
  out.clear();
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string part = s.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part.empty())
      return false;
    out.push_back(part);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return !out.empty();
}

/// Options without a value.
bool isFlag(const std::string &name) {
  static const std::set<std::string> flags = {"--list-archs",
                                              "--quiet",
                                              "-q",
                                              "--allow-unknown-config",
                                              "--arch-override",
                                              "--print-ir-after-all",
                                              "--print-loc",
                                              "--no-verify-each",
                                              "--no-ast-snapshot",
                                              "--trace-ast-snapshot",
                                              "--verify-diagnostics",
                                              "--per-op",
                                              "--no-kv-cache",
                                              "--no-genai-config",
                                              "--embed-weights",
                                              "--quant-asymmetric",
                                              "--quant-embeddings",
                                              "--quant-qmoe",
                                              "--allow-overflow"};
  return flags.count(name) > 0;
}

/// Options that take one value (every value option but -I).
bool isKnownValueOption(const std::string &name) {
  static const std::set<std::string> options = {"--config",
                                                "--emit",
                                                "-o",
                                                "--output",
                                                "--passes",
                                                "--print-ir-after",
                                                "--error-limit",
                                                "--dtype",
                                                "--batch",
                                                "--images",
                                                "--seq",
                                                "--past",
                                                "--context",
                                                "--device",
                                                "--runtime",
                                                "--format",
                                                "--profile-dir",
                                                "--plot",
                                                "--data-chunk-size",
                                                "--weights",
                                                "--init",
                                                "--seed",
                                                "--target",
                                                "--quant",
                                                "--quant-block",
                                                "--quant-accuracy",
                                                "--quant-unroll-experts"};
  return options.count(name) > 0;
}

bool parseInts(const std::string &flag, const std::string &s,
               std::vector<int64_t> &out, int64_t minValue) {
  std::vector<std::string> parts;
  if (!splitList(s, parts)) {
    fmt::print(stderr,
               "archc: error: {} expects a comma-separated list of "
               "integers, got '{}'\n",
               flag, s);
    return false;
  }
  out.clear();
  for (const std::string &p : parts) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(p.c_str(), &end, 10);
    if (errno || *end || v < minValue || v > (1LL << 40)) {
      fmt::print(stderr,
                 "archc: error: {}: '{}' is not an integer in [{}, "
                 "2^40]\n",
                 flag, p, minValue);
      return false;
    }
    out.push_back(v);
  }
  return true;
}
} // namespace

bool parseOptions(int argc, char **argv, Options &o, int &exitCode) {
  exitCode = 1;
  std::vector<std::string> args(argv + 1, argv + argc);
  // Options that take one value: given twice, the second would silently
  // replace the first. Aliases share the name they are recorded under.
  std::map<std::string, std::string> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.size() > 2 &&
        a != "-o" && a != "-I" && a != "-q")
      a = "-" + a; // -emit=ir -> --emit=ir
    std::string name = a, value;
    bool hasValue = false;
    if (auto eq = a.find('=');
        eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      hasValue = true;
    }
    auto need = [&]() -> bool {
      if (hasValue)
        return true;
      if (i + 1 >= args.size()) {
        fmt::print(stderr, "archc: error: {} needs a value\n", name);
        return false;
      }
      value = args[++i];
      return true;
    };
    auto noValue = [&]() {
      if (hasValue) {
        fmt::print(stderr, "archc: error: {} takes no value\n", name);
        return false;
      }
      return true;
    };
    if (name == "--help" || name == "-h") {
      o.printAndExit = kUsage;
      exitCode = 0;
      return false;
    }
    if (name == "--version") {
      o.printAndExit = "archc 0.1.0\n";
      exitCode = 0;
      return false;
    }
    if (name == "--print-op-reference") {
      std::ostringstream os;
      ir::printOpReference(os);
      o.printAndExit = os.str();
      exitCode = 0;
      return false;
    }
    if (name == "--list-archs") {
      o.listArchs = true;
      continue;
    }
    if (name == "--quiet" || name == "-q") {
      o.quiet = true;
      continue;
    }
    if (name == "--allow-unknown-config") {
      o.allowUnknownConfig = true;
      continue;
    }
    if (name == "--arch-override") {
      o.archOverride = true;
      continue;
    }
    if (name == "--allow-overflow") {
      if (!noValue())
        return false;
      o.allowOverflow = true;
      continue;
    }
    // --print-ir-after-all is --print-ir-after=all.
    bool irAfterAll = name == "--print-ir-after-all";
    if (name != "-I" && (hasValue || !isFlag(name) || irAfterAll)) {
      std::string key = name == "--output"    ? "-o"
                        : name == "--context" ? "--past"
                        : irAfterAll          ? "--print-ir-after"
                                              : name;
      std::string shown = hasValue || irAfterAll || i + 1 >= args.size()
                              ? a
                              : a + " " + args[i + 1];
      auto [prev, inserted] = seen.emplace(key, shown);
      if (!inserted && (irAfterAll || isKnownValueOption(name))) {
        fmt::print(stderr,
                   "archc: error: {} given twice ('{}' and '{}'); it takes "
                   "one value\n",
                   key, prev->second, shown);
        return false;
      }
    }
    if (name == "--config") {
      if (!need())
        return false;
      o.config = value;
    } else if (name == "--emit") {
      if (!need())
        return false;
      if (value == "ir")
        o.emit = EmitTarget::IR;
      else if (value == "config")
        o.emit = EmitTarget::Config;
      else if (value == "weights")
        o.emit = EmitTarget::Weights;
      else if (value == "profile")
        o.emit = EmitTarget::Profile;
      else if (value == "onnx")
        o.emit = EmitTarget::Onnx;
      else if (value == "onnx-text")
        o.emit = EmitTarget::OnnxText;
      else {
        fmt::print(stderr,
                   "archc: error: unknown -emit value '{}' (expected "
                   "config, ir, weights, profile, onnx or onnx-text)\n",
                   value);
        return false;
      }
    } else if (name == "-o" || name == "--output") {
      if (!need())
        return false;
      o.output = value;
    } else if (name == "-I") {
      if (!need())
        return false;
      o.includeDirs.push_back(value);
    } else if (name == "--passes") {
      if (!need())
        return false;
      std::vector<std::string> list;
      if (!value.empty() && !splitList(value, list)) {
        fmt::print(stderr, "archc: error: malformed --passes list '{}'\n",
                   value);
        return false;
      }
      o.passes = list;
    } else if (name == "--print-ir-after") {
      if (!need() || !splitList(value, o.printIRAfter)) {
        fmt::print(stderr, "archc: error: --print-ir-after needs pass names\n");
        return false;
      }
    } else if (name == "--print-ir-after-all") {
      o.printIRAfter = {"all"};
    } else if (name == "--print-loc") {
      if (!noValue())
        return false;
      o.printLoc = true;
    } else if (name == "--no-verify-each") {
      o.verifyEach = false;
    } else if (name == "--no-ast-snapshot") {
      if (!noValue())
        return false;
      o.astSnapshot = false;
    } else if (name == "--trace-ast-snapshot") {
      if (!noValue())
        return false;
      o.traceAstSnapshot = true;
    } else if (name == "--verify-diagnostics") {
      o.verifyDiagnostics = true;
    } else if (name == "--error-limit") {
      std::vector<int64_t> v;
      if (!need() || !parseInts(name, value, v, 0))
        return false;
      o.errorLimit = static_cast<unsigned>(v[0]);
    } else if (name == "--dtype") {
      if (!need())
        return false;
      if (value != "f32" && value != "fp32" && value != "f16" &&
          value != "fp16" && value != "bf16" && value != "float32" &&
          value != "float16" && value != "bfloat16") {
        fmt::print(stderr,
                   "archc: error: --dtype must be f32, f16 or bf16, "
                   "got '{}'\n",
                   value);
        return false;
      }
      o.dtype = value;
    } else if (name == "--batch") {
      if (!need() || !parseInts(name, value, o.batch, 1))
        return false;
    } else if (name == "--images") {
      std::vector<int64_t> v;
      if (!need() || !parseInts(name, value, v, 0) || v.size() != 1) {
        if (v.size() > 1)
          fmt::print(stderr, "archc: error: --images takes one count\n");
        return false;
      }
      o.images = v[0];
    } else if (name == "--seq") {
      if (!need() || !parseInts(name, value, o.seq, 1))
        return false;
    } else if (name == "--past" || name == "--context") {
      if (!need() || !parseInts(name, value, o.past, 0))
        return false;
    } else if (name == "--device") {
      if (!need() || !splitList(value, o.devices)) {
        fmt::print(stderr, "archc: error: --device needs device ids\n");
        return false;
      }
    } else if (name == "--runtime") {
      if (!need())
        return false;
      o.runtime = value;
    } else if (name == "--format") {
      if (!need())
        return false;
      if (value != "table" && value != "json" && value != "csv" &&
          value != "md") {
        fmt::print(stderr,
                   "archc: error: --format must be table, json, csv "
                   "or md, got '{}'\n",
                   value);
        return false;
      }
      o.format = value;
    } else if (name == "--per-op") {
      o.perOp = true;
    } else if (name == "--profile-dir") {
      if (!need())
        return false;
      o.profileDir = value;
    } else if (name == "--plot") {
      if (!need())
        return false;
      o.plot = value;
    } else if (name == "--data-chunk-size") {
      std::vector<int64_t> v;
      if (!need() || !parseInts(name, value, v, 4096))
        return false;
      o.dataChunkBytes = static_cast<uint64_t>(v[0]);
    } else if (name == "--weights") {
      if (!need())
        return false;
      o.weights = value;
    } else if (name == "--init") {
      if (!need())
        return false;
      if (value != "none" && value != "random" && value != "zeros") {
        fmt::print(stderr,
                   "archc: error: --init must be none, random or "
                   "zeros, got '{}'\n",
                   value);
        return false;
      }
      o.init = value;
      o.initGiven = true;
    } else if (name == "--seed") {
      std::vector<int64_t> v;
      if (!need() || !parseInts(name, value, v, 0))
        return false;
      o.seed = static_cast<uint64_t>(v[0]);
    } else if (name == "--no-kv-cache") {
      o.kvCache = false;
    } else if (name == "--target") {
      if (!need())
        return false;
      if (value != "portable" && value != "ort") {
        fmt::print(stderr,
                   "archc: error: --target must be portable or ort, "
                   "got '{}'\n",
                   value);
        return false;
      }
      o.target = value;
    } else if (name == "--no-genai-config") {
      o.genaiConfig = false;
    } else if (name == "--embed-weights") {
      o.embedWeights = true;
    } else if (name == "--quant") {
      if (!need())
        return false;
      if (value == "int4")
        o.quantBits = 4;
      else if (value == "int8")
        o.quantBits = 8;
      else {
        fmt::print(stderr,
                   "archc: error: --quant must be int4 or int8, got '{}'\n",
                   value);
        return false;
      }
    } else if (name == "--quant-block") {
      std::vector<int64_t> v;
      if (!need() || !parseInts(name, value, v, 1))
        return false;
      if (v.size() != 1 || v[0] < 16 || v[0] > 256 || (v[0] & (v[0] - 1))) {
        fmt::print(stderr,
                   "archc: error: --quant-block must be 16, 32, 64, 128 or "
                   "256, got '{}'\n",
                   value);
        return false;
      }
      o.quantBlock = v[0];
      o.quantOptionSeen = true;
    } else if (name == "--quant-asymmetric") {
      if (!noValue())
        return false;
      o.quantAsymmetric = true;
      o.quantOptionSeen = true;
    } else if (name == "--quant-embeddings") {
      if (!noValue())
        return false;
      o.quantEmbeddings = true;
      o.quantOptionSeen = true;
    } else if (name == "--quant-accuracy") {
      std::vector<int64_t> v;
      if (!need() || !parseInts(name, value, v, 0))
        return false;
      if (v.size() != 1 || v[0] > 4) {
        fmt::print(stderr,
                   "archc: error: --quant-accuracy must be 0..4, got '{}'\n",
                   value);
        return false;
      }
      o.quantAccuracy = static_cast<int>(v[0]);
      o.quantReaderOptionSeen = true;
    } else if (name == "--quant-unroll-experts") {
      std::vector<int64_t> v;
      if (!need() || !parseInts(name, value, v, 0))
        return false;
      if (v.size() != 1) {
        fmt::print(stderr,
                   "archc: error: --quant-unroll-experts takes one count, "
                   "got '{}'\n",
                   value);
        return false;
      }
      o.quantUnrollExperts = v[0];
      o.quantReaderOptionSeen = true;
    } else if (name == "--quant-qmoe") {
      if (!noValue())
        return false;
      o.quantQmoe = true;
      o.quantReaderOptionSeen = true;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      fmt::print(stderr, "archc: error: unknown option '{}' (see --help)\n",
                 args[i]);
      return false;
    } else {
      if (!o.input.empty()) {
        fmt::print(stderr,
                   "archc: error: more than one input file ('{}' and "
                   "'{}')\n",
                   o.input, a);
        return false;
      }
      o.input = a;
    }
  }
  if (o.listArchs)
    return true;
  if (!o.plot.empty() && o.emit != EmitTarget::Profile) {
    fmt::print(stderr, "archc: error: --plot draws the profile: it needs "
                       "-emit=profile\n");
    return false;
  }
  if (!o.plot.empty() && !o.output.empty() && o.output != "-" &&
      realPath(o.plot) == realPath(o.output)) {
    fmt::print(stderr,
               "archc: error: -o '{}' and --plot '{}' name the same file; "
               "the profile and its plot need two\n",
               o.output, o.plot);
    return false;
  }
  // A sweep's rows are computed and held together: bounded before any is.
  uint64_t rows = uint64_t(o.batch.size()) * std::max<size_t>(1, o.seq.size()) *
                  std::max<size_t>(1, o.past.size()) *
                  std::max<size_t>(1, o.devices.size());
  if (rows > kMaxProfileRows) {
    fmt::print(stderr,
               "archc: error: the profile sweep has {} rows (--batch {} x "
               "--seq {} x --past {} values x --device {}), more than the "
               "limit of {}\n",
               rows, o.batch.size(), std::max<size_t>(1, o.seq.size()),
               std::max<size_t>(1, o.past.size()),
               std::max<size_t>(1, o.devices.size()), kMaxProfileRows);
    return false;
  }
  // --init makes weights instead of binding them: with --weights one of
  // the two would be ignored without a word.
  if (o.initGiven && !o.weights.empty()) {
    fmt::print(stderr,
               "archc: error: --init={} and --weights '{}' both say where the "
               "weights come from; give one\n",
               o.init, o.weights);
    return false;
  }
  if (!resolveModelInput(o))
    return false;
  if (o.input.empty() && o.config.empty()) {
    fmt::print(stderr, "archc: error: no input .arch file (see --help)\n");
    return false;
  }
  if (!checkOutputsAgainstInputs(o))
    return false;
  // -emit=config of an .arch file alone prints the family's config schema.
  if (o.config.empty() && !o.verifyDiagnostics &&
      !(o.emit == EmitTarget::Config && !o.input.empty())) {
    fmt::print(stderr, "archc: error: --config <config.json> is required\n");
    return false;
  }
  if (o.quantOptionSeen && o.quantBits == 0) {
    fmt::print(stderr, "archc: error: --quant-block, --quant-asymmetric and "
                       "--quant-embeddings need --quant=int4|int8\n");
    return false;
  }
  // The MatMulNBits options need quantized weights: --quant's, or a
  // checkpoint's codes (checked once the checkpoint is bound).
  if (o.quantReaderOptionSeen && o.quantBits == 0 && o.weights.empty()) {
    fmt::print(stderr, "archc: error: --quant-accuracy, "
                       "--quant-unroll-experts and --quant-qmoe need "
                       "--quant=int4|int8 or a quantized checkpoint "
                       "(--weights)\n");
    return false;
  }
  if (o.quantQmoe && o.target != "ort") {
    fmt::print(stderr, "archc: error: --quant-qmoe needs --target=ort (QMoE "
                       "is an ONNX Runtime contrib op)\n");
    return false;
  }
  return true;
}

} // namespace archc
