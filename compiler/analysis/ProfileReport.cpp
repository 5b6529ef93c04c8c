//===- ProfileReport.cpp - -emit=profile ----------------------------------===//
//
// This file implements the profile back end. Every number is computed once
// into the JSON document; the table, CSV and Markdown views are renderings
// of that document, so they can never disagree with it.
//
//===----------------------------------------------------------------------===//
#include "analysis/ProfileReport.h"

#include "analysis/Roofline.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <optional>

namespace archc {

using json = nlohmann::ordered_json;

namespace {

json costJson(const Cost &c) {
  return json{{"macs", c.macs},
              {"flops", c.flops},
              {"matmul_flops", c.matmulFlops},
              {"transcendentals", c.transcendentals},
              {"weight_bytes", c.weightBytes},
              {"activation_bytes", c.activationBytes},
              {"kv_read_bytes", c.kvReadBytes},
              {"kv_write_bytes", c.kvWriteBytes},
              {"bytes", c.bytes()}};
}

/// Parameters per group (embedding, each layer kind, head).
std::map<std::string, int64_t> groupParams(const ir::Module &m) {
  std::map<std::string, int64_t> out;
  auto elems = [&](const std::string &pattern) -> int64_t {
    const ir::WeightDecl *w = m.findWeight(pattern);
    if (!w || w->buffer) // buffers are not parameters
      return 0;
    int64_t n = w->type.numElements().getConstant().value_or(0);
    return w->experts ? n * w->experts : n;
  };
  bool seenRepeat = false;
  for (const auto &op : m.graph.body.getOps()) {
    if (op->getKind() == ir::OpKind::Repeat) {
      seenRepeat = true;
      for (const auto &region : op->getRegions()) {
        std::string g = "layers " + ir::formatLayers(region->layers);
        int64_t per = 0;
        ir::walk(*region, [&](const ir::Op &o) {
          if (o.getKind() == ir::OpKind::Param)
            per += elems(o.attr<std::string>("name"));
        });
        out[g] += per * static_cast<int64_t>(region->layers.size());
      }
      continue;
    }
    if (op->getKind() == ir::OpKind::Param)
      out[seenRepeat ? "head" : "embedding"] +=
          elems(op->attr<std::string>("name"));
  }
  return out;
}

/// The row label of an op: its mnemonic and the line that says most about
/// it. A std line says less than the family's own: the label is the
/// innermost call site in the compiled family's file (`mainFile`, the
/// child's defs when the arch extends another), else in the file of the
/// outermost call site (the model body, the base's file for an inherited
/// model), so that a std skeleton (decoder_lm) calling back into the
/// family's layer code does not label every op with its own call. An op
/// written in one of those files keeps its own line.
std::string opLabel(const ir::Op &op, const SourceMgr &sm,
                    const std::string &mainFile) {
  std::string s = op.getMnemonic();
  if (op.getKind() == ir::OpKind::Param)
    s += " " + op.attr<std::string>("name");
  auto fileName = [&](const SourceRange &x) {
    return std::filesystem::path(sm.getName(x.begin.fileId))
        .filename()
        .string();
  };
  SourceRange r = op.getLoc().range;
  const ir::InlineFrame *outermost = op.getLoc().inlinedAt.get();
  while (outermost && outermost->parent)
    outermost = outermost->parent.get();
  if (outermost && r.isValid() && fileName(r) != mainFile) {
    const ir::InlineFrame *inMain = nullptr, *inModel = nullptr;
    for (const ir::InlineFrame *f = op.getLoc().inlinedAt.get(); f;
         f = f->parent.get()) {
      if (!inMain && fileName(f->callSite) == mainFile)
        inMain = f;
      if (!inModel &&
          f->callSite.begin.fileId == outermost->callSite.begin.fileId)
        inModel = f;
    }
    if (inMain)
      r = inMain->callSite;
    else if (r.begin.fileId != outermost->callSite.begin.fileId && inModel)
      r = inModel->callSite;
  }
  if (r.isValid())
    s += fmt::format(" @{}:{}", fileName(r), r.begin.line);
  return s;
}

json phaseJson(const std::string &name, const ir::Module &m,
               const ModelFacts &facts, const ProfilePoint &p,
               const std::vector<const Device *> &devices,
               const RuntimeSettings &rt, const Precision &bits, bool perOp,
               const SourceMgr &sm) {
  std::vector<OpProfile> ops = profileOps(m, p, bits);
  Cost total;
  std::vector<std::string> order;
  std::map<std::string, Cost> groups;
  std::map<std::string, double> groupLayers;
  for (const OpProfile &o : ops) {
    total += o.cost;
    if (!groups.count(o.group))
      order.push_back(o.group);
    groups[o.group] += o.cost;
    groupLayers[o.group] = o.instances;
  }
  int64_t tokens = p.batch * p.seq;
  json j;
  j["phase"] = name;
  j["batch"] = p.batch;
  j["seq"] = p.seq;
  j["past"] = p.past;
  j["tokens"] = tokens;
  j["context"] = p.past + p.seq;
  j["activated_params_expected"] =
      facts.expectedActivatedParams(static_cast<double>(tokens));
  j["activated_params_worst_case"] = facts.worstCaseActivatedParams(tokens);
  if (auto enc = p.dims.find("enc_seq"); enc != p.dims.end())
    j["encoder_positions"] = enc->second;
  j["kv_bytes"] = kvBytesAt(facts, p, rt.kvBits);
  j["cost"] = costJson(total);
  j["arithmetic_intensity"] =
      total.bytes() > 0 ? total.flops / total.bytes() : 0;
  std::map<std::string, int64_t> gparams = groupParams(m);
  json devs = json::object();
  std::vector<PhaseTiming> timings;
  for (const Device *d : devices) {
    PhaseTiming t = timePhase(ops, facts, p, *d, rt);
    devs[d->id] = json{
        {"time_s", t.time},
        {"compute_s", t.computeTime},
        {"memory_s", t.memoryTime},
        {"comm_s", t.commTime},
        {"memory_bound_fraction", t.time > 0 ? t.memoryBoundTime / t.time : 0},
        {"bound", t.memoryBoundTime * 2 > t.time ? "memory" : "compute"},
        {"tokens_per_s", t.tokensPerSecond},
        {"memory_needed_bytes", t.memoryNeeded},
        {"fits", t.fits}};
    timings.push_back(std::move(t));
  }
  j["devices"] = devs;
  json gs = json::array();
  for (const std::string &g : order) {
    json gj{{"group", g},
            {"layers", groupLayers[g]},
            {"params", gparams.count(g) ? gparams[g] : 0},
            {"cost", costJson(groups[g])}};
    json gt = json::object();
    for (size_t di = 0; di < devices.size(); ++di) {
      double t = 0;
      for (size_t k = 0; k < ops.size(); ++k)
        if (ops[k].group == g)
          t += timings[di].ops[k].time;
      gt[devices[di]->id] = t;
    }
    gj["time_s"] = gt;
    gs.push_back(gj);
  }
  j["groups"] = gs;
  if (perOp) {
    json os = json::array();
    for (size_t k = 0; k < ops.size(); ++k) {
      const OpProfile &o = ops[k];
      if (o.cost.flops == 0 && o.cost.bytes() == 0)
        continue;
      json oj{{"op", opLabel(*o.op, sm, m.sourceFile)},
              {"group", o.group},
              {"instances", o.instances},
              {"cost", costJson(o.cost)}};
      json ot = json::object();
      for (size_t di = 0; di < devices.size(); ++di)
        ot[devices[di]->id] = json{
            {"time_s", timings[di].ops[k].time},
            {"bound", timings[di].ops[k].memoryBound ? "memory" : "compute"}};
      oj["devices"] = ot;
      os.push_back(oj);
    }
    j["ops"] = os;
  }
  return j;
}

} // namespace

namespace {
/// An int the arch recorded from its config (a `let`), or nullopt.
std::optional<int64_t> infoInt(const ir::Module &m, const std::string &key) {
  auto it = m.info.find(key);
  if (it == m.info.end())
    return std::nullopt;
  if (auto *v = std::get_if<int64_t>(&it->second))
    return *v;
  return std::nullopt;
}

/// The vision figures: the encoder's parameters and cost per image (at the
/// arch's image size), and per point the TTFT of a prompt of `seq` text
/// tokens with `images` images = the encoder for those images + the prefill
/// of seq + images x tokens-per-image tokens.
bool visionJson(const ir::Module &v, const ir::Module &text,
                const ModelFacts &textFacts, const ProfileRequest &req,
                const std::vector<int64_t> &seqs,
                const std::vector<const Device *> &devices,
                const RuntimeSettings &rt, const Precision &bits,
                const SourceMgr &sm, DiagnosticEngine &diags, json &out) {
  std::optional<int64_t> tokens = infoInt(v, "image_tokens_per_image");
  std::optional<int64_t> size = infoInt(v, "vision_image_size");
  if (!size)
    size = infoInt(v, "profile_image_size");
  if (!tokens || !size) {
    diags.error(SourceRange(),
                "the vision encoder of '{}' declares no image_tokens_per_image "
                "and image size (config lets vision_image_size or "
                "profile_image_size) for the profile",
                v.name);
    return false;
  }
  ModelFacts vf = computeModelFacts(v);
  auto point = [&](int64_t images) {
    ProfilePoint p;
    p.batch = 1;
    p.seq = 1;
    p.dims = {{"images", images},
              {"max_images", images},
              {"image_tokens", images * *tokens}};
    return p;
  };
  json vis{{"graph", "vision_encoder"},          {"params", vf.params},
           {"weight_tensors", vf.weightTensors}, {"image_size", *size},
           {"image_tokens_per_image", *tokens},  {"images", req.images}};
  vis["per_image"] =
      phaseJson("vision", v, vf, point(1), devices, rt, bits, false, sm);
  json with = json::array();
  for (int64_t b : req.batches)
    for (int64_t s : seqs) {
      int64_t n = req.images * b;
      json pt{{"batch", b},
              {"seq", s},
              {"images", req.images},
              {"prompt_tokens", s + req.images * *tokens}};
      json enc =
          phaseJson("vision", v, vf, point(n), devices, rt, bits, false, sm);
      json pre = phaseJson("prefill", text, textFacts,
                           ProfilePoint{b, s + req.images * *tokens, 0, {}},
                           devices, rt, bits, false, sm);
      json ttft = json::object();
      for (const Device *d : devices)
        ttft[d->id] = enc["devices"][d->id]["time_s"].get<double>() +
                      pre["devices"][d->id]["time_s"].get<double>();
      pt["vision"] = enc;
      pt["prefill"] = pre;
      pt["ttft_s"] = ttft;
      with.push_back(pt);
    }
  vis["with_images"] = with;
  out["vision"] = vis;
  return true;
}
} // namespace

namespace {
/// The int length of a graph's output axis, when constant.
std::optional<int64_t> outputDim(const ir::Module &m, size_t axis) {
  std::optional<int64_t> n;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    if (op.getKind() == ir::OpKind::Return && op.getNumOperands() &&
        op.getOperand(0)->type.rank() > axis)
      n = op.getOperand(0)->type.dims[axis].getConstant();
  });
  return n;
}

/// Log-mel frames per second of Whisper's feature extractor (hop length
/// 160 at 16 kHz): the encoder's fixed window of 2 x max_source_positions
/// frames is 30 s of audio.
constexpr int64_t kWhisperFramesPerSecond = 100;

/// An encoder-decoder's points: per (batch, seq), the encoder over the
/// sequences ("encode": seq source tokens; Whisper: its fixed audio window,
/// seq being the tokens decoded), the first decoder call ("first_step": one
/// token, computing the cross-attention keys and values from the encoder
/// output), TTFT = encode + first_step, and a decoder call per past
/// ("decode": one token, past tokens and the encoder positions cached).
bool seq2seqPoints(const ir::Module &m, const ir::Module &encoder,
                   const ir::Module &decoder, const ModelFacts &facts,
                   const ProfileRequest &req,
                   const std::vector<const Device *> &devices,
                   const RuntimeSettings &rt, const Precision &bits,
                   const SourceMgr &sm, DiagnosticEngine &diags, json &out) {
  bool speech = false;
  for (const auto &arg : encoder.graph.body.getArguments())
    speech |= arg->name == "input_features";
  // Weights (memory needed) are the whole model's; states the decoder's.
  ModelFacts encodeFacts = facts;
  encodeFacts.states.clear();
  ModelFacts decodeFacts = facts;
  decodeFacts.states = computeModelFacts(decoder).states;
  json &model = out["model"];
  model["kind"] = speech ? "speech" : "encoder-decoder";
  model["kv_bytes_per_token"] = decodeFacts.kvBytesPerToken(rt.kvBits);
  model["cross_kv_bytes_per_encoder_position"] =
      decodeFacts.crossBytesPerEncoderPosition(rt.kvBits);
  json states = json::array();
  for (const StateFacts &s : decodeFacts.states)
    states.push_back(
        json{{"name", s.name},
             {"layers", ir::formatLayers(s.layers)},
             {"num_layers", s.layers.size()},
             {"elements_per_token", s.elementsPerToken},
             {"per", s.perEncoderPosition ? "encoder position" : "token"},
             {"bits", s.bits > 0 ? s.bits : rt.kvBits}});
  model["states"] = states;
  std::optional<int64_t> window, maxTarget;
  std::vector<int64_t> seqs = req.seqs;
  if (speech) {
    window = outputDim(encoder, 1);
    maxTarget = infoInt(decoder, "max_target_positions");
    if (!window || !maxTarget) {
      diags.error(SourceRange(),
                  "the speech encoder of '{}' has no constant output length "
                  "or its decoder no max_target_positions for the profile",
                  m.name);
      return false;
    }
    int64_t frames = 2 * *window;
    model["audio_window_frames"] = frames;
    model["audio_window_s"] =
        static_cast<double>(frames) / kWhisperFramesPerSecond;
    model["max_target_positions"] = *maxTarget;
    if (seqs.empty())
      seqs = {*maxTarget / 2};
  } else if (seqs.empty()) {
    seqs = {2048};
  }
  json points = json::array();
  for (int64_t b : req.batches)
    for (int64_t s : seqs) {
      int64_t encPositions = speech ? *window : s;
      ProfilePoint ep{b, encPositions, 0};
      if (speech)
        ep.dims = {{"frames", 2 * *window}};
      json pt{{"batch", b}, {"seq", s}};
      pt["encode"] = phaseJson("encode", encoder, encodeFacts, ep, devices, rt,
                               bits, req.perOp, sm);
      std::map<std::string, int64_t> cross = {{"enc_seq", encPositions},
                                              {"enc_past", 0}};
      json first = phaseJson("first_step", decoder, decodeFacts,
                             ProfilePoint{b, 1, 0, cross}, devices, rt, bits,
                             req.perOp, sm);
      json ttft = json::object();
      for (const Device *d : devices)
        ttft[d->id] = pt["encode"]["devices"][d->id]["time_s"].get<double>() +
                      first["devices"][d->id]["time_s"].get<double>();
      pt["first_step"] = first;
      pt["ttft_s"] = ttft;
      if (speech) {
        // The encoder's cost spread over the seconds of its window.
        double seconds = model["audio_window_s"].get<double>();
        json perSecond{
            {"flops", pt["encode"]["cost"]["flops"].get<double>() / seconds}};
        json t = json::object();
        for (const Device *d : devices)
          t[d->id] =
              pt["encode"]["devices"][d->id]["time_s"].get<double>() / seconds;
        perSecond["time_s"] = t;
        pt["encode_per_second_of_audio"] = perSecond;
      }
      std::vector<int64_t> pasts =
          req.pasts.empty() ? std::vector<int64_t>{s} : req.pasts;
      json decodes = json::array();
      for (int64_t past : pasts) {
        if (speech && past + 1 > *maxTarget) {
          diags.error(SourceRange(),
                      "a decode step after {} tokens needs {} decoder "
                      "positions; '{}' has {} (max_target_positions): "
                      "profile --seq/--past below it",
                      past, past + 1, m.name, *maxTarget);
          return false;
        }
        std::map<std::string, int64_t> cached = {{"enc_seq", encPositions},
                                                 {"enc_past", encPositions}};
        ProfilePoint dp{b, 1, past, cached};
        dp.crossCached = true;
        decodes.push_back(phaseJson("decode", decoder, decodeFacts, dp, devices,
                                    rt, bits, req.perOp, sm));
      }
      pt["decode"] = decodes;
      points.push_back(pt);
    }
  out["points"] = points;
  return true;
}
} // namespace

bool computeProfile(const ir::Module &m, const ProfileRequest &req,
                    SourceMgr &sm, DiagnosticEngine &diags, json &out) {
  std::string dir = runtimeProfileDir(req.profileDir);
  RuntimeSettings rt;
  if (!loadRuntime(req.runtime,
                   (std::filesystem::path(dir) / "runtime.yaml").string(), sm,
                   diags, rt))
    return false;
  // Only the requested devices' files are read.
  std::vector<Device> loaded(req.devices.size());
  std::vector<const Device *> devices;
  for (size_t i = 0; i < req.devices.size(); ++i) {
    if (!loadDevice((std::filesystem::path(dir) / "devices").string(),
                    req.devices[i], sm, diags, loaded[i]))
      return false;
    // The default runtime computes in bf16; a device without bf16 units
    // runs that work at its fp16 peak (the same 16-bit widths) and says so.
    // An explicit --runtime must fit the device.
    if (loaded[i].peak(rt.compute) <= 0 && req.runtime.empty() &&
        rt.compute == "bf16" && loaded[i].peak("fp16") > 0) {
      loaded[i].matrixDtype = "fp16";
      diags.report(Severity::Note, loaded[i].loc,
                   fmt::format("device '{}' has no bf16 peak: the default "
                               "runtime's bf16 work is timed at its fp16 peak",
                               req.devices[i]));
    }
    if (loaded[i].matrixPeak(rt.compute) <= 0) {
      diags.error(loaded[i].loc,
                  "device '{}' has no {} peak; choose another "
                  "--runtime",
                  req.devices[i], rt.compute);
      return false;
    }
    devices.push_back(&loaded[i]);
  }

  // Token counts are checked before anything is computed at a point.
  int64_t imageTokens = 0;
  if (req.vision &&
      __builtin_mul_overflow(
          req.images,
          infoInt(*req.vision, "image_tokens_per_image").value_or(0),
          &imageTokens))
    imageTokens = INT64_MAX; // over the limit below
  for (int64_t b : req.batches)
    for (int64_t s : req.seqs.empty() ? std::vector<int64_t>{2048} : req.seqs)
      for (int64_t past :
           req.pasts.empty() ? std::vector<int64_t>{s} : req.pasts)
        if (auto e = checkProfilePoint(b, s, past, imageTokens)) {
          diags.error(SourceRange(), "{}", *e);
          return false;
        }
  ModelFacts facts = computeModelFacts(m);
  Precision bits{rt.effectiveWeightBits(), rt.activationBits, rt.kvBits};
  // --per-op keeps an entry per op of every phase, point and device: a
  // sweep within the row limit (Options.h) could still hold millions.
  if (req.perOp) {
    uint64_t ops = 0;
    for (const OpProfile &o : profileOps(m, ProfilePoint{1, 1, 1}, bits))
      ops += o.cost.flops != 0 || o.cost.bytes() != 0;
    uint64_t phases = req.batches.size() *
                      std::max<size_t>(1, req.seqs.size()) *
                      (1 + std::max<size_t>(1, req.pasts.size()));
    uint64_t entries = phases * ops * std::max<size_t>(1, devices.size());
    if (entries > kMaxProfileOpEntries) {
      diags.error(SourceRange(),
                  "--per-op over this sweep holds {} op entries ({} phases x "
                  "{} ops x {} devices), more than the limit of {}; sweep "
                  "fewer points with --per-op",
                  entries, phases, ops, std::max<size_t>(1, devices.size()),
                  kMaxProfileOpEntries);
      return false;
    }
  }
  // Weights as stored: the checkpoint's bytes (--weights), the ONNX
  // writer's quantized layout (--quant), or a block-quantized runtime
  // preset (w4a16, ...: Linear weights at its bits and group size, others
  // at the model dtype); otherwise every weight at the preset's bits.
  ir::WeightStorage storage;
  std::string storageNote;
  if (req.checkpointBytes) {
    for (const ir::WeightDecl &w : m.weights) {
      ir::WeightStorage::Forms f;
      auto it = req.checkpointBytes->find(ir::weightKey(w.pattern, w.type));
      f.bytes = it != req.checkpointBytes->end() ? it->second : 0;
      double elements =
          static_cast<double>(w.type.numElements().getConstant().value_or(0)) *
          static_cast<double>(w.count());
      f.floatBits = elements > 0 ? f.bytes * 8 / elements : 0;
      storage.totalBytes += f.bytes;
      storage.byPattern[ir::weightKey(w.pattern, w.type)] = f;
    }
    storageNote = "checkpoint bytes (" + req.checkpointFormat + ")";
  } else {
    ir::QuantOptions q = req.quant;
    if (q.enabled()) {
      storageNote =
          fmt::format("--quant int{} block {} {} (MatMulNBits), scales in {}",
                      q.bits, q.block, q.symmetric ? "symmetric" : "asymmetric",
                      ir::dtypeName(m.activationDType));
    } else if (rt.groupSize > 0 && (rt.weightBits == 4 || rt.weightBits == 8)) {
      q.bits = static_cast<int>(rt.weightBits);
      q.block = rt.groupSize;
      q.scaleBits = rt.scaleBits;
      storageNote = fmt::format("runtime {}: Linear weights int{} with a "
                                "{}-bit scale per {}, others {}",
                                rt.name, q.bits, rt.scaleBits, q.block,
                                ir::dtypeName(m.activationDType));
    }
    if (q.enabled())
      storage = ir::computeWeightStorage(m, q);
  }
  if (!storageNote.empty()) {
    bits.storage = &storage;
    facts.storedWeightBytes = storage.totalBytes;
  }
  out = json::object();
  out["schema"] = "archc.profile/1";
  json model{
      {"arch", m.name},
      {"config", m.configFile},
      {"params", facts.params},
      {"weight_tensors", facts.weightTensors},
      {"activated_params_per_token", facts.activatedParamsPerToken()},
      {"expert_params", facts.expertParams},
      {"layers", facts.layers},
      {"hidden", facts.hidden},
      {"weight_bytes", facts.storedWeightBytes > 0
                           ? facts.storedWeightBytes
                           : static_cast<double>(facts.weightElements()) *
                                 rt.effectiveWeightBits() / 8},
      {"kv_bytes_per_token", facts.kvBytesPerToken(rt.kvBits)},
      {"state_bytes_per_sequence", facts.stateBytesPerSequence(rt.kvBits)}};
  json states = json::array();
  for (const StateFacts &s : facts.states)
    states.push_back(json{{"name", s.name},
                          {"layers", ir::formatLayers(s.layers)},
                          {"num_layers", s.layers.size()},
                          {"elements_per_token", s.elementsPerToken},
                          {"elements_per_sequence", s.elementsPerSequence},
                          {"bits", s.bits > 0 ? s.bits : rt.kvBits},
                          {"window", s.window},
                          {"stride", s.stride}});
  if (!storageNote.empty())
    model["weight_storage"] = storageNote;
  model["states"] = states;
  json moe = json::array();
  for (const MoeFacts &f : facts.moe)
    moe.push_back(json{{"experts", f.experts},
                       {"top_k", f.topK},
                       {"params_per_expert", f.paramsPerExpert},
                       {"layers", f.layers}});
  model["moe"] = moe;
  out["model"] = model;
  out["runtime"] = json{{"name", rt.name},
                        {"compute", rt.compute},
                        {"weight_bits", rt.weightBits},
                        {"effective_weight_bits", rt.effectiveWeightBits()},
                        {"activation_bits", rt.activationBits},
                        {"kv_bits", rt.kvBits},
                        {"compute_efficiency", rt.computeEfficiency},
                        {"memory_efficiency", rt.memoryEfficiency},
                        {"tensor_parallel", rt.tensorParallel}};
  out["latency_model"] =
      "roofline per op, ops unfused: op time = max(matmul FLOPs / (matrix "
      "peak of the compute dtype x compute_efficiency) + other FLOPs / (fp32 "
      "peak x compute_efficiency), bytes / (bandwidth x memory_efficiency)); "
      "phase time = sum of op times (+ tensor-parallel all-reduces)";
  json devs = json::array();
  for (const Device *d : devices)
    devs.push_back(json{
        {"id", d->id},
        {"name", d->name},
        {"memory_gb", d->memoryGB},
        {"memory_bandwidth_gbs", d->bandwidthGBs},
        {"interconnect_gbs", d->interconnectGBs},
        {"matrix_dtype", d->matrixDtype.empty() ? rt.compute : d->matrixDtype},
        {"matrix_peak_tflops", d->matrixPeak(rt.compute) / 1e12},
        {"vector_peak_tflops", d->peak("fp32") / 1e12}});
  out["devices"] = devs;
  json points = json::array();
  std::vector<int64_t> seqs =
      req.seqs.empty() ? std::vector<int64_t>{2048} : req.seqs;
  if (req.encoder && req.decoder) {
    if (!seq2seqPoints(m, *req.encoder, *req.decoder, facts, req, devices, rt,
                       bits, sm, diags, out))
      return false;
    return true;
  }
  if (m.graph.stateInputs.empty() && !req.vision) {
    // An encoder (BERT, ModernBERT, ...): one forward call per batch of
    // sequences, no decode-time state.
    out["model"]["kind"] = "encoder";
    for (int64_t b : req.batches)
      for (int64_t s : seqs)
        points.push_back(json{
            {"batch", b},
            {"seq", s},
            {"forward", phaseJson("forward", m, facts, ProfilePoint{b, s, 0},
                                  devices, rt, bits, req.perOp, sm)}});
    out["points"] = points;
    return true;
  }
  out["model"]["kind"] = req.vision ? "vision-language" : "decoder";
  for (int64_t b : req.batches)
    for (int64_t s : seqs) {
      json pt;
      pt["batch"] = b;
      pt["seq"] = s;
      pt["prefill"] = phaseJson("prefill", m, facts, ProfilePoint{b, s, 0},
                                devices, rt, bits, req.perOp, sm);
      std::vector<int64_t> pasts =
          req.pasts.empty() ? std::vector<int64_t>{s} : req.pasts;
      json decodes = json::array();
      for (int64_t past : pasts)
        decodes.push_back(phaseJson("decode", m, facts,
                                    ProfilePoint{b, 1, past}, devices, rt, bits,
                                    req.perOp, sm));
      pt["decode"] = decodes;
      points.push_back(pt);
    }
  out["points"] = points;
  if (req.vision && !visionJson(*req.vision, m, facts, req, seqs, devices, rt,
                                bits, sm, diags, out))
    return false;
  return true;
}

} // namespace archc
