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
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace archc::ir {

/// A product of symbols with powers, e.g. batch * seq^2. Sorted by name.
using Monomial = std::vector<std::pair<std::string, unsigned>>;

/// A polynomial with int64 coefficients over named symbols.
class SymExpr {
public:
  SymExpr() = default;
  /// A constant.
  SymExpr(int64_t c); // NOLINT: implicit from integers is intended
  /// A single symbol.
  static SymExpr symbol(const std::string &name);

  bool isConstant() const;
  /// The constant value, when isConstant().
  std::optional<int64_t> getConstant() const;

  SymExpr operator+(const SymExpr &o) const;
  SymExpr operator-(const SymExpr &o) const;
  SymExpr operator*(const SymExpr &o) const;
  SymExpr operator-() const;
  /// Exact division by a constant: returns nullopt unless every coefficient
  /// is divisible.
  std::optional<SymExpr> divExact(int64_t d) const;

  bool operator==(const SymExpr &o) const { return terms == o.terms; }
  bool operator!=(const SymExpr &o) const { return terms != o.terms; }
  bool operator<(const SymExpr &o) const { return terms < o.terms; }

  /// Substitutes values for symbols; symbols not in `env` stay symbolic.
  SymExpr substitute(const std::map<std::string, SymExpr> &env) const;
  /// Evaluates with every symbol bound; nullopt if a symbol is missing.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t> &env) const;
  /// Every symbol that appears.
  std::vector<std::string> symbols() const;

  /// Canonical text: `4096`, `seq`, `(past + seq)`, `(2 * seq)`,
  /// `(batch * seq)`. Non-trivial expressions are parenthesised.
  std::string str() const;

  const std::map<Monomial, int64_t> &getTerms() const { return terms; }

private:
  std::map<Monomial, int64_t> terms; // no zero coefficients
  void normalize();
};

} // namespace archc::ir

#endif // ARCHC_IR_SYMEXPR_H
