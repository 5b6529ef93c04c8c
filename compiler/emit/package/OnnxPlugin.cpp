//===- OnnxPlugin.cpp - Entry point of the ONNX back-end module -----------===//
//
// This file exports the C entry point of libarchc-onnx.so. The ONNX back end
// is a separate module so that archc's other outputs (IR, profile) do not
// pay for loading and relocating libonnx and libprotobuf at start-up.
//
//===----------------------------------------------------------------------===//
#include "emit/package/OnnxEmitter.h"
#include "emit/package/VlmPackage.h"
#include "support/FileRead.h"

namespace {
/// This module has its own copy of the support library: the files the
/// driver read are recorded in it too, so that its OutputSet refuses them.
void noteDriverInputs(const archc::OnnxEmitOptions &opts) {
  for (const archc::InputFile &f : opts.inputFiles)
    archc::noteInputFile(f);
}
} // namespace

extern "C" __attribute__((visibility("default"))) bool
archc_emit_onnx(const archc::ir::Module *m, const archc::OnnxEmitOptions *opts,
                archc::DiagnosticEngine *diags, std::ostream *out) {
  noteDriverInputs(*opts);
  return archc::emitOnnx(*m, *opts, *diags, *out);
}

extern "C" __attribute__((visibility("default"))) bool
archc_emit_onnx_package(const archc::PackageGraph *graphs, size_t count,
                        const archc::OnnxEmitOptions *opts,
                        archc::DiagnosticEngine *diags, std::ostream *out) {
  noteDriverInputs(*opts);
  return archc::emitOnnxPackage({graphs, graphs + count}, *opts, *diags, *out);
}
