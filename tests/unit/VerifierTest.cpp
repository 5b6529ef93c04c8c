//===- VerifierTest.cpp - IR verification ---------------------------------===//
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::ir;

namespace {
struct Fixture {
  SourceMgr sm;
  DiagnosticEngine diags{sm};
  Module m;
  Fixture() { diags.setCapture(true); }
  Value *input(TensorType t, const std::string &name) {
    return m.graph.body.addArgument(std::move(t), name);
  }
  Op *op(OpKind k, std::vector<Value *> operands, unsigned results = 1) {
    auto o = std::make_unique<Op>(k, Location{});
    o->operands = std::move(operands);
    for (unsigned i = 0; i < results; ++i)
      o->addResult();
    return m.graph.body.push(std::move(o));
  }
  void ret(std::vector<Value *> v) {
    op(OpKind::Return, std::move(v), 0);
    m.graph.outputNames.assign(m.graph.body.getTerminator()->getNumOperands(),
                               "y");
  }
  std::string errors() const {
    std::string s;
    for (auto &d : diags.getCaptured())
      s += d.message + "\n";
    return s;
  }
};
TensorType f32(std::vector<SymExpr> d) {
  return TensorType(DType::F32, std::move(d));
}
} // namespace

TEST(Verifier, AcceptsWellFormedGraph) {
  Fixture f;
  Value *x = f.input(f32({SymExpr::symbol("batch"), 4}), "x");
  Op *n = f.op(OpKind::Neg, {x});
  f.ret({n->getResult()});
  EXPECT_TRUE(verifyModule(f.m, f.diags)) << f.errors();
}

TEST(Verifier, RejectsUseBeforeDefinition) {
  Fixture f;
  Value *x = f.input(f32({4}), "x");
  auto later = std::make_unique<Op>(OpKind::Neg, Location{});
  later->operands = {x};
  Value *v = later->addResult();
  f.op(OpKind::Neg, {v}); // uses v before its op exists in the block
  f.m.graph.body.push(std::move(later));
  f.ret({x});
  EXPECT_FALSE(verifyModule(f.m, f.diags));
  EXPECT_NE(f.errors().find("used before it is defined"), std::string::npos);
}

TEST(Verifier, RejectsWrongOperandCount) {
  Fixture f;
  Value *x = f.input(f32({4}), "x");
  Op *add = f.op(OpKind::Add, {x});
  f.ret({add->getResult()});
  EXPECT_FALSE(verifyModule(f.m, f.diags));
  EXPECT_NE(f.errors().find("expects 2 operand(s)"), std::string::npos);
}

TEST(Verifier, RejectsUndeclaredWeight) {
  Fixture f;
  Op *p = f.op(OpKind::Param, {});
  p->setAttr("name", std::string("w"));
  p->getResult()->type = f32({4});
  f.ret({p->getResult()});
  EXPECT_FALSE(verifyModule(f.m, f.diags));
  EXPECT_NE(f.errors().find("weight 'w' has no declaration"),
            std::string::npos);
}

TEST(Verifier, RejectsMissingTerminator) {
  Fixture f;
  f.input(f32({4}), "x");
  EXPECT_FALSE(verifyModule(f.m, f.diags));
}

TEST(Verifier, RejectsBadRouteAttributes) {
  Fixture f;
  Value *x = f.input(f32({2, 8}), "x");
  Op *r = f.op(OpKind::Route, {x}, 2);
  r->setAttr("top_k", int64_t(2));
  r->setAttr("scoring", std::string("softermax"));
  f.ret({r->getResult(0)});
  EXPECT_FALSE(verifyModule(f.m, f.diags));
  EXPECT_NE(f.errors().find("scoring must be softmax, sigmoid, sqrtsoftplus, "
                            "sparsemixer or none, got \"softermax\""),
            std::string::npos);
}
