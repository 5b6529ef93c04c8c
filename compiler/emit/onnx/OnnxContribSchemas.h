//===- OnnxContribSchemas.h - ONNX Runtime contrib ops for the checker -*-
// C++ -*-===//
//
// This file declares the registration of the ONNX Runtime contrib ops
// archc emits (com.microsoft MatMulNBits and GatherBlockQuantized for
// quantized models, SimplifiedLayerNormalization for `--target=ort`, as
// ONNX Runtime's ContribOperators.md specifies them) with the linked onnx
// library, so that onnx::checker and strict
// shape inference check quantized models like every other model: inputs,
// attributes and the shapes of the quantized initializers.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ONNXCONTRIBSCHEMAS_H
#define ARCHC_EMIT_ONNXCONTRIBSCHEMAS_H

namespace archc {

/// The contrib op domain and the opset version archc imports.
inline constexpr const char *kContribDomain = "com.microsoft";
inline constexpr int kContribOpset = 1;

/// Registers the schemas once per process (thread-safe).
void registerContribSchemas();

} // namespace archc

#endif // ARCHC_EMIT_ONNXCONTRIBSCHEMAS_H
