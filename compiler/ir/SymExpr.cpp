//===- SymExpr.cpp - Canonical polynomials over symbolic dims -------------===//
//
// This file implements SymExpr arithmetic and canonical printing.
//
//===----------------------------------------------------------------------===//
#include "ir/SymExpr.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace archc::ir {

SymExpr::SymExpr(int64_t c) {
  if (c != 0)
    terms[{}] = c;
}

SymExpr SymExpr::symbol(const std::string &name) {
  SymExpr e;
  e.terms[{{name, 1}}] = 1;
  return e;
}

void SymExpr::normalize() {
  for (auto it = terms.begin(); it != terms.end();)
    it = it->second == 0 ? terms.erase(it) : std::next(it);
}

bool SymExpr::isConstant() const {
  return terms.empty() || (terms.size() == 1 && terms.begin()->first.empty());
}

std::optional<int64_t> SymExpr::getConstant() const {
  if (terms.empty())
    return 0;
  if (isConstant())
    return terms.begin()->second;
  return std::nullopt;
}

static int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw std::overflow_error("integer overflow in a symbolic dimension");
  return r;
}

static int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw std::overflow_error("integer overflow in a symbolic dimension");
  return r;
}

SymExpr SymExpr::operator+(const SymExpr &o) const {
  SymExpr r = *this;
  for (auto &[m, c] : o.terms)
    r.terms[m] = checkedAdd(r.terms[m], c);
  r.normalize();
  return r;
}

SymExpr SymExpr::operator-() const {
  SymExpr r = *this;
  for (auto &[m, c] : r.terms)
    c = -c;
  return r;
}

SymExpr SymExpr::operator-(const SymExpr &o) const { return *this + (-o); }

static Monomial multiply(const Monomial &a, const Monomial &b) {
  std::map<std::string, unsigned> powers;
  for (auto &[s, p] : a)
    powers[s] += p;
  for (auto &[s, p] : b)
    powers[s] += p;
  return Monomial(powers.begin(), powers.end());
}

SymExpr SymExpr::operator*(const SymExpr &o) const {
  SymExpr r;
  for (auto &[ma, ca] : terms)
    for (auto &[mb, cb] : o.terms)
      r.terms[multiply(ma, mb)] =
          checkedAdd(r.terms[multiply(ma, mb)], checkedMul(ca, cb));
  r.normalize();
  return r;
}

std::optional<SymExpr> SymExpr::divExact(int64_t d) const {
  if (d == 0)
    return std::nullopt;
  SymExpr r;
  for (auto &[m, c] : terms) {
    if (c % d != 0)
      return std::nullopt;
    r.terms[m] = c / d;
  }
  return r;
}

SymExpr SymExpr::substitute(const std::map<std::string, SymExpr> &env) const {
  SymExpr r;
  for (auto &[m, c] : terms) {
    SymExpr term(c);
    for (auto &[s, p] : m) {
      auto it = env.find(s);
      SymExpr base = it != env.end() ? it->second : SymExpr::symbol(s);
      for (unsigned k = 0; k < p; ++k)
        term = term * base;
    }
    r = r + term;
  }
  return r;
}

std::optional<int64_t>
SymExpr::evaluate(const std::map<std::string, int64_t> &env) const {
  int64_t total = 0;
  for (auto &[m, c] : terms) {
    int64_t v = c;
    for (auto &[s, p] : m) {
      auto it = env.find(s);
      if (it == env.end())
        return std::nullopt;
      for (unsigned k = 0; k < p; ++k)
        v = checkedMul(v, it->second);
    }
    total = checkedAdd(total, v);
  }
  return total;
}

std::vector<std::string> SymExpr::symbols() const {
  std::set<std::string> s;
  for (auto &[m, c] : terms)
    for (auto &[name, p] : m)
      s.insert(name);
  return {s.begin(), s.end()};
}

std::string SymExpr::str() const {
  if (isConstant())
    return std::to_string(getConstant().value_or(0));
  // Order: higher total degree first, then by monomial; constant last.
  std::vector<std::pair<Monomial, int64_t>> ordered(terms.begin(), terms.end());
  auto degree = [](const Monomial &m) {
    unsigned d = 0;
    for (auto &[s, p] : m)
      d += p;
    return d;
  };
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const auto &a, const auto &b) {
                     unsigned da = degree(a.first), db = degree(b.first);
                     if (da != db)
                       return da > db;
                     return a.first < b.first;
                   });
  // A lone symbol prints bare.
  if (ordered.size() == 1 && ordered[0].second == 1 &&
      ordered[0].first.size() == 1 && ordered[0].first[0].second == 1)
    return ordered[0].first[0].first;
  std::string s;
  bool first = true;
  for (auto &[m, c] : ordered) {
    int64_t mag = c < 0 ? -c : c;
    if (first)
      s += c < 0 ? "-" : "";
    else
      s += c < 0 ? " - " : " + ";
    first = false;
    std::string factors;
    for (auto &[name, p] : m)
      for (unsigned k = 0; k < p; ++k)
        factors += (factors.empty() ? "" : " * ") + name;
    if (factors.empty())
      s += std::to_string(mag);
    else if (mag == 1)
      s += factors;
    else
      s += std::to_string(mag) + " * " + factors;
  }
  return "(" + s + ")";
}

} // namespace archc::ir
