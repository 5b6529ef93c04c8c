//===- Roofline.cpp - Device-projected latency ----------------------------===//
//
// This file implements the roofline latency model.
//
//===----------------------------------------------------------------------===//
#include "analysis/Roofline.h"

#include <algorithm>

namespace archc {

OpTime rooflineTime(const Cost &c, const Device &d, const RuntimeSettings &rt) {
  OpTime t;
  double tp = static_cast<double>(rt.tensorParallel);
  double matrixPeak = d.matrixPeak(rt.compute) * rt.computeEfficiency;
  double vectorPeak = d.peak("fp32") * rt.computeEfficiency;
  if (vectorPeak <= 0)
    vectorPeak = matrixPeak;
  double other = std::max(0.0, c.flops - c.matmulFlops);
  if (matrixPeak > 0)
    t.compute += c.matmulFlops / tp / matrixPeak;
  if (vectorPeak > 0)
    t.compute += other / tp / vectorPeak;
  double bw = d.bandwidthGBs * 1e9 * rt.memoryEfficiency;
  if (bw > 0)
    t.memory = c.bytes() / tp / bw;
  t.time = std::max(t.compute, t.memory);
  t.memoryBound = t.memory > t.compute;
  return t;
}

PhaseTiming timePhase(const std::vector<OpProfile> &ops, const ModelFacts &f,
                      const ProfilePoint &p, const Device &d,
                      const RuntimeSettings &rt) {
  PhaseTiming r;
  for (const OpProfile &o : ops) {
    OpTime t = rooflineTime(o.cost, d, rt);
    r.time += t.time;
    r.computeTime += t.compute;
    r.memoryTime += t.memory;
    if (t.memoryBound)
      r.memoryBoundTime += t.time;
    r.ops.push_back(t);
  }
  double tp = static_cast<double>(rt.tensorParallel);
  if (rt.tensorParallel > 1) {
    // Two all-reduces of the hidden state per layer (after attention and
    // after the MLP), ring algorithm.
    double bytes =
        static_cast<double>(p.batch * p.seq * f.hidden) * rt.activationBits / 8;
    double link = (d.interconnectGBs > 0 ? d.interconnectGBs : d.pcieGBs) * 1e9;
    if (link > 0)
      r.commTime = 2.0 * static_cast<double>(f.layers) * 2.0 * (tp - 1) / tp *
                   bytes / link;
    r.time += r.commTime;
  }
  double tokens = static_cast<double>(p.batch * p.seq);
  r.tokensPerSecond = r.time > 0 ? tokens / r.time : 0;
  double weights = f.storedWeightBytes > 0
                       ? f.storedWeightBytes
                       : static_cast<double>(f.weightElements()) *
                             rt.effectiveWeightBits() / 8;
  double kv = kvBytesAt(f, p, rt.kvBits);
  r.memoryNeeded = (weights + kv) / tp;
  r.fits = r.memoryNeeded <= d.memoryGB * 1e9;
  return r;
}

} // namespace archc
