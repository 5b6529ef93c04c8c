//===- ProfilePlot.h - -emit=profile --plot=FILE.svg ------------*- C++ -*-===//
//
// This file declares renderProfilePlot(): an SVG of the profile's latency
// (time to first token against prompt length, time per output token against
// context length) for every requested device and batch, and its memory
// (weights, weights + KV cache / state per batch, each device's capacity)
// against context length. Every marker carries the exact value it plots
// (data-x, data-y) so tests compare the picture with the JSON report.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_ANALYSIS_PROFILEPLOT_H
#define ARCHC_ANALYSIS_PROFILEPLOT_H

#include <nlohmann/json.hpp>

#include <string>

namespace archc {

/// The SVG document for a profile in the JSON schema of docs/profile.md.
std::string renderProfilePlot(const nlohmann::ordered_json &profile);

} // namespace archc

#endif // ARCHC_ANALYSIS_PROFILEPLOT_H
