//===- OpBuiltins.cpp - op.* semantic ops and built-in functions ----------===//
//
// This file implements the calls to built-ins: `op.<name>(...)` creates the
// IR op of that name, generically from its schema (operands, typed and
// checked attributes, defaults, regions), and plain built-in functions
// (`param`, `len`, `get`, ...) compute compile-time values. It also builds
// the model graph (inputs, body, outputs).
//
//===----------------------------------------------------------------------===//
#include "irgen/Evaluator.h"

#include "ir/OpRules.h"
#include "ir/OpSchema.h"
#include "support/CheckedArith.h"

#include <fmt/format.h>

#include <cmath>

namespace archc {

using ir::OpKind;

bool Evaluator::checkBuiltinArg(const BuiltinSignature &sig,
                                const BuiltinParam &p, BoundArg &a) {
  std::string type = p.type;
  bool optional = !type.empty() && type.back() == '?';
  if (optional)
    type.pop_back();
  EvalValue &v = a.value;
  if (v.isNone() && (optional || type == "any"))
    return true;
  bool ok;
  if (type == "any")
    ok = true;
  else if (type == "tensor")
    ok = v.isTensor() || v.isNumber();
  else if (type == "int")
    ok = v.isInt();
  else if (type == "float") {
    ok = v.isNumber();
    if (ok)
      v = EvalValue::floating(v.getNumber());
  } else if (type == "bool")
    ok = v.getKind() == EvalValue::Kind::Bool;
  else if (type == "string")
    ok = v.getKind() == EvalValue::Kind::String;
  else if (type == "list")
    ok = v.getKind() == EvalValue::Kind::List ||
         v.getKind() == EvalValue::Kind::Tuple;
  else if (type == "dict")
    ok = v.getKind() == EvalValue::Kind::Dict;
  else if (type == "function")
    ok = v.getKind() == EvalValue::Kind::Function;
  else
    ok = false;
  if (!ok)
    error(a.range, fmt::format("argument '{}' of '{}' must be {}, got {}",
                               p.name, sig.name, p.type, v.typeName()));
  return ok;
}

namespace {
/// The `name` of the operand or attribute a signature entry stands for.
const std::string &argName(const ir::OpSchema &s, const ir::ArgRef &r) {
  switch (r.kind) {
  case ir::ArgRef::Kind::Operand:
    return s.operands[r.index].name;
  case ir::ArgRef::Kind::Attr:
    return s.attrs[r.index].name;
  case ir::ArgRef::Kind::Region:
    break;
  }
  return s.regions[r.index].name;
}
} // namespace

std::optional<ir::Attr> Evaluator::toTypedAttr(const ir::OpSchema &s,
                                               const ir::AttrSpec &spec,
                                               const BoundArg &a) {
  using ir::AttrType;
  const EvalValue &v = a.value;
  auto listError = [&](const char *what, size_t index, const EvalValue &e) {
    if (e.isPoison()) // its error is already reported
      return std::optional<ir::Attr>();
    error(a.range,
          fmt::format(
              "op.{}: '{}' must be a list of {}; element {} is the {} '{}'",
              s.mnemonic(), spec.name, what, index, e.typeName(), e.str()));
    return std::optional<ir::Attr>();
  };
  switch (spec.type) {
  case AttrType::Bool:
    return ir::Attr(v.getBool());
  case AttrType::Int:
    return ir::Attr(v.getInt());
  case AttrType::Float:
    return ir::Attr(v.getNumber());
  case AttrType::String:
  case AttrType::Enum:
  case AttrType::Identifier:
    return ir::Attr(v.getString());
  case AttrType::DType: {
    ir::DType t = ir::parseDType(v.getString());
    if (t == ir::DType::Unknown) {
      error(a.range, fmt::format("unknown dtype '{}'", v.getString()));
      return std::nullopt;
    }
    return ir::Attr(std::string(ir::dtypeName(t)));
  }
  case AttrType::IntList: {
    std::vector<int64_t> ints;
    for (const EvalValue &e : v.getList()) {
      if (!e.isInt())
        return listError("ints", ints.size(), e);
      ints.push_back(e.getInt());
    }
    return ir::Attr(std::move(ints));
  }
  case AttrType::DimList: {
    std::vector<ir::SymExpr> dims;
    for (const EvalValue &e : v.getList()) {
      if (e.isInt())
        dims.push_back(e.getInt());
      else if (e.getKind() == EvalValue::Kind::Dim)
        dims.push_back(e.getDim());
      else
        return listError("ints or symbolic dims", dims.size(), e);
    }
    return ir::Attr(std::move(dims));
  }
  case AttrType::Dict: {
    // The keys of a config.json dict the op honours are read; others stay
    // unread and are refused as config fields.
    if (spec.honouredKeys && v.getKind() == EvalValue::Kind::Dict) {
      ir::AttrDict all;
      for (const auto &[k, e] : v.getDict())
        if (!e.isNone() && e.getKind() == EvalValue::Kind::String)
          all.entries[k] = e.getString();
      for (const std::string &k : spec.honouredKeys(all))
        v.readDictKey(k);
    } else if (v.getKind() == EvalValue::Kind::Dict) {
      v.readWholeDict();
    }
    ir::Attr at;
    if (!toAttr(v, at) ||
        !std::holds_alternative<std::shared_ptr<ir::AttrDict>>(at)) {
      error(a.range, fmt::format("op.{}: '{}' must be a dict of scalars and "
                                 "lists",
                                 s.mnemonic(), spec.name));
      return std::nullopt;
    }
    return at;
  }
  }
  return std::nullopt;
}

EvalValue Evaluator::callOpBuiltin(const BuiltinSignature &sig,
                                   std::vector<BoundArg> &args,
                                   SourceRange range) {
  const ir::OpSchema &s = *ir::findLanguageOp(sig.name);
  if (s.perLayerState && !layer) {
    error(range, fmt::format("op.{} must be used inside a layer loop "
                             "(decode-time state is per layer)",
                             s.mnemonic()));
    return EvalValue::poison();
  }
  if (s.notInExpertBody && expertCount) {
    error(range, fmt::format("op.{} cannot be nested in an expert body",
                             s.mnemonic()));
    return EvalValue::poison();
  }
  auto op = std::make_unique<ir::Op>(s.kind, ir::Location{range, frame});
  const Callable *body = nullptr;
  SourceRange bodyRange = range;
  bool ok = true;
  for (size_t k = 0; k < s.signature.size(); ++k) {
    const ir::ArgRef &r = s.signature[k];
    BoundArg &a = args[k];
    bool given = a.present && !a.value.isNone();
    if (r.kind == ir::ArgRef::Kind::Region) {
      body = a.value.getFunction().get();
      bodyRange = a.range;
      continue;
    }
    if (r.kind == ir::ArgRef::Kind::Operand) {
      const ir::OperandSpec &spec = s.operands[r.index];
      if (!given)
        continue;
      if (spec.variadic) {
        for (const EvalValue &e : a.value.getList()) {
          ir::Value *v = asTensor(e, a.range);
          ok &= v != nullptr;
          op->operands.push_back(v);
        }
        continue;
      }
      ir::Value *v = asTensor(a.value, a.range);
      if (!v)
        ok = false;
      else
        op->setOperand(spec.name, v);
      continue;
    }
    const ir::AttrSpec &spec = s.attrs[r.index];
    if (!given) {
      if (spec.defaultValue)
        op->setAttr(spec.name, *spec.defaultValue);
      continue;
    }
    std::optional<ir::Attr> value = toTypedAttr(s, spec, a);
    if (!value) {
      ok = false;
      continue;
    }
    if (auto problem = ir::checkAttrValue(spec, *value)) {
      error(a.range, fmt::format("op.{}: {}", s.mnemonic(), *problem));
      ok = false;
      continue;
    }
    op->setAttr(spec.name, std::move(*value));
  }
  if (!ok)
    return EvalValue::poison();
  // Optional operands that only make sense together.
  for (const ir::OperandSpec &o : s.operands) {
    if (o.needs.empty() || !op->hasOperand(o.name) || op->hasOperand(o.needs))
      continue;
    const ir::OperandSpec &other = s.operands[s.operandIndex(o.needs)];
    error(range, other.needs == o.name
                     ? fmt::format("op.{}: {} and {} go together", s.mnemonic(),
                                   o.name, o.needs)
                     : fmt::format("op.{}: {} needs {}", s.mnemonic(), o.name,
                                   o.needs));
    return EvalValue::poison();
  }
  for (const ir::ResultSpec &res : s.results) {
    if (res.origin == ir::Origin::Pass)
      continue;
    size_t n = res.variadicFrom.empty()
                   ? 1
                   : op->attr<std::vector<int64_t>>(res.variadicFrom).size();
    for (size_t i = 0; i < n; ++i)
      op->addResult();
  }
  ir::Op *created = block->push(std::move(op));
  if (body && !buildRegion(s, *created, *body, bodyRange, range))
    return EvalValue::poison();
  // The structure and attribute values hold by construction; the op's own
  // cross-argument rule remains (the module verifier checks everything).
  if (s.verify && !s.verify(*created, diags))
    return EvalValue::poison();
  if (created->getNumResults() == 1)
    return EvalValue::tensor(created->getResult());
  std::vector<EvalValue> parts;
  for (const auto &res : created->getResults())
    parts.push_back(EvalValue::tensor(res.get()));
  return EvalValue::tuple(std::move(parts));
}

bool Evaluator::buildRegion(const ir::OpSchema &s, ir::Op &op,
                            const Callable &fn, SourceRange fnRange,
                            SourceRange range) {
  const ir::RegionSpec &spec = s.regions.front();
  size_t want = spec.blockArgs.size() + spec.indices.size();
  if (fn.params->size() != want) {
    std::string params;
    for (const std::string &p : spec.blockArgs)
      params += (params.empty() ? "" : ", ") + p;
    for (const std::string &p : spec.indices)
      params += (params.empty() ? "" : ", ") + p;
    error(fnRange, fmt::format("op.{}: the {} must take ({}), e.g. fn({}) "
                               "{{ ... }}; it takes {} parameter(s)",
                               s.mnemonic(), spec.name, params, params,
                               fn.params->size()));
    return false;
  }
  if (op.hasAttr("count") && op.attr<int64_t>("count") > kMaxExperts) {
    error(range,
          fmt::format("op.{}: {} experts exceed the limit of {}", s.mnemonic(),
                      op.attr<int64_t>("count"), kMaxExperts));
    return false;
  }
  ir::Block *region = op.addRegion();
  std::vector<CallArg> callArgs;
  std::vector<SourceRange> ranges;
  for (size_t i = 0; i < spec.blockArgs.size(); ++i) {
    ir::Value *arg =
        region->addArgument(ir::TensorType::unknown(), (*fn.params)[i].name);
    callArgs.push_back({"", EvalValue::tensor(arg)});
    ranges.push_back(fnRange);
  }
  for (const std::string &index : spec.indices) {
    callArgs.push_back({"", EvalValue::index(index, std::nullopt)});
    ranges.push_back(fnRange);
  }
  ir::Block *savedBlock = block;
  block = region;
  // The expert index is symbolic ({e}): the body is evaluated once for all
  // experts, its weights named with the placeholder.
  expertCount = op.attr<int64_t>("count");
  EvalValue result = callFunction(fn, callArgs, ranges, range);
  expertCount = 0;
  bool ok = !result.isPoison();
  if (ok && !result.isTensor()) {
    error(fnRange, fmt::format("op.{}: the {} must return a tensor, got {}",
                               s.mnemonic(), spec.name, result.typeName()));
    ok = false;
  }
  if (ok)
    createOp(OpKind::Yield, {result.getTensor()}, range, 0);
  block = savedBlock;
  return ok;
}

EvalValue Evaluator::callFunctionBuiltin(const BuiltinSignature &sig,
                                         std::vector<BoundArg> &args,
                                         SourceRange range) {
  const std::string &n = sig.name;
  auto num = [&](size_t k) -> std::optional<double> {
    if (!args[k].value.isNumber()) {
      error(args[k].range, fmt::format("'{}' needs a number, got {}", n,
                                       args[k].value.typeName()));
      return std::nullopt;
    }
    return args[k].value.getNumber();
  };
  if (n == "param") {
    ir::DType dt = module.activationDType;
    if (args[2].present && !args[2].value.isNone()) {
      dt = ir::parseDType(args[2].value.getString());
      if (dt == ir::DType::Unknown) {
        error(args[2].range,
              fmt::format("unknown dtype '{}'", args[2].value.getString()));
        return EvalValue::poison();
      }
    }
    bool buffer =
        args[3].present && !args[3].value.isNone() && args[3].value.getBool();
    return declareParam(args[0].value.getString(), args[1].value.getList(), dt,
                        range, args[2].present && !args[2].value.isNone(),
                        buffer);
  }
  if (n == "type_of")
    return EvalValue::string(args[0].value.typeName());
  if (n == "len") {
    const EvalValue &v = args[0].value;
    switch (v.getKind()) {
    case EvalValue::Kind::List:
    case EvalValue::Kind::Tuple:
      return EvalValue::integer(static_cast<int64_t>(v.getList().size()));
    case EvalValue::Kind::Dict:
      // The size reads no key's value (an empty rope_scaling is no dict).
      return EvalValue::integer(static_cast<int64_t>(v.getDict().size()));
    case EvalValue::Kind::String:
      return EvalValue::integer(static_cast<int64_t>(v.getString().size()));
    default:
      error(args[0].range, fmt::format("len() of a {}", v.typeName()));
      return EvalValue::poison();
    }
  }
  if (n == "min" || n == "max") {
    auto a = num(0), b = num(1);
    if (!a || !b)
      return EvalValue::poison();
    bool pickA = n == "min" ? *a <= *b : *a >= *b;
    return pickA ? args[0].value : args[1].value;
  }
  if (n == "int") {
    const EvalValue &v = args[0].value;
    if (v.isInt())
      return EvalValue::integer(v.getInt());
    if (v.isNumber()) {
      if (auto r = doubleToInt(v.getNumber()))
        return EvalValue::integer(*r);
      error(args[0].range,
            fmt::format("int({}) does not fit in a 64-bit int", v.getNumber()));
      return EvalValue::poison();
    }
    if (v.getKind() == EvalValue::Kind::Bool)
      return EvalValue::integer(v.getBool());
    if (v.getKind() == EvalValue::Kind::String) {
      try {
        size_t used = 0;
        int64_t r = std::stoll(v.getString(), &used);
        if (used == v.getString().size())
          return EvalValue::integer(r);
      } catch (...) {
      }
    }
    error(args[0].range,
          fmt::format("cannot convert {} '{}' to int", v.typeName(), v.str()));
    return EvalValue::poison();
  }
  if (n == "float") {
    auto a = num(0);
    return a ? EvalValue::floating(*a) : EvalValue::poison();
  }
  if (n == "str")
    return EvalValue::string(args[0].value.str());
  if (n == "get") {
    const EvalValue &d = args[0].value;
    EvalValue dflt = args[2].present ? args[2].value : EvalValue::none();
    if (d.isNone())
      return dflt;
    const EvalValue *entry = d.readDictKey(args[1].value.getString());
    if (!entry || entry->isNone())
      return dflt;
    return *entry;
  }
  if (n == "model_dtype")
    return EvalValue::string(ir::dtypeName(module.activationDType));
  if (n == "set") {
    // A copy of a config.json dict keeps its origin: the keys the code
    // reads from the copy are read from config.json.
    std::map<std::string, EvalValue> entries;
    std::shared_ptr<const ConfigOrigin> origin;
    if (!args[0].value.isNone()) {
      entries = args[0].value.getDict();
      origin = args[0].value.getDictOrigin();
    }
    entries[args[1].value.getString()] = args[2].value;
    return EvalValue::dict(std::move(entries), std::move(origin));
  }
  if (n == "without") {
    if (args[0].value.isNone())
      return EvalValue::none();
    std::map<std::string, EvalValue> entries = args[0].value.getDict();
    for (const EvalValue &k : args[1].value.getList())
      if (k.getKind() == EvalValue::Kind::String)
        entries.erase(k.getString());
    return EvalValue::dict(std::move(entries), args[0].value.getDictOrigin());
  }
  if (n == "sqrt" || n == "log" || n == "exp" || n == "floor" || n == "ceil") {
    auto a = num(0);
    if (!a)
      return EvalValue::poison();
    if ((n == "sqrt" && *a < 0) || (n == "log" && *a <= 0)) {
      error(args[0].range, fmt::format("{}() of {} is undefined", n, *a));
      return EvalValue::poison();
    }
    if (n == "sqrt")
      return EvalValue::floating(std::sqrt(*a));
    if (n == "log")
      return EvalValue::floating(std::log(*a));
    if (n == "exp")
      return EvalValue::floating(std::exp(*a));
    std::optional<int64_t> r =
        doubleToInt(n == "floor" ? std::floor(*a) : std::ceil(*a));
    if (!r) {
      error(args[0].range,
            fmt::format("{}({}) does not fit in a 64-bit int", n, *a));
      return EvalValue::poison();
    }
    return EvalValue::integer(*r);
  }
  if (n == "pow") {
    auto a = num(0), b = num(1);
    if (!a || !b)
      return EvalValue::poison();
    return EvalValue::floating(std::pow(*a, *b));
  }
  error(range, fmt::format("built-in '{}' is not implemented", n));
  return EvalValue::poison();
}

EvalValue Evaluator::archNamespace(const ast::ArchDecl &a,
                                   std::shared_ptr<Env> config) {
  auto scope = std::make_shared<ArchScope>();
  for (const ast::DefDecl *def : a.allDefs)
    scope->defs[def->name] = def;
  scope->config = config;
  std::map<std::string, EvalValue> entries;
  for (auto *env = config.get(); env; env = env->getParent().get())
    for (auto &[name, value] : env->locals())
      entries.emplace(name, value);
  for (const ast::DefDecl *def : a.allDefs) {
    auto fn = std::make_shared<Callable>();
    fn->name = a.name + "." + def->name;
    fn->params = &def->params;
    fn->body = &def->body;
    fn->range = def->nameRange;
    fn->arch = scope;
    entries[def->name] = EvalValue::function(fn);
  }
  return EvalValue::dict(std::move(entries));
}

bool Evaluator::buildModel(const ast::ArchDecl &a,
                           std::shared_ptr<Env> configEnv,
                           const ast::ModelDecl *graph) {
  arch = &a;
  auto scope = std::make_shared<ArchScope>();
  for (const ast::DefDecl *def : a.allDefs)
    scope->defs[def->name] = def;
  scope->config = configEnv;
  current = scope;
  unsigned before = diags.getNumErrors();
  const ast::ModelDecl &model = graph ? *graph : *a.effectiveModel;
  ir::Graph &g = module.graph;
  auto env = std::make_shared<Env>(configEnv);
  for (const ast::ModelInput &in : model.inputs) {
    std::vector<ir::SymExpr> dims;
    for (const auto &d : in.dims) {
      EvalValue v = eval(*d, env);
      if (v.isInt())
        dims.push_back(v.getInt());
      else if (v.getKind() == EvalValue::Kind::Dim)
        dims.push_back(v.getDim());
      else if (!v.isPoison())
        error(d->getRange(),
              fmt::format("input dims must be ints or symbolic dims, got {}",
                          v.typeName()));
    }
    // `float` inputs take the model's activation dtype (pixel values,
    // image features of a vision-language package).
    ir::DType dtype =
        in.dtype == "float" ? module.activationDType : ir::parseDType(in.dtype);
    ir::Value *arg = g.body.addArgument(ir::TensorType(dtype, dims), in.name);
    env->define(in.name, EvalValue::tensor(arg));
  }
  if (diags.getNumErrors() != before)
    return false;
  block = &g.body;
  exec(model.body, env);
  if (diags.getNumErrors() != before)
    return false;
  std::vector<ir::Value *> outs;
  for (const ast::Target &t : model.outputs) {
    EvalValue *v = env->lookup(t.name);
    // An output bound to none is not one of this graph's: a head the
    // configured class does not have (BertModel's logits).
    if (v && v->isNone())
      continue;
    if (!v || !v->isTensor()) {
      error(t.range, fmt::format("model output '{}' must be a tensor, got {}",
                                 t.name, v ? v->typeName() : "nothing"));
      continue;
    }
    outs.push_back(v->getTensor());
    g.outputNames.push_back(t.name);
  }
  if (outs.empty() && diags.getNumErrors() == before)
    error(model.range, "the model has no output (every one is none)");
  createOp(OpKind::Return, outs, model.range, 0);
  return diags.getNumErrors() == before && checkModelSize();
}

} // namespace archc
