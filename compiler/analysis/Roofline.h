//===- Roofline.h - Device-projected latency ---------------------*- C++
//-*-===//
//
// This file declares the latency model of -emit=profile: a roofline per op,
// summed per phase. An op's time is the larger of its compute time (matrix
// FLOPs at the device's peak for the compute dtype, other FLOPs at its fp32
// vector peak, each scaled by compute_efficiency) and its memory time (bytes
// at the device bandwidth scaled by memory_efficiency). With tensor
// parallelism the work and bytes are split across devices and each layer
// adds two ring all-reduces of the hidden state over the interconnect.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_ANALYSIS_ROOFLINE_H
#define ARCHC_ANALYSIS_ROOFLINE_H

#include "analysis/DeviceDb.h"
#include "analysis/Profile.h"

namespace archc {

struct OpTime {
  double compute = 0, memory = 0, time = 0;
  bool memoryBound = false;
};

/// Time of one op's cost on a device.
OpTime rooflineTime(const Cost &c, const Device &d, const RuntimeSettings &rt);

/// A phase (prefill or decode) at one point, on one device.
struct PhaseTiming {
  double time = 0;            ///< seconds, sum of op times + communication
  double computeTime = 0;     ///< sum over ops of their compute times
  double memoryTime = 0;      ///< sum over ops of their memory times
  double commTime = 0;        ///< tensor-parallel all-reduces
  double memoryBoundTime = 0; ///< time of ops limited by memory
  double tokensPerSecond = 0;
  bool fits = false;
  double memoryNeeded = 0; ///< bytes per device: weights + KV
  std::vector<OpTime> ops; ///< parallel to the op profile
};

/// Computes a phase's timing. `tokens` is the number of new tokens the
/// phase produces (B * S for prefill, B for a decode step); `context` the
/// cache length after the phase.
PhaseTiming timePhase(const std::vector<OpProfile> &ops, const ModelFacts &f,
                      const ProfilePoint &p, const Device &d,
                      const RuntimeSettings &rt);

} // namespace archc

#endif // ARCHC_ANALYSIS_ROOFLINE_H
