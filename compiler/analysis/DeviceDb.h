//===- DeviceDb.h - Devices and runtime settings from YAML ------*- C++ -*-===//
//
// This file declares the loaders of runtime_profile/devices/<id>.yaml (peak
// FLOP/s per dtype, bandwidth, capacity, interconnect) and
// runtime_profile/runtime.yaml (compute dtype, weight/activation/KV bits,
// efficiencies, tensor parallelism). Malformed YAML and bad values get
// located errors (file:line:col) through the DiagnosticEngine.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_ANALYSIS_DEVICEDB_H
#define ARCHC_ANALYSIS_DEVICEDB_H

#include "support/Diagnostics.h"

#include <map>
#include <string>
#include <vector>

namespace archc {

struct Device {
  std::string id, name, vendor, kind, notes;
  double memoryGB = 0;        ///< decimal GB
  double bandwidthGBs = 0;    ///< GB/s
  double interconnectGBs = 0; ///< GB/s, device to device
  double pcieGBs = 0;
  std::map<std::string, double> peakTflops; ///< dtype -> TFLOP/s (dense)
  SourceRange loc;
  /// The dtype whose peak the runtime's matrix work runs at, when not the
  /// runtime's compute dtype: the default runtime (bf16) on a device that
  /// has no bf16 peak runs at its fp16 one (Apple GPUs).
  std::string matrixDtype;

  /// Peak FLOP/s for a dtype; 0 when the device lacks it.
  double peak(const std::string &dtype) const;
  /// The matrix peak of a runtime computing in `compute`.
  double matrixPeak(const std::string &compute) const {
    return peak(matrixDtype.empty() ? compute : matrixDtype);
  }
};

struct RuntimeSettings {
  std::string name = "bf16";
  std::string compute = "bf16";
  double weightBits = 16, activationBits = 16, kvBits = 16;
  int64_t groupSize = 0;
  double scaleBits = 0;
  double computeEfficiency = 1.0, memoryEfficiency = 1.0;
  int64_t tensorParallel = 1;

  /// Bits per weight including quantisation scales.
  double effectiveWeightBits() const {
    return weightBits + (groupSize > 0 ? scaleBits / groupSize : 0.0);
  }
};

/// Loads the device `id` from `dir`/<id>.yaml. Reports (listing the known
/// ids when the file does not exist) and returns false on error.
bool loadDevice(const std::string &dir, const std::string &id, SourceMgr &sm,
                DiagnosticEngine &d, Device &out);

/// Parses one device file.
bool loadDeviceFile(const std::string &path, SourceMgr &sm, DiagnosticEngine &d,
                    Device &out);

/// Ids of every device file in `dir`, sorted.
std::vector<std::string> listDevices(const std::string &dir);

/// Loads `name` (a preset of the runtime.yaml at `presetsPath`, or a YAML
/// file path). Empty name = the file's default.
bool loadRuntime(const std::string &name, const std::string &presetsPath,
                 SourceMgr &sm, DiagnosticEngine &d, RuntimeSettings &out);

/// The runtime_profile directory: --profile-dir, ARCHC_PROFILE_DIR, or the
/// one in the source tree.
std::string runtimeProfileDir(const std::string &override);

} // namespace archc

#endif // ARCHC_ANALYSIS_DEVICEDB_H
