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

namespace {
int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw std::overflow_error("integer overflow in a symbolic dimension");
  return r;
}

int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw std::overflow_error("integer overflow in a symbolic dimension");
  return r;
}

Monomial multiply(const Monomial &a, const Monomial &b) {
  std::map<std::string, unsigned> powers;
  for (auto &[s, p] : a)
    powers[s] += p;
  for (auto &[s, p] : b)
    powers[s] += p;
  return Monomial(powers.begin(), powers.end());
}
} // namespace

SymExpr SymExpr::make(int64_t c, Terms terms) {
  SymExpr r(c);
  for (auto it = terms.begin(); it != terms.end();)
    it = it->second == 0 ? terms.erase(it) : std::next(it);
  if (!terms.empty())
    r.t = std::make_shared<const Terms>(std::move(terms));
  return r;
}

SymExpr SymExpr::symbol(const std::string &name) {
  return make(0, Terms{{Monomial{{name, 1}}, 1}});
}

bool SymExpr::operator<(const SymExpr &o) const {
  if (c != o.c)
    return c < o.c;
  if (!t || !o.t)
    return !t && o.t;
  return *t < *o.t;
}

std::map<Monomial, int64_t> SymExpr::getTerms() const {
  Terms all = t ? *t : Terms();
  if (c != 0)
    all[{}] = c;
  return all;
}

SymExpr SymExpr::operator+(const SymExpr &o) const {
  if (!t && !o.t)
    return SymExpr(checkedAdd(c, o.c));
  if (!o.t) {
    SymExpr r = *this;
    r.c = checkedAdd(c, o.c);
    return r;
  }
  if (!t) {
    SymExpr r = o;
    r.c = checkedAdd(c, o.c);
    return r;
  }
  Terms sum = *t;
  for (auto &[m, k] : *o.t)
    sum[m] = checkedAdd(sum[m], k);
  return make(checkedAdd(c, o.c), std::move(sum));
}

SymExpr SymExpr::operator-() const {
  if (!t)
    return SymExpr(checkedMul(c, -1));
  Terms neg = *t;
  for (auto &[m, k] : neg)
    k = checkedMul(k, -1);
  return make(checkedMul(c, -1), std::move(neg));
}

SymExpr SymExpr::operator-(const SymExpr &o) const { return *this + (-o); }

SymExpr SymExpr::operator*(const SymExpr &o) const {
  if (!t && !o.t)
    return SymExpr(checkedMul(c, o.c));
  if (!o.t || !t) {
    // A polynomial times a constant k.
    const SymExpr &p = t ? *this : o;
    int64_t k = t ? o.c : c;
    Terms scaled = *p.t;
    for (auto &[m, v] : scaled)
      v = checkedMul(v, k);
    return make(checkedMul(p.c, k), std::move(scaled));
  }
  Terms a = getTerms(), b = o.getTerms(), prod;
  for (auto &[ma, ca] : a)
    for (auto &[mb, cb] : b) {
      Monomial m = multiply(ma, mb);
      prod[m] = checkedAdd(prod[m], checkedMul(ca, cb));
    }
  auto it = prod.find(Monomial{});
  int64_t k = it == prod.end() ? 0 : it->second;
  if (it != prod.end())
    prod.erase(it);
  return make(k, std::move(prod));
}

std::optional<SymExpr> SymExpr::divExact(int64_t d) const {
  if (d == -1)
    return -*this; // checked: INT64_MIN / -1 does not fit
  if (d == 0 || c % d != 0)
    return std::nullopt;
  if (!t)
    return SymExpr(c / d);
  Terms q;
  for (auto &[m, k] : *t) {
    if (k % d != 0)
      return std::nullopt;
    q[m] = k / d;
  }
  return make(c / d, std::move(q));
}

SymExpr SymExpr::substitute(const std::map<std::string, SymExpr> &env) const {
  if (!t)
    return *this;
  SymExpr r(c);
  for (auto &[m, k] : *t) {
    SymExpr term(k);
    for (auto &[s, p] : m) {
      auto it = env.find(s);
      SymExpr base = it != env.end() ? it->second : SymExpr::symbol(s);
      for (unsigned n = 0; n < p; ++n)
        term = term * base;
    }
    r = r + term;
  }
  return r;
}

std::optional<int64_t>
SymExpr::evaluate(const std::map<std::string, int64_t> &env) const {
  if (!t)
    return c;
  int64_t total = c;
  for (auto &[m, k] : *t) {
    int64_t v = k;
    for (auto &[s, p] : m) {
      auto it = env.find(s);
      if (it == env.end())
        return std::nullopt;
      for (unsigned n = 0; n < p; ++n)
        v = checkedMul(v, it->second);
    }
    total = checkedAdd(total, v);
  }
  return total;
}

std::vector<std::string> SymExpr::symbols() const {
  std::set<std::string> s;
  if (t)
    for (auto &[m, k] : *t)
      for (auto &[name, p] : m)
        s.insert(name);
  return {s.begin(), s.end()};
}

std::string SymExpr::str() const {
  if (isConstant())
    return std::to_string(getConstant().value_or(0));
  // Order: higher total degree first, then by monomial; constant last.
  Terms terms = getTerms();
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
    // The magnitude as unsigned: -INT64_MIN does not fit in int64.
    uint64_t mag =
        c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
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
