//===- OnnxTarget.h - The runtime an emitted ONNX graph is for --*- C++ -*-===//
#ifndef ARCHC_EMIT_ONNXTARGET_H
#define ARCHC_EMIT_ONNXTARGET_H

namespace archc {

/// Which runtime the emitted graph is for (`--target`): portable standard
/// ONNX ops only, or ONNX Runtime, whose com.microsoft contrib ops
/// (GroupQueryAttention, SimplifiedLayerNormalization, MoE, ...) the
/// lowering may use where they are faster.
enum class OnnxTarget { Portable, Ort };

} // namespace archc

#endif // ARCHC_EMIT_ONNXTARGET_H
