//===- Types.h - Element types and tensor types -----------------*- C++ -*-===//
//
// This file declares DType (element type) and TensorType (dtype + dims, each
// dim an integer or a symbolic SymExpr). A TensorType may be unknown (before
// shape inference), printed `?`.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_TYPES_H
#define ARCHC_IR_TYPES_H

#include "ir/SymExpr.h"

#include <optional>
#include <string>
#include <vector>

namespace archc::ir {

enum class DType { Unknown, F32, F16, BF16, F64, I64, I32, I8, U8, Bool };

/// `f32`, `bf16`, `i64`, ...
const char *dtypeName(DType t);
/// Parses `f32`/`float32`/`float`, `bf16`/`bfloat16`, ...; Unknown if not.
DType parseDType(const std::string &s);
/// Storage bits of one element.
unsigned dtypeBits(DType t);
bool isFloat(DType t);

/// A tensor type. `known == false` means not inferred yet.
struct TensorType {
  bool known = false;
  DType dtype = DType::Unknown;
  std::vector<SymExpr> dims;

  TensorType() = default;
  TensorType(DType dt, std::vector<SymExpr> d)
      : known(true), dtype(dt), dims(std::move(d)) {}
  static TensorType unknown() { return {}; }

  size_t rank() const { return dims.size(); }
  /// Product of all dims.
  SymExpr numElements() const;
  bool isStatic() const;
  bool operator==(const TensorType &o) const {
    return known == o.known && dtype == o.dtype && dims == o.dims;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
  /// `tensor<batch x seq x 4096 x bf16>`, `tensor<f32>` (rank 0), `?`.
  std::string str() const;
};

} // namespace archc::ir

#endif // ARCHC_IR_TYPES_H
