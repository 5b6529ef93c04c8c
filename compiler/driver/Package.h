//===- Package.h - Several-graph packages in the driver ---------*- C++ -*-===//
//
// This file declares what the driver does with the named graphs of a
// package (a vision-language model's vision_encoder, embedding and decoder
// next to its main text model): the union of their weight declarations
// (-emit=weights lists every checkpoint tensor once) and their emission as
// ONNX (one folder per graph, through the ONNX back end).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_PACKAGE_H
#define ARCHC_DRIVER_PACKAGE_H

#include "driver/Compiler.h"
#include "emit/package/OnnxEmitter.h"

namespace archc {

/// A module holding every weight the main graph and the named graphs
/// declare, each concrete tensor once (for printWeightList).
std::unique_ptr<ir::Module> packageWeights(const Compilation &c);

/// Emits the named graphs as ONNX into the model folder `opts.output`
/// through the back-end module. Reports and returns false on error.
bool runOnnxPackageBackend(const Compilation &c, const OnnxEmitOptions &opts,
                           DiagnosticEngine &diags, std::ostream &out);

} // namespace archc

#endif // ARCHC_DRIVER_PACKAGE_H
