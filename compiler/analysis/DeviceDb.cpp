//===- DeviceDb.cpp - Devices and runtime settings from YAML --------------===//
//
// This file implements the YAML loaders with yaml-cpp; node marks give the
// locations of errors.
//
//===----------------------------------------------------------------------===//
#include "analysis/DeviceDb.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace archc {

double Device::peak(const std::string &dtype) const {
  auto it = peakTflops.find(dtype);
  return it == peakTflops.end() ? 0.0 : it->second * 1e12;
}

std::string runtimeProfileDir(const std::string &override) {
  if (!override.empty())
    return override;
  if (const char *env = std::getenv("ARCHC_PROFILE_DIR"))
    return env;
#ifdef ARCHC_DEFAULT_PROFILE_DIR
  return ARCHC_DEFAULT_PROFILE_DIR;
#else
  return "runtime_profile";
#endif
}

namespace {

class YamlFile {
public:
  YamlFile(uint32_t id, SourceMgr &sm, DiagnosticEngine &d)
      : id(id), sm(sm), diags(d) {}

  SourceRange at(const YAML::Node &n) const {
    YAML::Mark m = n.Mark();
    if (m.line < 0)
      return SourceRange(SourceLoc{id, 1, 1});
    SourceLoc l{id, static_cast<uint32_t>(m.line + 1),
                static_cast<uint32_t>(m.column + 1)};
    return SourceRange(l, l);
  }

  bool number(const YAML::Node &map, const std::string &key, double &out,
              bool required, double min = 0) {
    YAML::Node n = map[key];
    if (!n) {
      if (required)
        diags.error(at(map), "missing '{}'", key);
      return !required;
    }
    try {
      out = n.as<double>();
    } catch (const YAML::Exception &) {
      diags.error(at(n), "'{}' must be a number, got '{}'", key,
                  n.IsScalar()
                      ? n.Scalar()
                      : std::string("a ") + (n.IsMap() ? "map" : "list"));
      return false;
    }
    if (!std::isfinite(out) || out < min) {
      diags.error(at(n), "'{}' must be a finite number >= {}, got {}", key, min,
                  n.Scalar());
      return false;
    }
    return true;
  }

  bool string(const YAML::Node &map, const std::string &key, std::string &out,
              bool required) {
    YAML::Node n = map[key];
    if (!n) {
      if (required)
        diags.error(at(map), "missing '{}'", key);
      return !required;
    }
    if (!n.IsScalar()) {
      diags.error(at(n), "'{}' must be a string", key);
      return false;
    }
    out = n.Scalar();
    return true;
  }

  uint32_t id;
  SourceMgr &sm;
  DiagnosticEngine &diags;
};

bool parseYaml(const std::string &path, SourceMgr &sm, DiagnosticEngine &d,
               YAML::Node &root, uint32_t &id) {
  std::string err;
  id = sm.findFile(path);
  if (!id)
    id = sm.addFile(path, err);
  if (!id) {
    d.error(SourceRange(), "cannot read '{}': {}", path, err);
    return false;
  }
  try {
    root = YAML::Load(std::string(sm.getText(id)));
  } catch (const YAML::ParserException &e) {
    SourceLoc l{id, static_cast<uint32_t>(std::max(0, e.mark.line) + 1),
                static_cast<uint32_t>(std::max(0, e.mark.column) + 1)};
    d.error(SourceRange(l, l), "invalid YAML: {}", e.msg);
    return false;
  }
  return true;
}

const std::set<std::string> kPeakKeys = {"fp64", "fp32", "tf32", "bf16", "fp16",
                                         "fp8",  "fp4",  "int8", "int4"};

bool parseRuntime(YamlFile &f, const YAML::Node &n, const std::string &name,
                  RuntimeSettings &out) {
  if (!n.IsMap()) {
    f.diags.error(f.at(n), "runtime preset '{}' must be a map", name);
    return false;
  }
  out.name = name;
  bool ok = f.string(n, "compute", out.compute, true);
  if (ok && !kPeakKeys.count(out.compute)) {
    f.diags.error(f.at(n["compute"]),
                  "unknown compute dtype '{}' (expected "
                  "one of fp64, fp32, tf32, bf16, fp16, "
                  "fp8, fp4, int8, int4)",
                  out.compute);
    ok = false;
  }
  ok &= f.number(n, "weight_bits", out.weightBits, true, 1);
  ok &= f.number(n, "activation_bits", out.activationBits, true, 1);
  ok &= f.number(n, "kv_bits", out.kvBits, true, 1);
  double group = 0, tp = 1;
  ok &= f.number(n, "group_size", group, false, 0);
  ok &= f.number(n, "scale_bits", out.scaleBits, false, 0);
  ok &= f.number(n, "compute_efficiency", out.computeEfficiency, false, 0);
  ok &= f.number(n, "memory_efficiency", out.memoryEfficiency, false, 0);
  ok &= f.number(n, "tensor_parallel", tp, false, 1);
  out.groupSize = static_cast<int64_t>(group);
  out.tensorParallel = static_cast<int64_t>(tp);
  for (const char *k : {"compute_efficiency", "memory_efficiency"})
    if (n[k] && (n[k].as<double>(0) <= 0 || n[k].as<double>(0) > 1)) {
      f.diags.error(f.at(n[k]), "'{}' must be in (0, 1]", k);
      ok = false;
    }
  for (auto it = n.begin(); it != n.end(); ++it) {
    static const std::set<std::string> keys = {"compute",
                                               "weight_bits",
                                               "activation_bits",
                                               "kv_bits",
                                               "group_size",
                                               "scale_bits",
                                               "compute_efficiency",
                                               "memory_efficiency",
                                               "tensor_parallel"};
    std::string k = it->first.as<std::string>("");
    if (!keys.count(k)) {
      f.diags.error(f.at(it->first), "unknown runtime setting '{}'", k);
      ok = false;
    }
  }
  return ok;
}

} // namespace

std::vector<std::string> listDevices(const std::string &dir) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml")
      ids.push_back(e.path().stem().string());
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool loadDeviceFile(const std::string &path, SourceMgr &sm, DiagnosticEngine &d,
                    Device &dev) {
  YAML::Node n;
  uint32_t id;
  if (!parseYaml(path, sm, d, n, id))
    return false;
  YamlFile f(id, sm, d);
  dev.loc = f.at(n);
  if (!n.IsMap()) {
    d.error(f.at(n), "a device file must hold a map");
    return false;
  }
  bool good = f.string(n, "id", dev.id, true);
  good &= f.string(n, "name", dev.name, true);
  good &= f.string(n, "vendor", dev.vendor, false);
  good &= f.string(n, "kind", dev.kind, false);
  good &= f.string(n, "notes", dev.notes, false);
  good &= f.number(n, "memory_gb", dev.memoryGB, true, 0);
  good &= f.number(n, "memory_bandwidth_gbs", dev.bandwidthGBs, true, 0);
  good &= f.number(n, "interconnect_gbs", dev.interconnectGBs, false, 0);
  good &= f.number(n, "pcie_gbs", dev.pcieGBs, false, 0);
  YAML::Node peaks = n["peak_tflops"];
  if (!peaks || !peaks.IsMap()) {
    d.error(f.at(n), "device '{}' needs a 'peak_tflops' map", dev.id);
    return false;
  }
  for (auto it = peaks.begin(); it != peaks.end(); ++it) {
    std::string k = it->first.as<std::string>("");
    if (!kPeakKeys.count(k)) {
      d.error(f.at(it->first), "unknown dtype '{}' in peak_tflops", k);
      good = false;
      continue;
    }
    double v = 0;
    good &= f.number(peaks, k, v, true, 0);
    dev.peakTflops[k] = v;
  }
  return good;
}

bool loadDevice(const std::string &dir, const std::string &id, SourceMgr &sm,
                DiagnosticEngine &d, Device &out) {
  std::filesystem::path path = std::filesystem::path(dir) / (id + ".yaml");
  std::error_code ec;
  bool plain = id.find_first_of("/.") == std::string::npos;
  if (!plain || !std::filesystem::is_regular_file(path, ec)) {
    std::string known;
    for (const std::string &k : listDevices(dir))
      known += (known.empty() ? "" : ", ") + k;
    d.error(SourceRange(), "unknown device '{}' (known: {})", id, known);
    return false;
  }
  if (!loadDeviceFile(path.string(), sm, d, out))
    return false;
  if (out.id != id) {
    d.error(out.loc, "device file '{}' declares id '{}'", path.string(),
            out.id);
    return false;
  }
  return true;
}

bool loadRuntime(const std::string &name, const std::string &presetsPath,
                 SourceMgr &sm, DiagnosticEngine &d, RuntimeSettings &out) {
  bool isFile = name.find('/') != std::string::npos ||
                (name.size() > 5 && (name.substr(name.size() - 5) == ".yaml" ||
                                     name.substr(name.size() - 4) == ".yml"));
  YAML::Node root;
  uint32_t id;
  if (!parseYaml(isFile ? name : presetsPath, sm, d, root, id))
    return false;
  YamlFile f(id, sm, d);
  YAML::Node presets = root["presets"];
  if (isFile && !presets)
    return parseRuntime(f, root, std::filesystem::path(name).stem().string(),
                        out);
  if (!presets || !presets.IsMap()) {
    d.error(f.at(root), "'{}' needs a 'presets' map",
            isFile ? name : presetsPath);
    return false;
  }
  std::string want = name;
  if (want.empty() || isFile) {
    YAML::Node def = root["default"];
    want = def && def.IsScalar() ? def.Scalar() : "bf16";
  }
  YAML::Node p = presets[want];
  if (!p) {
    std::string known;
    for (auto it = presets.begin(); it != presets.end(); ++it)
      known += (known.empty() ? "" : ", ") + it->first.as<std::string>("");
    d.error(SourceRange(), "unknown runtime preset '{}' (known: {})", want,
            known);
    return false;
  }
  return parseRuntime(f, p, want, out);
}

} // namespace archc
