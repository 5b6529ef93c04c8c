//===- IR.h - archc's typed intermediate representation ---------*- C++ -*-===//
//
// This file declares the IR: a Module owns the weight declarations and one
// Graph; a Graph is a Block of Ops in SSA form; an Op has operands, results,
// sorted attributes, optional nested regions (layer repetition, expert
// bodies) and the source location it came from (with the chain of composite
// calls it was inlined through).
//
// Layer repetition stays compact: a `repeat` op over layer index %i owns one
// region per distinct layer kind, each tagged with the set of layers that use
// it. Weight names keep their `{i}`/`{e}` placeholders until expansion.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_IR_H
#define ARCHC_IR_IR_H

#include "ir/Types.h"
#include "support/SourceMgr.h"

#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace archc::ir {

enum class OpKind {
#define ARCHC_OP(E, M, F) E,
#include "ir/Ops.def"
#undef ARCHC_OP
};

enum class OpFamily {
  Leaf,
  Binary,
  Select,
  Unary,
  Softmax,
  Norm,
  Reduce,
  MatMul,
  Gather,
  Shape,
  Rope,
  Attention,
  Cache,
  Recurrent,
  StateSpace,
  Route,
  Experts,
  Vision,
  Sequence,
  Control
};

const char *mnemonic(OpKind k);
OpFamily family(OpKind k);
/// Looks an op up by mnemonic; false when unknown.
bool lookupOpKind(const std::string &mnemonic, OpKind &out);

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

struct AttrDict;
/// An attribute value. Lists are homogeneous.
using Attr =
    std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                 std::vector<double>, std::vector<std::string>,
                 std::vector<SymExpr>, std::shared_ptr<AttrDict>>;
/// A nested dictionary attribute (e.g. RoPE scaling parameters).
struct AttrDict {
  std::map<std::string, Attr> entries;
};
/// Prints an attribute in the IR's fixed format.
std::string attrStr(const Attr &a);

//===----------------------------------------------------------------------===//
// Values, ops, blocks
//===----------------------------------------------------------------------===//

class Op;
class Block;

/// One inlining step: the op was produced inside a call to `callee` made at
/// `callSite`.
struct InlineFrame {
  SourceRange callSite;
  std::string callee;
  std::shared_ptr<const InlineFrame> parent;
};

/// Where an op came from.
struct Location {
  SourceRange range;
  std::shared_ptr<const InlineFrame> inlinedAt;
};

/// An SSA value: an op result or a block argument.
class Value {
public:
  TensorType type;
  /// Name hint: block arguments print with it (`%x`, `%input_ids`).
  std::string name;

  Op *getDefiningOp() const { return defOp; }
  unsigned getResultIndex() const { return index; }
  Block *getOwnerBlock() const { return ownerBlock; }
  bool isBlockArgument() const { return ownerBlock != nullptr; }

private:
  friend class Op;
  friend class Block;
  Op *defOp = nullptr;
  unsigned index = 0;
  Block *ownerBlock = nullptr;
};

/// A list of ops with arguments. Regions of repeat/experts ops and the graph
/// body are blocks.
class Block {
public:
  Block() = default;
  Block(const Block &) = delete;
  Block &operator=(const Block &) = delete;

  Value *addArgument(TensorType type, std::string name);
  const std::vector<std::unique_ptr<Value>> &getArguments() const {
    return args;
  }
  Value *getArgument(size_t i) const { return args[i].get(); }

  std::list<std::unique_ptr<Op>> &getOps() { return ops; }
  const std::list<std::unique_ptr<Op>> &getOps() const { return ops; }
  Op *getParentOp() const { return parentOp; }

  /// Layers this region serves (repeat regions only), ascending.
  std::vector<int64_t> layers;

  /// Appends an op and takes ownership.
  Op *push(std::unique_ptr<Op> op);
  /// Inserts before `pos`.
  Op *insert(std::list<std::unique_ptr<Op>>::iterator pos,
             std::unique_ptr<Op> op);
  Op *getTerminator() const;

private:
  friend class Op;
  std::vector<std::unique_ptr<Value>> args;
  std::list<std::unique_ptr<Op>> ops;
  Op *parentOp = nullptr;
};

/// An operation.
class Op {
public:
  Op(OpKind kind, Location loc) : kind(kind), loc(std::move(loc)) {}
  Op(const Op &) = delete;
  Op &operator=(const Op &) = delete;

  OpKind getKind() const { return kind; }
  OpFamily getFamily() const { return family(kind); }
  const char *getMnemonic() const { return mnemonic(kind); }
  const Location &getLoc() const { return loc; }
  void setLoc(Location l) { loc = std::move(l); }

  // Operands.
  std::vector<Value *> operands;
  Value *getOperand(size_t i) const { return operands[i]; }
  size_t getNumOperands() const { return operands.size(); }

  // Results.
  Value *addResult(TensorType type = TensorType::unknown());
  Value *getResult(size_t i = 0) const { return results[i].get(); }
  size_t getNumResults() const { return results.size(); }
  const std::vector<std::unique_ptr<Value>> &getResults() const {
    return results;
  }

  // Operands by name (the op's schema declares them). Optional operands and
  // those a pass adds are stored only when present, in schema order.
  /// The operand called `name`; null when it is optional and absent. A name
  /// the schema does not declare throws SchemaError.
  Value *operand(std::string_view name) const;
  bool hasOperand(std::string_view name) const {
    return operand(name) != nullptr;
  }
  /// Sets (or, for an optional operand, adds at its schema position) the
  /// operand called `name`.
  void setOperand(std::string_view name, Value *v);
  /// Bit i set: the schema's operand i (optional or pass-added) is present.
  uint32_t getPresentOperands() const { return presentOperands; }

  // Attributes (kept sorted by name), typed by the op's schema.
  /// The value of a declared attribute, its schema default when absent.
  /// Throws SchemaError for an undeclared name, a wrong T, or an absent
  /// attribute without default (read those with optAttr).
  template <typename T> const T &attr(std::string_view name) const {
    const Attr *a = lookupAttr(name);
    const T *v = a ? std::get_if<T>(a) : nullptr;
    if (!v)
      attrAccessError(name, a != nullptr);
    return *v;
  }
  /// Like attr(), but null when the attribute is optional and absent.
  template <typename T> const T *optAttr(std::string_view name) const {
    const Attr *a = lookupAttr(name);
    if (!a)
      return nullptr;
    const T *v = std::get_if<T>(a);
    if (!v)
      attrAccessError(name, true);
    return v;
  }
  /// Whether a declared attribute is set (defaults do not count).
  bool hasAttr(std::string_view name) const;
  /// Sets a declared attribute (SchemaError otherwise).
  void setAttr(std::string_view name, Attr value);
  /// Sorted by name (heterogeneous lookup by string_view).
  using AttrMap = std::map<std::string, Attr, std::less<>>;
  const AttrMap &getAttrs() const { return attrs; }

  /// The result called `name`; null when a pass has not added it yet.
  Value *result(std::string_view name) const;

  // Regions.
  Block *addRegion();
  /// Takes ownership of an existing block as a new region.
  Block *adoptRegion(std::unique_ptr<Block> b);
  const std::vector<std::unique_ptr<Block>> &getRegions() const {
    return regions;
  }
  std::vector<std::unique_ptr<Block>> &getRegions() { return regions; }
  Block *getParentBlock() const { return parent; }

private:
  friend class Block;
  OpKind kind;
  Location loc;
  std::vector<std::unique_ptr<Value>> results;
  std::vector<std::unique_ptr<Block>> regions;
  Block *parent = nullptr;
  AttrMap attrs;
  uint32_t presentOperands = 0;

  /// The stored value or the schema default of a declared attribute; null
  /// when absent without default.
  const Attr *lookupAttr(std::string_view name) const;
  [[noreturn]] void attrAccessError(std::string_view name, bool present) const;
  friend std::unique_ptr<Op>
  cloneOp(const Op &, std::unordered_map<const Value *, Value *> &);
};

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

/// A weight tensor of the checkpoint. `pattern` may contain `{i}` (expanded
/// over `layers`) and `{e}` (expanded over 0..experts-1).
struct WeightDecl {
  std::string pattern;
  TensorType type;
  std::vector<int64_t> layers; ///< empty when the pattern has no {i}
  int64_t experts = 0;         ///< 0 when the pattern has no {e}
  /// The tensor stacks all routed experts along its first axis (read one
  /// expert at a time through expert_slice).
  bool stackedExperts = false;
  /// Declared with an explicit dtype (e.g. float32 state weights that
  /// Hugging Face keeps in fp32): never quantized.
  bool pinnedDType = false;
  /// A checkpoint tensor that is not a parameter (a registered buffer in
  /// Hugging Face, such as xIELU's beta and eps): listed with the weights,
  /// not counted in the parameter totals.
  bool buffer = false;
  SourceRange loc;

  /// Number of tensors this declaration stands for.
  int64_t count() const;
  /// Concrete name for one (layer, expert) instance.
  std::string instantiate(int64_t layer, int64_t expert) const;
};

/// A per-layer graph input or output (decode-time state), e.g.
/// `past_key_values.{i}.key` for the layers in `layers`.
struct StateIO {
  std::string pattern;
  TensorType type;
  std::vector<int64_t> layers;
};

/// The model graph: inputs are the body's block arguments.
class Graph {
public:
  Block body;
  std::vector<std::string> outputNames; ///< names of `return` operands
  std::vector<StateIO> stateInputs;
  std::vector<StateIO> stateOutputs;
};

/// A compiled model.
class Module {
public:
  std::string name;       ///< arch name
  std::string sourceFile; ///< the .arch file
  std::string configFile;
  DType activationDType = DType::F32;
  std::vector<WeightDecl> weights;
  Graph graph;
  /// Selected config values recorded for back ends (genai_config.json,
  /// profile header), e.g. "num_hidden_layers".
  std::map<std::string, Attr> info;

  /// Finds the declaration of a weight pattern; null if none.
  const WeightDecl *findWeight(const std::string &pattern) const;
};

/// Substitutes `{i}` and `{e}` in a pattern (negative = keep placeholder).
std::string instantiatePattern(const std::string &pattern, int64_t layer,
                               int64_t expert);

/// Formats a layer set compactly: `0..32`, `0..26 step 2`, `[0, 3, 7]`.
std::string formatLayers(const std::vector<int64_t> &layers);

/// Walks every op in a block, recursing into regions (pre-order).
template <typename Fn> void walk(Block &b, Fn &&fn) {
  for (auto &op : b.getOps()) {
    fn(*op);
    for (auto &r : op->getRegions())
      walk(*r, fn);
  }
}
template <typename Fn> void walk(const Block &b, Fn &&fn) {
  for (const auto &op : b.getOps()) {
    fn(static_cast<const Op &>(*op));
    for (const auto &r : op->getRegions())
      walk(static_cast<const Block &>(*r), fn);
  }
}

} // namespace archc::ir

#endif // ARCHC_IR_IR_H
