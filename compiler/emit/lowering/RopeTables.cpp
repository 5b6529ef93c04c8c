//===- RopeTables.cpp - RoPE inverse frequencies --------------------------===//
//
// This file implements computeRope(). Frequencies are computed in double
// and rounded to float once.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/RopeTables.h"

#include <algorithm>
#include <cmath>

namespace archc {

namespace {
const ir::Attr *entry(const ir::AttrDict *d, const std::string &k) {
  if (!d)
    return nullptr;
  auto it = d->entries.find(k);
  return it == d->entries.end() ? nullptr : &it->second;
}

bool number(const ir::AttrDict *d, const std::string &k, double &out) {
  const ir::Attr *a = entry(d, k);
  if (!a)
    return false;
  if (auto *f = std::get_if<double>(a)) {
    out = *f;
    return true;
  }
  if (auto *i = std::get_if<int64_t>(a)) {
    out = static_cast<double>(*i);
    return true;
  }
  return false;
}

bool floats(const ir::AttrDict *d, const std::string &k,
            std::vector<double> &out) {
  const ir::Attr *a = entry(d, k);
  if (!a)
    return false;
  if (auto *v = std::get_if<std::vector<double>>(a)) {
    out = *v;
    return true;
  }
  if (auto *v = std::get_if<std::vector<int64_t>>(a)) {
    out.assign(v->begin(), v->end());
    return true;
  }
  return false;
}
} // namespace

bool computeRope(const ir::Op &op, int64_t headDim, RopeTables &out,
                 std::string &error) {
  auto optInt = [&](const char *name, int64_t dflt) {
    const int64_t *v = op.optAttr<int64_t>(name);
    return v ? *v : dflt;
  };
  double base = op.attr<double>("theta");
  int64_t dim = optInt("dim", headDim);
  int64_t maxPos = optInt("max_positions", 0);
  // The pretraining context: the scaling dict's entry, else the model's
  // (Phi-3 keeps original_max_position_embeddings at the config's top
  // level), else max_position_embeddings.
  int64_t origDefault = optInt("original_max_positions", maxPos);
  out.rotaryDim = dim;
  out.base = base;
  out.maxPositions = maxPos;
  const ir::AttrDict *sc = nullptr;
  if (auto *p = op.optAttr<std::shared_ptr<ir::AttrDict>>("scaling"))
    sc = p->get();
  std::string type = "default";
  if (const ir::Attr *t = entry(sc, "rope_type"))
    if (auto *s = std::get_if<std::string>(t))
      type = *s;
  if (type == "default")
    if (const ir::Attr *t = entry(sc, "type"))
      if (auto *s = std::get_if<std::string>(t))
        type = *s;
  if (type == "mrope") // older Qwen-VL configs: default frequencies
    type = "default";
  out.type = type;
  size_t half = static_cast<size_t>(dim / 2);
  std::vector<double> inv(half);
  for (size_t i = 0; i < half; ++i)
    inv[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) /
                                      static_cast<double>(dim));
  auto need = [&](const std::string &k, double &v) {
    if (number(sc, k, v))
      return true;
    error = "rope scaling '" + type + "' needs '" + k + "'";
    return false;
  };
  if (type == "default") {
    // nothing to change
  } else if (type == "linear") {
    double factor;
    if (!need("factor", factor))
      return false;
    for (double &f : inv)
      f /= factor;
  } else if (type == "dynamic") {
    if (!need("factor", out.factor))
      return false;
    if (maxPos <= 0) {
      error = "dynamic rope scaling needs max_position_embeddings";
      return false;
    }
  } else if (type == "llama3") {
    double factor, low, high, old;
    if (!number(sc, "original_max_position_embeddings", old))
      old = static_cast<double>(origDefault);
    if (!need("factor", factor) || !need("low_freq_factor", low) ||
        !need("high_freq_factor", high))
      return false;
    if (old <= 0) {
      error = "llama3 rope scaling needs original_max_position_embeddings";
      return false;
    }
    double lowWavelen = old / low, highWavelen = old / high;
    for (double &f : inv) {
      double wavelen = 2 * M_PI / f;
      if (wavelen > lowWavelen) {
        f = f / factor;
      } else if (!(wavelen < highWavelen)) {
        double smooth = (old / wavelen - low) / (high - low);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  } else if (type == "yarn") {
    double factor = 0, orig = 0;
    bool hasFactor = number(sc, "factor", factor);
    if (!number(sc, "original_max_position_embeddings", orig))
      orig = static_cast<double>(origDefault);
    if (!hasFactor) {
      if (orig <= 0) {
        error = "yarn rope scaling needs 'factor'";
        return false;
      }
      factor = static_cast<double>(maxPos) / orig;
    }
    double attn;
    auto mscale = [](double scale, double m) {
      return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
    };
    if (!number(sc, "attention_factor", attn)) {
      double ms = 0, msAll = 0;
      if (number(sc, "mscale", ms) && number(sc, "mscale_all_dim", msAll) &&
          ms != 0 && msAll != 0)
        attn = mscale(factor, ms) / mscale(factor, msAll);
      else
        attn = mscale(factor, 1.0);
    }
    out.attentionFactor = attn;
    double betaFast = 32, betaSlow = 1;
    number(sc, "beta_fast", betaFast);
    number(sc, "beta_slow", betaSlow);
    if (betaFast == 0)
      betaFast = 32;
    if (betaSlow == 0)
      betaSlow = 1;
    bool truncate = true;
    if (const ir::Attr *t = entry(sc, "truncate"))
      if (auto *b = std::get_if<bool>(t))
        truncate = *b;
    if (orig <= 0) {
      error = "yarn rope scaling needs original_max_position_embeddings";
      return false;
    }
    auto correction = [&](double rotations) {
      return (static_cast<double>(dim) *
              std::log(orig / (rotations * 2 * M_PI))) /
             (2 * std::log(base));
    };
    double lo = correction(betaFast), hi = correction(betaSlow);
    if (truncate) {
      lo = std::floor(lo);
      hi = std::ceil(hi);
    }
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(dim - 1));
    if (lo == hi)
      hi += 0.001;
    for (size_t i = 0; i < half; ++i) {
      double posFreq =
          std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
      double extrap = 1.0 / posFreq, interp = 1.0 / (factor * posFreq);
      double ramp =
          std::clamp((static_cast<double>(i) - lo) / (hi - lo), 0.0, 1.0);
      double extrapFactor = 1 - ramp;
      inv[i] = interp * (1 - extrapFactor) + extrap * extrapFactor;
    }
  } else if (type == "longrope") {
    std::vector<double> shortF, longF;
    if (!floats(sc, "short_factor", shortF) ||
        !floats(sc, "long_factor", longF) || shortF.size() != half ||
        longF.size() != half) {
      error = "longrope scaling needs short_factor and long_factor with " +
              std::to_string(half) + " entries";
      return false;
    }
    double orig = 0, factor = 0;
    if (!number(sc, "original_max_position_embeddings", orig))
      orig = static_cast<double>(origDefault);
    if (!number(sc, "factor", factor))
      factor = orig > 0 ? static_cast<double>(maxPos) / orig : 1.0;
    double attn;
    if (!number(sc, "attention_factor", attn))
      attn = factor <= 1.0 ? 1.0
                           : std::sqrt(1 + std::log(factor) / std::log(orig));
    out.attentionFactor = attn;
    out.originalMax = static_cast<int64_t>(orig);
    out.invFreqLong.resize(half);
    for (size_t i = 0; i < half; ++i) {
      double p =
          std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
      out.invFreqLong[i] = static_cast<float>(1.0 / (longF[i] * p));
      inv[i] = 1.0 / (shortF[i] * p);
    }
  } else {
    error = "unsupported rope scaling type '" + type + "'";
    return false;
  }
  // Whatever the parameters (the op's verifier refuses the known bad
  // ones), tables that are not finite would make every attention score
  // NaN: refuse them rather than write such a model.
  auto finite = [](double v) { return std::isfinite(static_cast<float>(v)); };
  for (size_t i = 0; i < half; ++i)
    if (!finite(inv[i]) ||
        (i < out.invFreqLong.size() && !finite(out.invFreqLong[i]))) {
      error = "rope scaling '" + type +
              "' gives a non-finite rotary frequency at index " +
              std::to_string(i) + "; check its parameters";
      return false;
    }
  if (!finite(out.attentionFactor) || out.attentionFactor <= 0) {
    error = "rope scaling '" + type + "' gives an attention factor of " +
            std::to_string(out.attentionFactor) +
            " (cos and sin are multiplied by it; it must be positive and "
            "finite); check its parameters";
    return false;
  }
  out.invFreq.assign(inv.begin(), inv.end());
  return true;
}

} // namespace archc
