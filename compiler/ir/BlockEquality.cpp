//===- BlockEquality.cpp - Structural equality of IR blocks ---------------===//
#include "ir/BlockEquality.h"

#include <unordered_map>

namespace archc::ir {

namespace {
class BlockComparer {
public:
  bool equal(const Block &a, const Block &b) {
    if (a.getArguments().size() != b.getArguments().size() ||
        a.getOps().size() != b.getOps().size())
      return false;
    for (size_t i = 0; i < a.getArguments().size(); ++i)
      map[a.getArgument(i)] = b.getArgument(i);
    auto ia = a.getOps().begin(), ib = b.getOps().begin();
    for (; ia != a.getOps().end(); ++ia, ++ib) {
      const Op &x = **ia, &y = **ib;
      if (x.getKind() != y.getKind() ||
          x.getAttrs().size() != y.getAttrs().size() ||
          x.getPresentOperands() != y.getPresentOperands() ||
          x.getNumOperands() != y.getNumOperands() ||
          x.getNumResults() != y.getNumResults() ||
          x.getRegions().size() != y.getRegions().size())
        return false;
      for (size_t k = 0; k < x.getNumOperands(); ++k) {
        auto it = map.find(x.getOperand(k));
        const Value *want = it != map.end() ? it->second : x.getOperand(k);
        if (want != y.getOperand(k))
          return false;
      }
      for (auto ax = x.getAttrs().begin(), ay = y.getAttrs().begin();
           ax != x.getAttrs().end(); ++ax, ++ay)
        if (ax->first != ay->first || !sameAttr(ax->second, ay->second))
          return false;
      for (size_t k = 0; k < x.getNumResults(); ++k) {
        if (x.getResult(k)->type != y.getResult(k)->type)
          return false;
        map[x.getResult(k)] = y.getResult(k);
      }
      for (size_t k = 0; k < x.getRegions().size(); ++k)
        if (!equal(*x.getRegions()[k], *y.getRegions()[k]))
          return false;
    }
    return true;
  }

private:
  std::unordered_map<const Value *, const Value *> map;

  static bool sameAttr(const Attr &a, const Attr &b) {
    if (a.index() != b.index())
      return false;
    if (auto *da = std::get_if<std::shared_ptr<AttrDict>>(&a)) {
      const auto &db = std::get<std::shared_ptr<AttrDict>>(b);
      if ((*da)->entries.size() != db->entries.size())
        return false;
      for (auto x = (*da)->entries.begin(), y = db->entries.begin();
           x != (*da)->entries.end(); ++x, ++y)
        if (x->first != y->first || !sameAttr(x->second, y->second))
          return false;
      return true;
    }
    return a == b;
  }
};
} // namespace

bool structurallyEqual(const Block &a, const Block &b) {
  return BlockComparer().equal(a, b);
}

} // namespace archc::ir
