//===- OnnxLoader.h - Loading the ONNX back-end module ----------*- C++ -*-===//
//
// This file declares runOnnxBackend(), which loads libarchc-onnx.so (next
// to the archc executable, or ARCHC_ONNX_MODULE) on first use and calls it.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_ONNXLOADER_H
#define ARCHC_DRIVER_ONNXLOADER_H

#include "emit/package/OnnxEmitter.h"

namespace archc {

/// The address of `symbol` in the back-end module (loaded on first use);
/// null after reporting why.
void *onnxBackendSymbol(const char *symbol, DiagnosticEngine &diags);

/// Emits ONNX through the back-end module. Reports and returns false when
/// the module cannot be loaded or the emission fails.
bool runOnnxBackend(const ir::Module &m, const OnnxEmitOptions &opts,
                    DiagnosticEngine &diags, std::ostream &out);

} // namespace archc

#endif // ARCHC_DRIVER_ONNXLOADER_H
