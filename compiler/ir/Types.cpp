//===- Types.cpp - Element types and tensor types -------------------------===//
//
// This file implements dtype names and tensor type printing.
//
//===----------------------------------------------------------------------===//
#include "ir/Types.h"

namespace archc::ir {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::Bool:
    return "bool";
  case DType::Unknown:
    return "?";
  }
  return "?";
}

DType parseDType(const std::string &s) {
  if (s == "f32" || s == "float32" || s == "fp32" || s == "float")
    return DType::F32;
  if (s == "f16" || s == "float16" || s == "fp16" || s == "half")
    return DType::F16;
  if (s == "bf16" || s == "bfloat16")
    return DType::BF16;
  if (s == "f64" || s == "float64" || s == "double")
    return DType::F64;
  if (s == "i64" || s == "int64")
    return DType::I64;
  if (s == "i32" || s == "int32")
    return DType::I32;
  if (s == "i8" || s == "int8")
    return DType::I8;
  if (s == "u8" || s == "uint8")
    return DType::U8;
  if (s == "bool")
    return DType::Bool;
  return DType::Unknown;
}

unsigned dtypeBits(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 32;
  case DType::F16:
  case DType::BF16:
    return 16;
  case DType::F64:
  case DType::I64:
    return 64;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 8;
  case DType::Unknown:
    return 0;
  }
  return 0;
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::F64;
}

SymExpr TensorType::numElements() const {
  SymExpr n(1);
  for (const SymExpr &d : dims)
    n = n * d;
  return n;
}

bool TensorType::isStatic() const {
  if (!known)
    return false;
  for (const SymExpr &d : dims)
    if (!d.isConstant())
      return false;
  return true;
}

std::string TensorType::str() const {
  if (!known)
    return "?";
  std::string s = "tensor<";
  for (const SymExpr &d : dims)
    s += d.str() + " x ";
  s += dtypeName(dtype);
  s += ">";
  return s;
}

} // namespace archc::ir
