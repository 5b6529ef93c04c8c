//===- Printer.cpp - Deterministic textual IR dump ------------------------===//
//
// This file implements the IR printer.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"

#include "ir/OpSchema.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace archc::ir {

namespace {

std::string quoteString(const std::string &s) { return attrStr(Attr(s)); }

class ModulePrinter {
public:
  ModulePrinter(std::ostream &os, const PrintOptions &opts)
      : os(os), opts(opts) {}

  void printBlockOps(const Block &b, unsigned indent) {
    for (const auto &op : b.getOps())
      printOp(*op, indent);
  }

  void printOp(const Op &op, unsigned indent) {
    std::string pad(indent, ' ');
    std::string line = pad;
    // Results.
    if (op.getNumResults() > 0) {
      unsigned id = next++;
      for (size_t i = 0; i < op.getNumResults(); ++i)
        names[op.getResult(i)] = op.getNumResults() == 1
                                     ? fmt::format("%{}", id)
                                     : fmt::format("%{}#{}", id, i);
      line += op.getNumResults() == 1
                  ? fmt::format("%{} = ", id)
                  : fmt::format("%{}:{} = ", id, op.getNumResults());
    }
    line += op.getMnemonic();
    if (op.getKind() == OpKind::Repeat) {
      line += fmt::format(" %{} in {}..{}", op.attr<std::string>("var"),
                          op.attr<int64_t>("begin"), op.attr<int64_t>("end"));
      if (op.getNumOperands()) {
        line += " carry(";
        const Block &first = *op.getRegions().front();
        for (size_t i = 0; i < op.getNumOperands(); ++i) {
          line += (i ? ", " : "") + argName(first.getArgument(i)) + " = " +
                  name(op.getOperand(i));
        }
        line += ")";
      }
    } else {
      line += operandList(op);
    }
    // Attributes, sorted (std::map order); repeat's own bookkeeping is
    // printed above.
    std::string attrs;
    for (auto &[k, v] : op.getAttrs()) {
      if (op.getKind() == OpKind::Repeat &&
          (k == "var" || k == "begin" || k == "end"))
        continue;
      if ((op.getKind() == OpKind::Param || op.getKind() == OpKind::StateIn ||
           op.getKind() == OpKind::StateOut) &&
          k == "name") {
        line += " " + quoteString(std::get<std::string>(v));
        continue;
      }
      attrs += (attrs.empty() ? "" : ", ") + k + " = " + attrStr(v);
    }
    if (!attrs.empty())
      line += " {" + attrs + "}";
    if (op.getNumResults() > 0) {
      line += " : ";
      for (size_t i = 0; i < op.getNumResults(); ++i)
        line += (i ? ", " : "") + op.getResult(i)->type.str();
    }
    if (opts.printLocations && opts.sourceMgr && op.getLoc().range.isValid()) {
      SourceLoc l = op.getLoc().range.begin;
      line += fmt::format(" loc({}:{}:{})",
                          quoteString(opts.sourceMgr->getName(l.fileId)),
                          l.line, l.col);
    }
    if (op.getRegions().empty()) {
      os << line << "\n";
      return;
    }
    os << line << " {\n";
    for (const auto &region : op.getRegions()) {
      std::string header = pad + "  ";
      if (op.getKind() == OpKind::Repeat) {
        header += "layers " + formatLayers(region->layers);
      } else {
        header += "^body";
      }
      std::string args;
      for (const auto &arg : region->getArguments()) {
        if (op.getKind() == OpKind::Repeat)
          continue; // carried values are shown in carry(...)
        args += (args.empty() ? "" : ", ") + argName(arg.get()) + ": " +
                arg->type.str();
      }
      if (!args.empty())
        header += "(" + args + ")";
      os << header << " {\n";
      printBlockOps(*region, indent + 4);
      os << pad << "  }\n";
    }
    os << pad << "}\n";
  }

  /// Required operands by position; optional and pass-added ones, when
  /// present, by name (`sinks: %3`, `mask: %attention_mask`).
  std::string operandList(const Op &op) {
    const OpSchema &s = opSchema(op.getKind());
    std::string out;
    size_t pos = 0;
    for (size_t k = 0; k < s.operands.size() && pos < op.getNumOperands();
         ++k) {
      const OperandSpec &o = s.operands[k];
      bool named = o.optional || o.origin == Origin::Pass;
      if (named && !(op.getPresentOperands() >> k & 1))
        continue;
      size_t count = o.variadic ? op.getNumOperands() - pos : 1;
      for (size_t j = 0; j < count; ++j, ++pos)
        out += (pos ? ", " : " ") + (named ? o.name + ": " : std::string()) +
               name(op.getOperand(pos));
    }
    return out;
  }

  std::string argName(const Value *v) {
    auto it = names.find(v);
    if (it != names.end())
      return it->second;
    std::string n = "%" + (v->name.empty() ? "arg" : v->name);
    names[v] = n;
    return n;
  }

  std::string name(const Value *v) {
    auto it = names.find(v);
    if (it != names.end())
      return it->second;
    if (v->isBlockArgument())
      return argName(v);
    return "%<undefined>";
  }

  std::ostream &os;
  const PrintOptions &opts;
  std::unordered_map<const Value *, std::string> names;
  unsigned next = 0;
};

/// ", N buffer elements" when some checkpoint tensors are buffers.
std::string bufferNote(const SymExpr &buffers) {
  std::optional<int64_t> n = buffers.getConstant();
  if (n && *n == 0)
    return "";
  return ", " + buffers.str() + " buffer elements";
}

std::string weightIndexSet(const WeightDecl &w) {
  std::vector<std::string> parts;
  if (!w.layers.empty())
    parts.push_back("i in " + formatLayers(w.layers));
  if (w.experts)
    parts.push_back(fmt::format("e in 0..{}", w.experts));
  if (parts.empty())
    return "";
  std::string s = " [";
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i ? ", " : "") + parts[i];
  return s + "]";
}

} // namespace

void printModule(const Module &m, std::ostream &os, const PrintOptions &opts) {
  os << "archc.module @" << m.name << " attributes {";
  os << "config = " << quoteString(m.configFile)
     << ", dtype = " << dtypeName(m.activationDType)
     << ", source = " << quoteString(m.sourceFile) << "} {\n";
  if (opts.printWeights) {
    int64_t tensors = 0;
    SymExpr elements(0), buffers(0);
    for (const WeightDecl &w : m.weights) {
      os << "  weight " << quoteString(w.pattern) << weightIndexSet(w) << " : "
         << w.type.str() << (w.buffer ? " buffer" : "") << "\n";
      tensors += w.count();
      SymExpr &sum = w.buffer ? buffers : elements;
      sum = sum + w.type.numElements() * SymExpr(w.count());
    }
    os << "  // " << tensors << " weight tensors, " << elements.str()
       << " parameters" << bufferNote(buffers) << "\n";
  }
  ModulePrinter p(os, opts);
  const Graph &g = m.graph;
  os << "  graph @forward(";
  bool first = true;
  for (const auto &arg : g.body.getArguments()) {
    os << (first ? "" : ", ") << p.argName(arg.get()) << ": "
       << arg->type.str();
    first = false;
  }
  // `name[0..4]`, `name[3]`, `name[1, 3]`: the layers holding the state.
  auto layerList = [](const std::vector<int64_t> &layers) {
    std::string l = formatLayers(layers);
    return l.front() == '[' ? l : "[" + l + "]";
  };
  for (const StateIO &s : g.stateInputs) {
    os << (first ? "" : ", ") << "%" << s.pattern << layerList(s.layers) << ": "
       << s.type.str();
    first = false;
  }
  os << ") -> (";
  first = true;
  const Op *ret = g.body.getTerminator();
  for (size_t i = 0; i < g.outputNames.size(); ++i) {
    os << (first ? "" : ", ") << g.outputNames[i];
    if (ret && ret->getKind() == OpKind::Return && i < ret->getNumOperands())
      os << ": " << ret->getOperand(i)->type.str();
    first = false;
  }
  for (const StateIO &s : g.stateOutputs) {
    os << (first ? "" : ", ") << s.pattern << layerList(s.layers) << ": "
       << s.type.str();
    first = false;
  }
  os << ") {\n";
  p.printBlockOps(g.body, 4);
  os << "  }\n}\n";
}

std::string printOp(const Op &op) {
  std::ostringstream ss;
  PrintOptions opts;
  ModulePrinter p(ss, opts);
  p.printOp(op, 0);
  return ss.str();
}

void printWeightList(const Module &m, std::ostream &os) {
  // One line per checkpoint tensor, sorted by name as safetensors headers are.
  std::vector<std::pair<std::string, std::string>> lines;
  SymExpr elements(0), buffers(0);
  for (const WeightDecl &w : m.weights) {
    std::vector<int64_t> layers =
        w.layers.empty() ? std::vector<int64_t>{-1} : w.layers;
    std::string shape;
    for (size_t i = 0; i < w.type.dims.size(); ++i)
      shape += (i ? ", " : "") + w.type.dims[i].str();
    std::string rest = " [" + shape + "] " + dtypeName(w.type.dtype);
    for (int64_t l : layers)
      for (int64_t e = 0; e < std::max<int64_t>(w.experts, 1); ++e)
        lines.emplace_back(w.instantiate(l, w.experts ? e : -1), rest);
    SymExpr &sum = w.buffer ? buffers : elements;
    sum = sum + w.type.numElements() * SymExpr(w.count());
  }
  std::sort(lines.begin(), lines.end());
  for (auto &[name, rest] : lines)
    os << name << rest << "\n";
  os << "// " << lines.size() << " tensors, " << elements.str() << " parameters"
     << bufferNote(buffers) << "\n";
}

} // namespace archc::ir
