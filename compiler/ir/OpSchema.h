//===- OpSchema.h - The one definition of every IR op -----------*- C++ -*-===//
//
// This file declares the op schema: for each IR op, in one place next to its
// family's rules (compiler/ir/ops/*.cpp), its named operands (required,
// optional, or added by a pass), its typed attributes with defaults and
// allowed values, its results, a one-line summary, its shape rule, its
// semantic checks and its cost rule. Everything else derives from it:
//   - the `op.<name>(...)` signatures of the .arch language and the
//     argument checks (frontend/Builtins, irgen's generic op builder);
//   - the structural verifier (operand, result and attribute checks);
//   - typed accessors on ir::Op (`op.attr<int64_t>("ratio")`,
//     `op.operand("sinks")`), which reject names the schema does not declare;
//   - the op reference in docs/ir.md (`archc --print-op-reference`).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_OPSCHEMA_H
#define ARCHC_IR_OPSCHEMA_H

#include "ir/Cost.h"
#include "ir/IR.h"
#include "support/Diagnostics.h"

#include <functional>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace archc::ir {

/// Thrown when code asks an op for an operand, attribute or result its
/// schema does not declare (or with the wrong type): a compiler bug, never a
/// user error.
class SchemaError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

/// The value type of an attribute.
enum class AttrType {
  Bool,
  Int,
  Float,
  String,
  /// A string from a fixed list (`AttrSpec::allowed`).
  Enum,
  /// A plain word usable in graph I/O names (no spaces, dots or braces).
  Identifier,
  /// An element type name, stored canonical (`f32`, `bf16`, ...).
  DType,
  IntList,
  /// Integers and symbolic dims (`[batch, seq, 4, 16]`).
  DimList,
  /// A nested dictionary of scalars and lists (RoPE scaling parameters).
  Dict,
};

/// The language and C++ names of an attribute type (`int`, `list of ints`).
const char *attrTypeName(AttrType t);

/// Who sets an attribute or supplies an operand.
enum class Origin {
  /// A `.arch` argument of `op.<name>(...)`.
  Language,
  /// Set by the compiler when it creates the op (weight names, layer
  /// bounds); not an argument.
  Builder,
  /// Added by a pass (e.g. the kv-cache pass's past state and layout).
  Pass,
};

/// One attribute.
struct AttrSpec {
  std::string name;
  AttrType type = AttrType::Int;
  Origin origin = Origin::Language;
  /// Materialised when the argument is absent (always printed). Without a
  /// default an attribute is either required or, with `optional`, absent
  /// when not given (printed only when present).
  std::optional<Attr> defaultValue;
  bool optional = false;
  /// Allowed values of an Enum.
  std::vector<std::string> allowed;
  /// Inclusive lower bound of an Int or Float (`minExclusive`: strict).
  std::optional<double> min;
  bool minExclusive = false;
  /// Lists must not be empty.
  bool nonEmpty = false;
  /// An Int or Float that must not be 0 (a factor the output is multiplied
  /// by). A Float of the language must be finite in any case.
  bool nonZero = false;
  /// A Dict's keys the op honours, given the dict (all when unset). The keys
  /// of a config.json dict it does not honour stay unread, so binding
  /// refuses them by name (config/ConfigUse.h).
  std::function<std::vector<std::string>(const AttrDict &)> honouredKeys;
  std::string summary;

  bool required() const { return !defaultValue && !optional; }
};

/// One operand (or, `variadic`, a list of operands).
struct OperandSpec {
  std::string name;
  Origin origin = Origin::Language;
  bool optional = false;
  /// The op takes a list of tensors here (`op.concat(xs)`); at most one
  /// variadic operand, the op's last language operand.
  bool variadic = false;
  /// Another operand that must be present when this one is.
  std::string needs;
  std::string summary;
};

/// One result (or, `variadicFrom`, one per element of a list attribute).
struct ResultSpec {
  std::string name;
  Origin origin = Origin::Language;
  /// The result count is the length of this list attribute (`split`).
  std::string variadicFrom;
  /// One result per operand (repeat: one per carried value).
  bool perOperand = false;
  std::string summary;
};

/// A nested region of an op, built from a `.arch` function argument
/// (expert bodies: `fn(tokens, e) { ... }`).
struct RegionSpec {
  std::string name;
  /// The function's parameters: a tensor block argument each, then
  /// compile-time index variables (`e`).
  std::vector<std::string> blockArgs;
  std::vector<std::string> indices;
  std::string summary;
  /// One or more regions of this kind (repeat: one per layer kind).
  bool repeated = false;
};

/// One `.arch` argument of `op.<name>(...)`: an operand or an attribute, in
/// signature order.
struct ArgRef {
  enum class Kind { Operand, Attr, Region } kind;
  size_t index; ///< into operands / attrs / regions
};

using VerifyRule = bool (*)(const Op &, DiagnosticEngine &);
using InferRule = bool (*)(Op &, DiagnosticEngine &);
using CostRule = OpCost (*)(const Op &, const CostContext &);
/// Fraction of key positions holding data in result `r` (compressed
/// entries), given the operands' densities; null: the sparsest operand's.
using DensityRule = double (*)(const Op &, unsigned r,
                               const std::vector<double> &operandDensity);
/// The type of the constant-size decode state an op owns, from its operand
/// types (called only once they are all known).
using StateTypeRule = bool (*)(const Op &, TensorType &);

/// The definition of one op.
struct OpSchema {
  OpKind kind{};
  std::string summary;
  /// Prose for the op reference beyond the summary (layouts, semantics).
  std::string description;
  std::vector<OperandSpec> operands;
  std::vector<AttrSpec> attrs;
  std::vector<ResultSpec> results;
  std::vector<RegionSpec> regions;
  /// The `.arch` signature, in order (empty for ops that are not `op.*`).
  std::vector<ArgRef> signature;
  /// Exposed to `.arch` files as `op.<mnemonic>`.
  bool inLanguage = false;
  /// Must be used inside a layer loop (decode-time state is per layer).
  bool perLayerState = false;
  /// Cannot be used inside an expert body.
  bool notInExpertBody = false;
  /// Semantic checks beyond the structure (cross-attribute constraints).
  VerifyRule verify = nullptr;
  /// Result types from operand types; null for ops whose types are set at
  /// creation or by the pass that walks their regions.
  InferRule infer = nullptr;
  /// Work and bytes at one profile point; null: costs nothing (views,
  /// leaves, control).
  CostRule cost = nullptr;
  /// The cost rule accounts for compressed (sparse) operands itself; other
  /// ops over compressed entries are scaled by their density.
  bool costHandlesDensity = false;
  /// Results are dense whatever the operands (fresh data).
  bool denseResults = false;
  DensityRule density = nullptr;
  /// Ops that own a decode-time state of constant size (conv windows,
  /// recurrent and state-space matrices): its type. The kv-cache pass gives
  /// every such op past/present graph I/O (`state` attribute, `past` operand,
  /// `present` result), the mask passes give it the padding mask (`mask`
  /// operand), the profile counts its bytes per sequence. Null: none.
  StateTypeRule stateType = nullptr;
  /// That state is kept in float32 whatever the KV-cache precision (the
  /// models declare float32 recurrent / SSM state); else at the KV bits.
  bool stateInFloat32 = false;

  const char *mnemonic() const { return ir::mnemonic(kind); }
  /// Index of a declared operand / attribute / result; nullopt if none.
  std::optional<size_t> findOperand(std::string_view name) const;
  std::optional<size_t> findAttr(std::string_view name) const;
  std::optional<size_t> findResult(std::string_view name) const;
  /// Like the find* functions, but a name the schema does not declare
  /// throws SchemaError.
  size_t operandIndex(std::string_view name) const;
  const AttrSpec &attr(std::string_view name) const;
  size_t resultIndex(std::string_view name) const;
};

/// The schema of an op kind (every kind has one).
const OpSchema &opSchema(OpKind kind);
/// The schema of an `op.<name>` of the language; null when there is none.
const OpSchema *findLanguageOp(std::string_view name);
/// Every schema, in Ops.def order.
const std::vector<OpSchema> &allOpSchemas();

/// Checks an attribute value against its spec (type, allowed values, bound,
/// non-empty, identifier). Returns the problem, or nullopt when it fits.
/// The builder reports it at the argument, the verifier at the op.
std::optional<std::string> checkAttrValue(const AttrSpec &spec,
                                          const Attr &value);

/// Checks an op against its schema: operand and result counts, present
/// optional operands and their requirements, every attribute declared,
/// typed and within its constraints, required attributes present, regions;
/// then the op's own semantic rule. Reports at the op and returns false on
/// error.
bool verifyAgainstSchema(const Op &op, DiagnosticEngine &diags);

/// Writes the op reference (Markdown) that docs/ir.md carries.
void printOpReference(std::ostream &os);

//===----------------------------------------------------------------------===//
// Defining schemas (used by compiler/ir/ops/*.cpp)
//===----------------------------------------------------------------------===//

/// Fluent construction of one schema. Arguments are added to the `.arch`
/// signature in the order they are declared (pass- and builder-supplied
/// ones excepted).
class SchemaBuilder {
public:
  SchemaBuilder(OpKind kind, std::string summary);

  SchemaBuilder &describe(std::string text);
  SchemaBuilder &language();
  /// A required operand / an optional one / a list / one added by a pass.
  SchemaBuilder &operand(std::string name, std::string summary);
  SchemaBuilder &optOperand(std::string name, std::string summary,
                            std::string needs = "");
  SchemaBuilder &variadicOperand(std::string name, std::string summary,
                                 Origin origin = Origin::Language);
  SchemaBuilder &passOperand(std::string name, std::string summary);
  /// A required attribute, one with a default, an optional one (absent
  /// unless given), one set by the compiler or by a pass.
  SchemaBuilder &attr(std::string name, AttrType type, std::string summary);
  SchemaBuilder &attr(std::string name, AttrType type, Attr defaultValue,
                      std::string summary);
  SchemaBuilder &optAttr(std::string name, AttrType type, std::string summary);
  SchemaBuilder &builderAttr(std::string name, AttrType type,
                             std::string summary);
  SchemaBuilder &passAttr(std::string name, AttrType type, std::string summary);
  /// Constraints on the last attribute declared.
  SchemaBuilder &allowed(std::vector<std::string> values);
  SchemaBuilder &atLeast(double bound);
  SchemaBuilder &above(double bound);
  SchemaBuilder &nonEmpty();
  SchemaBuilder &nonZero();
  SchemaBuilder &
  honouredKeys(std::function<std::vector<std::string>(const AttrDict &)> keys);
  SchemaBuilder &result(std::string name, std::string summary);
  SchemaBuilder &variadicResults(std::string name, std::string countAttr,
                                 std::string summary);
  SchemaBuilder &passResult(std::string name, std::string summary);
  SchemaBuilder &resultPerOperand(std::string name, std::string summary);
  SchemaBuilder &region(std::string name, std::vector<std::string> blockArgs,
                        std::vector<std::string> indices, std::string summary);
  /// One or more regions, built by the compiler (layer kinds).
  SchemaBuilder &repeatedRegion(std::string name, std::string summary);
  SchemaBuilder &perLayerState();
  SchemaBuilder &notInExpertBody();
  SchemaBuilder &verify(VerifyRule rule);
  SchemaBuilder &infer(InferRule rule);
  SchemaBuilder &cost(CostRule rule);
  SchemaBuilder &costHandlesDensity();
  SchemaBuilder &denseResults();
  SchemaBuilder &density(DensityRule rule);
  /// A constant-size decode state (see OpSchema::stateType).
  SchemaBuilder &constantState(StateTypeRule rule, bool float32);

  OpSchema take() { return std::move(s); }

private:
  OpSchema s;
  AttrSpec &lastAttr();
};

/// Collects the schemas of one op family file.
using SchemaList = std::vector<OpSchema>;
void addElementwiseSchemas(SchemaList &out);
void addLinearSchemas(SchemaList &out);
void addReduceSchemas(SchemaList &out);
void addShapeSchemas(SchemaList &out);
void addAttentionSchemas(SchemaList &out);
void addRecurrentSchemas(SchemaList &out);
void addStateSpaceSchemas(SchemaList &out);
void addMoeSchemas(SchemaList &out);
void addVisionSchemas(SchemaList &out);
void addStructureSchemas(SchemaList &out);

} // namespace archc::ir

#endif // ARCHC_IR_OPSCHEMA_H
