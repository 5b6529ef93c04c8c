//===- Casting.h - LLVM-style isa/cast/dyn_cast -----------------*- C++ -*-===//
//
// This file provides isa<>, cast<> and dyn_cast<> for class hierarchies that
// implement `static bool classof(const Base *)`, as LLVM does.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_CASTING_H
#define ARCHC_SUPPORT_CASTING_H

#include <cassert>

namespace archc {

template <typename To, typename From> bool isa(const From *v) {
  return v && To::classof(v);
}
template <typename To, typename From> To *cast(From *v) {
  assert(isa<To>(v) && "cast<> to incompatible type");
  return static_cast<To *>(v);
}
template <typename To, typename From> const To *cast(const From *v) {
  assert(isa<To>(v) && "cast<> to incompatible type");
  return static_cast<const To *>(v);
}
template <typename To, typename From> To *dyn_cast(From *v) {
  return isa<To>(v) ? static_cast<To *>(v) : nullptr;
}
template <typename To, typename From> const To *dyn_cast(const From *v) {
  return isa<To>(v) ? static_cast<const To *>(v) : nullptr;
}

} // namespace archc

#endif // ARCHC_SUPPORT_CASTING_H
