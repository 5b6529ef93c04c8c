//===- CheckedArith.h - Overflow-checked integer arithmetic -----*- C++ -*-===//
//
// Integer operations on values that come from input (config files, .arch
// literals, command-line options): each returns std::nullopt instead of
// wrapping or invoking undefined behaviour, so callers report a located
// error. Division and remainder are floored (Python's rules), as the .arch
// language defines them.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_CHECKEDARITH_H
#define ARCHC_SUPPORT_CHECKEDARITH_H

#include <cmath>
#include <cstdint>
#include <optional>

namespace archc {

/// a + b, or nullopt on overflow.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// a - b, or nullopt on overflow.
inline std::optional<int64_t> checkedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// a * b, or nullopt on overflow.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// -a, or nullopt for INT64_MIN.
inline std::optional<int64_t> checkedNeg(int64_t a) {
  if (a == INT64_MIN)
    return std::nullopt;
  return -a;
}

/// Truncating a / b, or nullopt when b is 0 or the quotient does not fit
/// (INT64_MIN / -1).
inline std::optional<int64_t> checkedDiv(int64_t a, int64_t b) {
  if (b == 0 || (a == INT64_MIN && b == -1))
    return std::nullopt;
  return a / b;
}

/// The floored remainder (the sign of the divisor), or nullopt when b is 0.
/// Defined for every other pair, INT64_MIN % -1 included (it is 0).
inline std::optional<int64_t> flooredMod(int64_t a, int64_t b) {
  if (b == 0)
    return std::nullopt;
  if (b == -1)
    return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0)))
    m += b; // opposite signs: cannot overflow
  return m;
}

/// The integer a double truncates to, or nullopt when it is NaN, infinite
/// or outside int64 (the C++ conversion would be undefined).
inline std::optional<int64_t> doubleToInt(double x) {
  // 2^63 is exactly representable; every double below it in magnitude
  // truncates to a value that fits.
  constexpr double kLimit = 9223372036854775808.0;
  if (!std::isfinite(x) || x >= kLimit || x < -kLimit)
    return std::nullopt;
  return static_cast<int64_t>(x);
}

} // namespace archc

#endif // ARCHC_SUPPORT_CHECKEDARITH_H
