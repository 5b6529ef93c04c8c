//===- PrequantConfig.cpp - GPTQ, AWQ and compressed-tensors configs ------===//
//
// This file reads the `quantization_config` of GPTQ (AutoGPTQ, GPTQModel,
// optimum), AWQ (AutoAWQ GEMM) and compressed-tensors (llm-compressor)
// checkpoints into ir::CheckpointQuant: the scheme of every module (bits,
// group size, symmetry, act-order) and which modules stay float. Reading is
// closed-world, as config binding is: every key is honoured, known to be
// inert (calibration settings and loader options, which do not change the
// tensors), or refused with an error located at the key.
//
//===----------------------------------------------------------------------===//
#include "driver/QuantConfig.h"

#include <fmt/format.h>

#include <regex>

namespace archc {

namespace {

std::string escapeToken(const std::string &key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

/// The keys of one JSON object of quantization_config, read closed-world.
class Fields {
public:
  Fields(const JsonSource &config, DiagnosticEngine &diags,
         const nlohmann::json &obj, std::string at, std::string what)
      : config(config), diags(diags), obj(obj), at(std::move(at)),
        what(std::move(what)) {}

  /// The value of `key` (null when absent or JSON null).
  const nlohmann::json *get(const std::string &key) {
    read.insert(key);
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::string pointer(const std::string &key) const {
    return key.empty() ? at : at + "/" + escapeToken(key);
  }
  bool fail(const std::string &key, const std::string &msg) {
    diags.error(config.rangeOf(pointer(key)), msg);
    ok = false;
    return false;
  }
  /// Keys that do not change the tensors (calibration, loaders).
  void inert(std::initializer_list<const char *> keys) {
    for (const char *k : keys)
      read.insert(k);
  }
  bool boolean(const std::string &key, bool &out) {
    const nlohmann::json *v = get(key);
    if (!v)
      return true;
    if (!v->is_boolean())
      return fail(key, fmt::format("{}.{} must be true or false, not {}", what,
                                   key, v->dump()));
    out = v->get<bool>();
    return true;
  }
  bool integer(const std::string &key, int64_t &out) {
    const nlohmann::json *v = get(key);
    if (!v)
      return true;
    if (!v->is_number_integer())
      return fail(key, fmt::format("{}.{} must be an integer, not {}", what,
                                   key, v->dump()));
    out = v->get<int64_t>();
    return true;
  }
  bool string(const std::string &key, std::string &out) {
    const nlohmann::json *v = get(key);
    if (!v)
      return true;
    if (!v->is_string())
      return fail(key, fmt::format("{}.{} must be a string, not {}", what, key,
                                   v->dump()));
    out = v->get<std::string>();
    return true;
  }
  /// A key that must be absent, null, false or empty: anything else is a
  /// feature archc does not implement (`why`).
  bool unsupportedUnlessEmpty(const std::string &key, const std::string &why) {
    const nlohmann::json *v = get(key);
    if (!v || (v->is_boolean() && !v->get<bool>()) ||
        ((v->is_object() || v->is_array() || v->is_string()) && v->empty()))
      return true;
    return fail(key, fmt::format("{}.{} = {} is not supported: {}", what, key,
                                 v->dump(), why));
  }
  /// Every key was read: the others are refused by name.
  bool finish() {
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (!read.count(it.key()))
        fail(it.key(),
             fmt::format("{} field '{}' is not known to archc: it neither "
                         "implements it nor knows it to be inert",
                         what, it.key()));
    return ok;
  }

  const JsonSource &config;
  DiagnosticEngine &diags;
  const nlohmann::json &obj;
  std::string at, what;
  std::set<std::string> read;
  bool ok = true;
};

/// A Python regular expression archc can match (std::regex ECMAScript).
bool checkRegex(Fields &f, const std::string &key, const std::string &re) {
  try {
    std::regex r(re);
  } catch (const std::regex_error &) {
    return f.fail(key, fmt::format("the pattern '{}' is not a regular "
                                   "expression archc can match (ECMAScript "
                                   "syntax)",
                                   re));
  }
  return true;
}

bool gptqBits(Fields &f, const std::string &key, int64_t bits) {
  if (bits == 2 || bits == 3 || bits == 4 || bits == 8)
    return true;
  if (bits >= 5 && bits <= 7)
    return f.fail(key, fmt::format("GPTQ bits {} is not supported: "
                                   "GPTQModel stores 5- to 7-bit codes in "
                                   "bit planes, a layout archc does not read "
                                   "(2, 3, 4 and 8 bits are)",
                                   bits));
  return f.fail(
      key, fmt::format("GPTQ bits {} is not supported (2, 3, 4, 8)", bits));
}

bool groupSize(Fields &f, const std::string &key, int64_t g) {
  if (g == -1 || g > 0)
    return true;
  return f.fail(key,
                fmt::format("group_size {} must be positive or -1 (one group "
                            "per output row)",
                            g));
}

/// GPTQ: AutoGPTQ / GPTQModel / optimum `quantization_config`.
bool readGptq(Fields &f, ir::CheckpointQuant &out) {
  ir::WeightScheme s;
  int64_t bits = 4, group = 128;
  bool descAct = false, staticGroups = false, lmHead = false;
  if (!f.get("bits"))
    return f.fail("", "GPTQ quantization_config has no bits");
  if (!f.integer("bits", bits) || !gptqBits(f, "bits", bits) ||
      !f.integer("group_size", group) || !groupSize(f, "group_size", group) ||
      !f.boolean("desc_act", descAct) || !f.boolean("sym", s.symmetric) ||
      !f.boolean("static_groups", staticGroups) ||
      !f.boolean("lm_head", lmHead))
    return false;
  s.bits = static_cast<int>(bits);
  s.group = group;
  s.needsGIdx = descAct && !staticGroups;
  // checkpoint_format (and GPTQModel's `format`): v1 stores zero - 1.
  std::string format;
  for (const char *key : {"checkpoint_format", "format"}) {
    std::string v;
    if (!f.string(key, v))
      return false;
    if (v.empty())
      continue;
    if (v != "gptq" && v != "gptq_v2")
      return f.fail(key, fmt::format("GPTQ {} '{}' is not supported (gptq, "
                                     "gptq_v2); kernel-specific layouts "
                                     "(marlin, bitblas, ...) are not read",
                                     key, v));
    if (!format.empty() && v != format)
      return f.fail(key, fmt::format("{} '{}' contradicts the other format "
                                     "field '{}'",
                                     key, v, format));
    format = v;
  }
  out.gptqV1 = format != "gptq_v2";
  if (!f.unsupportedUnlessEmpty("is_marlin_format",
                                "Marlin-repacked qweight is not read") ||
      !f.unsupportedUnlessEmpty("rotation",
                                "rotated weights need the rotation at run "
                                "time") ||
      !f.unsupportedUnlessEmpty("adapter",
                                "EoRA adapters add low-rank tensors archc "
                                "does not bind"))
    return false;
  std::string pack = "int32";
  if (!f.string("pack_dtype", pack))
    return false;
  if (pack != "int32")
    return f.fail("pack_dtype",
                  fmt::format("GPTQ pack_dtype '{}' is not supported (int32 "
                              "words, what released checkpoints use)",
                              pack));
  // lm_head: quantized only when the config says so.
  ir::CheckpointQuant::ModuleRule head;
  head.match = ir::CheckpointQuant::ModuleRule::Match::Exact;
  head.pattern = "lm_head";
  head.quantized = lmHead;
  head.scheme = s;
  head.origin = fmt::format("lm_head: {}", lmHead);
  if (!lmHead)
    out.rules.push_back(head);
  // GPTQModel `dynamic`: "-:regex" leaves matching modules float; "+:regex"
  // or "regex" overrides bits / group_size / sym / desc_act. First match.
  if (const nlohmann::json *dyn = f.get("dynamic")) {
    if (!dyn->is_object())
      return f.fail("dynamic", "GPTQ dynamic must be an object of "
                               "{pattern: overrides}");
    Fields d(f.config, f.diags, *dyn, f.pointer("dynamic"),
             "quantization_config.dynamic");
    for (auto it = dyn->begin(); it != dyn->end(); ++it) {
      std::string key = it.key(), re = key;
      d.read.insert(key);
      ir::CheckpointQuant::ModuleRule r;
      r.match = ir::CheckpointQuant::ModuleRule::Match::Regex;
      r.scheme = s;
      r.quantized = key.rfind("-:", 0) != 0;
      if (!r.quantized || key.rfind("+:", 0) == 0)
        re = key.substr(2);
      r.pattern = re;
      r.origin = fmt::format("dynamic '{}'", key);
      if (!checkRegex(d, key, re))
        return false;
      if (r.quantized) {
        if (!it->is_object())
          return d.fail(key, fmt::format("dynamic '{}' must map to an object "
                                         "of overrides",
                                         key));
        Fields o(f.config, f.diags, *it, d.pointer(key),
                 fmt::format("dynamic '{}'", key));
        int64_t b = s.bits, g = s.group;
        bool act = descAct;
        if (!o.integer("bits", b) || !gptqBits(o, "bits", b) ||
            !o.integer("group_size", g) || !groupSize(o, "group_size", g) ||
            !o.boolean("sym", r.scheme.symmetric) ||
            !o.boolean("desc_act", act) || !o.finish())
          return false;
        r.scheme.bits = static_cast<int>(b);
        r.scheme.group = g;
        r.scheme.needsGIdx = act && !staticGroups;
      }
      out.rules.push_back(r);
    }
  }
  if (lmHead)
    out.rules.push_back(head);
  out.defaults = s;
  out.defaultQuantized = true;
  // Calibration and loader settings: the tensors are the same whatever
  // they say (act-order and static groups are read from g_idx).
  f.inert({"quant_method",
           "damp_percent",
           "damp_auto_increment",
           "true_sequential",
           "model_name_or_path",
           "model_file_base_name",
           "meta",
           "use_exllama",
           "exllama_config",
           "disable_exllama",
           "backend",
           "use_cuda_fp16",
           "model_seqlen",
           "dataset",
           "tokenizer",
           "batch_size",
           "pad_token_id",
           "max_input_length",
           "cache_block_outputs",
           "modules_in_block_to_quantize",
           "block_name_to_quantize",
           "module_name_preceding_first_block",
           "mse",
           "act_group_aware",
           "v2",
           "v2_alpha",
           "hyb_act",
           "device",
           "offload_to_disk",
           "offload_to_disk_path",
           "mock_quantization"});
  return f.finish();
}

/// AWQ: AutoAWQ's GEMM checkpoints.
bool readAwq(Fields &f, ir::CheckpointQuant &out) {
  ir::WeightScheme s;
  int64_t bits = 4, group = 128;
  bool zeroPoint = true;
  std::string version = "gemm";
  for (const char *key : {"bits", "w_bit"})
    if (!f.integer(key, bits))
      return false;
  for (const char *key : {"group_size", "q_group_size"})
    if (!f.integer(key, group) || !groupSize(f, key, group))
      return false;
  if (bits != 4)
    return f.fail(f.get("bits") ? "bits" : "w_bit",
                  fmt::format("AWQ bits {} is not supported (4)", bits));
  if (!f.boolean("zero_point", zeroPoint) || !f.string("version", version))
    return false;
  if (!zeroPoint)
    return f.fail("zero_point", "AWQ without zero points is not supported "
                                "(the GEMM layout stores them)");
  std::string lower;
  for (char c : version)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower != "gemm")
    return f.fail("version",
                  fmt::format("AWQ version '{}' is not supported (gemm; the "
                              "gemv, gemv_fast, marlin and exllama layouts "
                              "pack codes differently)",
                              version));
  s.bits = 4;
  s.group = group;
  s.symmetric = false;
  ir::CheckpointQuant::ModuleRule head;
  head.pattern = "lm_head";
  head.quantized = false;
  head.origin = "AWQ leaves lm_head float";
  out.rules.push_back(head);
  if (const nlohmann::json *m = f.get("modules_to_not_convert")) {
    if (!m->is_array())
      return f.fail("modules_to_not_convert",
                    "modules_to_not_convert must be a list of module names");
    for (const auto &name : *m) {
      if (!name.is_string())
        return f.fail("modules_to_not_convert",
                      "modules_to_not_convert must be a list of module names");
      ir::CheckpointQuant::ModuleRule r;
      r.match = ir::CheckpointQuant::ModuleRule::Match::Substring;
      r.pattern = name.get<std::string>();
      r.quantized = false;
      r.origin = fmt::format("modules_to_not_convert '{}'", r.pattern);
      out.rules.push_back(r);
    }
  }
  out.defaults = s;
  out.defaultQuantized = true;
  f.inert({"quant_method", "backend", "do_fuse", "fuse_max_seq_len",
           "modules_to_fuse", "exllama_config"});
  return f.finish();
}

/// One compressed-tensors config group's `weights` scheme under `format`.
bool readCtWeights(Fields &w, const std::string &format, ir::WeightScheme &s) {
  int64_t bits = 0, group = 0;
  std::string type = "int", strategy, actorder;
  if (!w.integer("num_bits", bits) || !w.string("type", type) ||
      !w.boolean("symmetric", s.symmetric) || !w.integer("group_size", group) ||
      !w.string("strategy", strategy) || !w.string("actorder", actorder))
    return false;
  bool dynamic = false;
  if (w.get("dynamic") && !w.boolean("dynamic", dynamic))
    return false;
  if (dynamic)
    return w.fail("dynamic", "dynamic weight scales are not supported (the "
                             "checkpoint stores static ones)");
  w.inert({"observer", "observer_kwargs", "scale_dtype", "zp_dtype"});
  if (format == "pack-quantized") {
    if (type != "int")
      return w.fail("type",
                    fmt::format("pack-quantized weights of type '{}' are not "
                                "supported (int)",
                                type));
    if (bits < 2 || bits > 8)
      return w.fail("num_bits",
                    fmt::format("pack-quantized num_bits {} is not supported "
                                "(2 to 8)",
                                bits));
    if (strategy == "group") {
      if (group <= 0)
        return w.fail("group_size", "strategy 'group' needs a positive "
                                    "group_size");
      s.group = group;
    } else if (strategy == "channel") {
      s.group = -1;
    } else if (strategy == "tensor") {
      s.group = 0;
    } else {
      return w.fail("strategy",
                    fmt::format("pack-quantized strategy '{}' is not "
                                "supported (group, channel, tensor)",
                                strategy));
    }
    if (!w.unsupportedUnlessEmpty("block_structure",
                                  "integer block strategies are not read"))
      return false;
    if (actorder == "group")
      s.needsGIdx = true;
    else if (!actorder.empty() && actorder != "weight")
      return w.fail("actorder",
                    fmt::format("actorder '{}' is not supported (group, "
                                "weight)",
                                actorder));
    s.type = ir::WeightScheme::Type::Int;
    s.bits = static_cast<int>(bits);
    return w.finish();
  }
  // float-quantized: FP8 e4m3, dequantized while streaming.
  if (type != "float" || bits != 8)
    return w.fail(type != "float" ? "type" : "num_bits",
                  fmt::format("float-quantized weights of type '{}' with {} "
                              "bits are not supported (float, 8: FP8 e4m3)",
                              type, bits));
  if (!s.symmetric)
    return w.fail("symmetric", "asymmetric FP8 is not supported");
  if (!actorder.empty())
    return w.fail("actorder", "act-order FP8 is not supported");
  s.type = ir::WeightScheme::Type::Float;
  s.bits = 8;
  if (strategy == "tensor") {
    s.group = 0;
  } else if (strategy == "channel") {
    s.group = -1;
  } else if (strategy == "block") {
    const nlohmann::json *b = w.get("block_structure");
    if (!b || !b->is_array() || b->size() != 2 ||
        !(*b)[0].is_number_integer() || !(*b)[1].is_number_integer() ||
        (*b)[0].get<int64_t>() <= 0 || (*b)[1].get<int64_t>() <= 0)
      return w.fail("block_structure", "strategy 'block' needs "
                                       "block_structure [rows, cols]");
    s.blockRows = (*b)[0].get<int64_t>();
    s.blockCols = (*b)[1].get<int64_t>();
  } else {
    return w.fail("strategy",
                  fmt::format("float-quantized strategy '{}' is not "
                              "supported (tensor, channel, block)",
                              strategy));
  }
  w.get("block_structure");
  if (group > 0 && strategy != "group")
    return w.fail("group_size", fmt::format("group_size {} with strategy '{}'",
                                            group, strategy));
  return w.finish();
}

/// A module name pattern of compressed-tensors (targets, ignore).
bool ctRule(Fields &f, const std::string &key, const std::string &entry,
            bool quantized, bool target, ir::CheckpointQuant::ModuleRule &r) {
  using Match = ir::CheckpointQuant::ModuleRule::Match;
  r.quantized = quantized;
  if (entry.rfind("re:", 0) == 0) {
    r.match = Match::Regex;
    r.pattern = entry.substr(3);
    return checkRegex(f, key, r.pattern);
  }
  if (target && entry == "Linear") {
    r.match = Match::Any;
    return true;
  }
  // Other class names (Embedding, MoE blocks, attention) are not Linear
  // layers: archc cannot tell which modules they select.
  if (target && !entry.empty() &&
      std::isupper(static_cast<unsigned char>(entry[0])))
    return f.fail(key, fmt::format("target class '{}' is not supported "
                                   "(Linear, 're:' patterns, module names)",
                                   entry));
  r.match = Match::Exact;
  r.pattern = entry;
  return true;
}

/// compressed-tensors (llm-compressor, RedHatAI / neuralmagic releases).
bool readCompressedTensors(Fields &f, ir::CheckpointQuant &out) {
  std::string format, status = "compressed";
  if (!f.string("format", format) || !f.string("quantization_status", status))
    return false;
  if (status != "compressed")
    return f.fail("quantization_status",
                  fmt::format("quantization_status '{}' is not supported "
                              "(compressed: the released layout)",
                              status));
  if (!f.unsupportedUnlessEmpty("kv_cache_scheme",
                                "archc keeps the KV cache in the model's "
                                "dtype") ||
      !f.unsupportedUnlessEmpty("sparsity_config",
                                "sparse-compressed weights are not read") ||
      !f.unsupportedUnlessEmpty("transform_config",
                                "transformed (rotated) weights need the "
                                "transform at run time"))
    return false;
  using Rule = ir::CheckpointQuant::ModuleRule;
  if (const nlohmann::json *ig = f.get("ignore")) {
    if (!ig->is_array())
      return f.fail("ignore", "ignore must be a list of module names and "
                              "'re:' patterns");
    for (const auto &e : *ig) {
      Rule r;
      if (!e.is_string())
        return f.fail("ignore", "ignore must be a list of module names and "
                                "'re:' patterns");
      if (!ctRule(f, "ignore", e.get<std::string>(), false, false, r))
        return false;
      r.origin = fmt::format("ignore '{}'", e.get<std::string>());
      out.rules.push_back(r);
    }
  }
  const nlohmann::json *groups = f.get("config_groups");
  if (!groups || !groups->is_object() || groups->empty())
    return f.fail("config_groups", "compressed-tensors quantization_config "
                                   "needs config_groups");
  Fields gs(f.config, f.diags, *groups, f.pointer("config_groups"),
            "quantization_config.config_groups");
  for (auto it = groups->begin(); it != groups->end(); ++it) {
    gs.read.insert(it.key());
    if (!it->is_object())
      return gs.fail(it.key(), "a config group must be an object");
    Fields g(f.config, f.diags, *it, gs.pointer(it.key()),
             fmt::format("config_groups.{}", it.key()));
    std::string groupFormat = format;
    if (!g.string("format", groupFormat))
      return false;
    if (groupFormat != "pack-quantized" && groupFormat != "float-quantized")
      return g.fail(g.get("format") ? "format" : "",
                    fmt::format("compressed-tensors format '{}' is not "
                                "supported (pack-quantized: int weights as "
                                "MatMulNBits codes; float-quantized: FP8, "
                                "dequantized){}",
                                groupFormat,
                                groupFormat == "int-quantized" ||
                                        groupFormat == "naive-quantized"
                                    ? "; int-quantized releases are W8A8, "
                                      "whose activation quantization a "
                                      "weight-only model does not reproduce"
                                    : ""));
    for (const char *act : {"input_activations", "output_activations"})
      if (!g.unsupportedUnlessEmpty(
              act, "archc emits weight-only models: quantizing activations "
                   "(W8A8, FP8 dynamic) would not be reproduced"))
        return false;
    const nlohmann::json *w = g.get("weights");
    if (!w || !w->is_object())
      return g.fail("weights", "a config group without weights quantizes no "
                               "weight; archc reads weight schemes only");
    Fields wf(f.config, f.diags, *w, g.pointer("weights"),
              fmt::format("config_groups.{}.weights", it.key()));
    Rule proto;
    if (!readCtWeights(wf, groupFormat, proto.scheme))
      return false;
    const nlohmann::json *targets = g.get("targets");
    if (!targets || !targets->is_array() || targets->empty())
      return g.fail("targets", "a config group needs a list of targets");
    for (const auto &t : *targets) {
      Rule r = proto;
      if (!t.is_string())
        return g.fail("targets", "targets must be strings");
      if (!ctRule(g, "targets", t.get<std::string>(), true, true, r))
        return false;
      r.origin = fmt::format("config_groups.{} target '{}'", it.key(),
                             t.get<std::string>());
      out.rules.push_back(r);
    }
    if (!g.finish())
      return false;
  }
  out.defaultQuantized = false;
  f.inert({"quant_method", "global_compression_ratio", "version", "provider"});
  return f.finish();
}

} // namespace

bool readPrequantConfig(const JsonSource &config, DiagnosticEngine &diags,
                        const nlohmann::json &qc, const std::string &at,
                        const std::string &method, ir::CheckpointQuant &out) {
  Fields f(config, diags, qc, at, "quantization_config");
  if (method == "gptq") {
    out.method = ir::CheckpointQuant::Method::GPTQ;
    return readGptq(f, out);
  }
  if (method == "awq") {
    out.method = ir::CheckpointQuant::Method::AWQ;
    out.gptqV1 = false;
    return readAwq(f, out);
  }
  out.method = ir::CheckpointQuant::Method::CompressedTensors;
  out.gptqV1 = false;
  return readCompressedTensors(f, out);
}

bool checkReleaseConfigKeys(const JsonSource &config, DiagnosticEngine &diags,
                            const nlohmann::json &qc, const std::string &at,
                            const std::string &method) {
  Fields f(config, diags, qc, at, "quantization_config");
  // Read by readCheckpointQuant; `modules_to_not_convert` and
  // `activation_scheme: dynamic` say what the tensors' dtypes already say
  // (binding reads which weights are quantized from the files).
  f.inert({"quant_method", "fmt", "weight_block_size", "scale_fmt",
           "modules_to_not_convert", "ignored_layers"});
  if (method == "fp8") {
    std::string scheme = "dynamic";
    if (!f.string("activation_scheme", scheme))
      return false;
    if (scheme != "dynamic")
      return f.fail("activation_scheme",
                    fmt::format("activation_scheme '{}' is not supported: "
                                "static activation scales would not be "
                                "reproduced by a weight-only model",
                                scheme));
  }
  return f.finish();
}

} // namespace archc
