//===- OnnxLoader.cpp - Loading the ONNX back-end module ------------------===//
//
// This file implements runOnnxBackend() with dlopen/dlsym.
//
//===----------------------------------------------------------------------===//
#include "driver/OnnxLoader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace archc {

namespace {
using EntryFn = bool (*)(const ir::Module *, const OnnxEmitOptions *,
                         DiagnosticEngine *, std::ostream *);

std::string modulePath() {
  if (const char *env = std::getenv("ARCHC_ONNX_MODULE"))
    return env;
  std::error_code ec;
  std::filesystem::path exe =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  std::filesystem::path dir =
      ec ? std::filesystem::path(".") : exe.parent_path();
  for (const auto &candidate :
       {dir / "libarchc-onnx.so", dir / ".." / "lib" / "libarchc-onnx.so"})
    if (std::filesystem::exists(candidate, ec))
      return candidate.string();
  return (dir / "libarchc-onnx.so").string();
}
} // namespace

void *onnxBackendSymbol(const char *symbol, DiagnosticEngine &diags) {
  std::string path = modulePath();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    diags.error(SourceRange(), "cannot load the ONNX back end '{}': {}", path,
                dlerror());
    return nullptr;
  }
  // The module stays loaded until exit (its objects may be in use).
  void *fn = dlsym(handle, symbol);
  if (!fn)
    diags.error(SourceRange(), "'{}' is not archc's ONNX back end", path);
  return fn;
}

bool runOnnxBackend(const ir::Module &m, const OnnxEmitOptions &opts,
                    DiagnosticEngine &diags, std::ostream &out) {
  auto fn =
      reinterpret_cast<EntryFn>(onnxBackendSymbol("archc_emit_onnx", diags));
  return fn && fn(&m, &opts, &diags, &out);
}

} // namespace archc
