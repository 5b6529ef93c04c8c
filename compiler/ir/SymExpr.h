//===- SymExpr.h - Canonical polynomials over symbolic dims -----*- C++ -*-===//
//
// This file declares SymExpr, the integer polynomial over named symbols
// (`batch`, `seq`, `past`, ...) used for tensor dims. Every SymExpr is kept
// in canonical form (like terms merged, zero terms dropped, terms ordered),
// so equal expressions compare equal and print one way: `(past + seq)`.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_SYMEXPR_H
#define ARCHC_IR_SYMEXPR_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace archc::ir {

/// A product of symbols with powers, e.g. batch * seq^2. Sorted by name.
using Monomial = std::vector<std::pair<std::string, unsigned>>;

/// A polynomial with int64 coefficients over named symbols. The constant
/// term is stored inline and the symbolic terms (if any) in a shared,
/// immutable map, so the common case - an integer dim - never allocates.
class SymExpr {
public:
  SymExpr() = default;
  /// A constant.
  SymExpr(int64_t c) : c(c) {} // NOLINT: implicit from integers is intended
  /// A single symbol.
  static SymExpr symbol(const std::string &name);

  bool isConstant() const { return !t; }
  /// The constant value, when isConstant().
  std::optional<int64_t> getConstant() const {
    return t ? std::nullopt : std::optional<int64_t>(c);
  }

  SymExpr operator+(const SymExpr &o) const;
  SymExpr operator-(const SymExpr &o) const;
  SymExpr operator*(const SymExpr &o) const;
  SymExpr operator-() const;
  /// Exact division by a constant: returns nullopt unless every coefficient
  /// is divisible.
  std::optional<SymExpr> divExact(int64_t d) const;

  bool operator==(const SymExpr &o) const {
    return c == o.c && (t == o.t || (t && o.t && *t == *o.t));
  }
  bool operator!=(const SymExpr &o) const { return !(*this == o); }
  /// A strict total order (consistent with ==), for containers.
  bool operator<(const SymExpr &o) const;

  /// Substitutes values for symbols; symbols not in `env` stay symbolic.
  SymExpr substitute(const std::map<std::string, SymExpr> &env) const;
  /// Evaluates with every symbol bound; nullopt if a symbol is missing.
  std::optional<int64_t>
  evaluate(const std::map<std::string, int64_t> &env) const;
  /// Every symbol that appears.
  std::vector<std::string> symbols() const;

  /// Canonical text: `4096`, `seq`, `(past + seq)`, `(2 * seq)`,
  /// `(batch * seq)`. Non-trivial expressions are parenthesised.
  std::string str() const;

  /// Every term, the constant one under the empty monomial (absent when 0).
  std::map<Monomial, int64_t> getTerms() const;

private:
  using Terms = std::map<Monomial, int64_t>;
  int64_t c = 0;                  ///< the constant term
  std::shared_ptr<const Terms> t; ///< non-constant terms; null when none
  static SymExpr make(int64_t c, Terms terms);
};

} // namespace archc::ir

#endif // ARCHC_IR_SYMEXPR_H
