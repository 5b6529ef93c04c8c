//===- Profile.h - Parameters, work and traffic of a model ------*- C++ -*-===//
//
// This file declares the profile analysis: exact parameter counts (tied
// tensors once), activated parameters of MoE models, KV-cache / state bytes,
// and per-op costs (MACs, FLOPs, bytes moved) of one forward call at a
// point (batch, seq, past). It runs on the compact IR after kv-cache: ops in
// a layer kind count once per layer of that kind; expert bodies count for
// the k experts each token uses (compute) and the distinct experts a batch
// touches (weight traffic). The conventions are in docs/profile.md.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_ANALYSIS_PROFILE_H
#define ARCHC_ANALYSIS_PROFILE_H

#include "ir/Cost.h"
#include "ir/IR.h"
#include "ir/WeightQuant.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace archc {

/// The most tokens a profile point may process or hold in its context
/// (docs/limits.md): far beyond any real batch, and small enough that every
/// token count, and products of it with a model's widths, are exact.
constexpr int64_t kMaxProfileTokens = int64_t(1) << 48;

/// An error message when the point (batch, seq new tokens plus
/// `extraPerSequence` image tokens per sequence, past cached ones) is over
/// kMaxProfileTokens, nullopt when it can be profiled.
std::optional<std::string> checkProfilePoint(int64_t batch, int64_t seq,
                                             int64_t past,
                                             int64_t extraPerSequence);

/// Where a forward call is evaluated.
struct ProfilePoint {
  int64_t batch = 1;
  int64_t seq = 1;  ///< new tokens per sequence
  int64_t past = 0; ///< tokens already in the cache
  /// Other symbolic dims (a vision encoder's images, image_tokens; an
  /// encoder-decoder's enc_seq and enc_past: encoder positions).
  std::map<std::string, int64_t> dims = {};
  /// An encoder-decoder's cached step (use_cache_branch true): the
  /// cross-attention keys and values are carried, so the ops that compute
  /// a cache computed once (their projections of the encoder output) do
  /// not run.
  bool crossCached = false;
};

/// Storage precision of what ops move.
struct Precision {
  double weightBits = 16, activationBits = 16, kvBits = 16;
  /// How each weight is stored (quantized or checkpoint bytes); null =
  /// every weight at `weightBits`.
  const ir::WeightStorage *storage = nullptr;
};

/// Work and traffic of one op instance (or a sum of them); each op's cost
/// rule is part of its schema (ir/ops/*.cpp).
using Cost = ir::OpCost;

/// One op's cost, already multiplied by the number of layers it stands for.
struct OpProfile {
  const ir::Op *op = nullptr;
  std::string group; ///< "embedding", "layers 0..32", "head"
  double instances = 1;
  Cost cost; ///< total over instances
};

/// A stateful op's cache (e.g. K or V of one layer kind) or constant-size
/// state (a conv, recurrent or compressor state).
struct StateFacts {
  std::string name; ///< "key", "value", "compressed_kv", ...
  std::vector<int64_t> layers;
  int64_t elementsPerToken = 0;    ///< growing state, per sequence and layer
  int64_t elementsPerSequence = 0; ///< constant state, per sequence and layer
  int64_t window = 0; ///< keys held (a window or chunk); 0 = unbounded
  /// A compressed state keeps one entry every `stride` tokens (1 = every
  /// token): op.compress emits one entry per window of `ratio` tokens.
  int64_t stride = 1;
  double bits = 0; ///< storage bits when fixed by the op (f32 recurrent
                   ///< state); 0 = the runtime's KV bits
  /// A cache computed once per sequence from the encoder output (an
  /// encoder-decoder's cross-attention keys and values): it holds one entry
  /// per encoder position (elementsPerToken each), not per decoded token.
  bool perEncoderPosition = false;
};

/// A mixture-of-experts layer kind.
struct MoeFacts {
  int64_t experts = 0, topK = 0;
  int64_t paramsPerExpert = 0;
  int64_t layers = 0;
};

/// Static facts of the model.
struct ModelFacts {
  int64_t params = 0; ///< every weight element, tied tensors once
  /// Elements of the checkpoint tensors declared as buffers (not params).
  int64_t bufferElements = 0;
  int64_t weightTensors = 0;
  /// Elements of every checkpoint tensor: params and buffers.
  int64_t weightElements() const { return params + bufferElements; }
  int64_t expertParams = 0; ///< params inside routed experts
  std::vector<MoeFacts> moe;
  std::vector<StateFacts> states;
  /// Bytes of all weights as stored (quantized output, a quantized
  /// checkpoint); 0 = params x the runtime's effective weight bits.
  double storedWeightBytes = 0;
  int64_t layers = 0; ///< iterations of the layer loop
  int64_t hidden = 0; ///< width of the carried hidden state

  /// Non-expert + k routed experts per MoE layer (model-card convention).
  int64_t activatedParamsPerToken() const;
  /// Expected params touched by a batch of `tokens` under uniform routing:
  /// each MoE layer touches E(1 - (1 - k/E)^T) distinct experts.
  double expectedActivatedParams(double tokens) const;
  /// Worst case: min(T k, E) experts per MoE layer.
  int64_t worstCaseActivatedParams(int64_t tokens) const;
  /// KV/state bytes per token of context (unwindowed growth).
  double kvBytesPerToken(double kvBits) const;
  /// Constant-size state bytes per sequence (conv and recurrent states).
  double stateBytesPerSequence(double kvBits) const;
  /// KV/state bytes for `batch` sequences of `context` tokens (windowed
  /// layers capped at their window, constant states included) and
  /// `encoderPositions` positions of cross-attention state.
  double kvBytes(int64_t context, int64_t batch, double kvBits,
                 int64_t encoderPositions = 0) const;
  /// Cross-attention state bytes per encoder position and sequence.
  double crossBytesPerEncoderPosition(double kvBits) const;
};

/// The KV/state bytes a call at `p` holds: `p.past + p.seq` tokens of
/// decode state and, for an encoder-decoder's decoder, its `enc_seq`
/// encoder positions of cross-attention state.
double kvBytesAt(const ModelFacts &f, const ProfilePoint &p, double kvBits);

/// The fraction of a value's key (sequence) positions that hold data: 1 for
/// ordinary tensors, 1 / ratio for the entries of op.compress and every
/// value computed from them (normalised, rotated, cached, scored). Costs of
/// ops over such values count only the positions that hold entries.
double keyDensity(const ir::Value *v);

/// Computes the static facts. The module must have been through kv-cache.
ModelFacts computeModelFacts(const ir::Module &m);

/// Per-op costs of one forward call at `p`.
std::vector<OpProfile> profileOps(const ir::Module &m, const ProfilePoint &p,
                                  const Precision &bits);

} // namespace archc

#endif // ARCHC_ANALYSIS_PROFILE_H
