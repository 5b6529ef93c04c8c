//===- OpReference.cpp - The op reference of docs/ir.md, from the schemas -===//
//
// This file implements printOpReference(): the Markdown op reference that
// docs/ir.md carries between its op-reference markers, generated from the
// schemas (`archc --print-op-reference`). A lit test fails when the two
// differ.
//
//===----------------------------------------------------------------------===//
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
const char *originName(Origin o) {
  switch (o) {
  case Origin::Language:
    return "argument";
  case Origin::Builder:
    return "compiler";
  case Origin::Pass:
    return "pass";
  }
  return "?";
}

std::string escapeCell(const std::string &s) {
  std::string out;
  for (char c : s)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string attrConstraint(const AttrSpec &a) {
  std::string c;
  if (!a.allowed.empty()) {
    for (size_t i = 0; i < a.allowed.size(); ++i)
      c += (i ? ", " : "") + fmt::format("`\"{}\"`", a.allowed[i]);
  }
  if (a.min)
    c += fmt::format("{} {}", a.minExclusive ? ">" : ">=",
                     attrStr(a.type == AttrType::Int
                                 ? Attr(static_cast<int64_t>(*a.min))
                                 : Attr(*a.min)));
  if (a.nonZero)
    c += "!= 0";
  if (a.nonEmpty)
    c += "not empty";
  if (a.type == AttrType::Identifier)
    c += "a plain word";
  return c;
}

std::string attrDefault(const AttrSpec &a) {
  if (a.defaultValue)
    return "`" + escapeCell(attrStr(*a.defaultValue)) + "`";
  return a.optional ? "absent" : "required";
}

std::string signature(const OpSchema &s) {
  std::string sig = fmt::format("op.{}(", s.mnemonic());
  for (size_t i = 0; i < s.signature.size(); ++i) {
    const ArgRef &r = s.signature[i];
    sig += i ? ", " : "";
    if (r.kind == ArgRef::Kind::Operand) {
      const OperandSpec &o = s.operands[r.index];
      sig += o.name + (o.optional ? "?" : "");
    } else if (r.kind == ArgRef::Kind::Attr) {
      const AttrSpec &a = s.attrs[r.index];
      sig += a.name;
      if (a.defaultValue)
        sig += " = " + attrStr(*a.defaultValue);
      else if (a.optional)
        sig += "?";
    } else {
      sig += s.regions[r.index].name;
    }
  }
  return sig + ")";
}

void printTable(std::ostream &os, const OpSchema &s) {
  os << "| name | kind | from | type | default | allowed | meaning |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (const OperandSpec &o : s.operands)
    os << fmt::format(
        "| `{}` | operand | {} | {} | {} | {} | {} |\n", o.name,
        originName(o.origin), o.variadic ? "list of tensors" : "tensor",
        o.optional || o.origin == Origin::Pass ? "absent" : "required",
        o.needs.empty() ? "" : "needs `" + o.needs + "`",
        escapeCell(o.summary));
  for (const AttrSpec &a : s.attrs)
    os << fmt::format("| `{}` | attribute | {} | {} | {} | {} | {} |\n", a.name,
                      originName(a.origin), attrTypeName(a.type),
                      attrDefault(a), attrConstraint(a), escapeCell(a.summary));
  for (const RegionSpec &r : s.regions)
    os << fmt::format("| `{}` | region | {} | {} | required | | {} |\n", r.name,
                      r.repeated ? "compiler" : "argument",
                      r.blockArgs.empty()
                          ? std::string("block")
                          : fmt::format("fn({})",
                                        [&] {
                                          std::string p;
                                          for (const std::string &b :
                                               r.blockArgs)
                                            p += (p.empty() ? "" : ", ") + b;
                                          for (const std::string &b : r.indices)
                                            p += (p.empty() ? "" : ", ") + b;
                                          return p;
                                        }()),
                      escapeCell(r.summary));
  for (const ResultSpec &r : s.results)
    os << fmt::format(
        "| `{}` | result | {} | {} | | | {} |\n", r.name, originName(r.origin),
        r.perOperand              ? "one per operand"
        : !r.variadicFrom.empty() ? "one per `" + r.variadicFrom + "`"
                                  : "tensor",
        escapeCell(r.summary));
}
} // namespace

void printOpReference(std::ostream &os) {
  os << "Generated from the op schemas (`archc --print-op-reference`); "
        "`lit/docs/op_reference.test` fails when this section and the "
        "schemas differ. \"from\": `argument` of `op.<name>(...)` in "
        "`.arch`, set by the `compiler`, or added by a `pass`.\n";
  for (bool language : {true, false}) {
    os << (language ? "\n### Ops of the language (`op.*`)\n"
                    : "\n### Ops the compiler creates\n");
    for (const OpSchema &s : allOpSchemas()) {
      if (s.inLanguage != language)
        continue;
      os << fmt::format("\n#### `{}`\n\n",
                        language ? signature(s) : std::string(s.mnemonic()));
      os << s.summary << ".";
      if (!s.description.empty())
        os << " " << s.description;
      if (s.perLayerState)
        os << " Only inside a layer loop (its state is per layer).";
      if (s.notInExpertBody)
        os << " Not inside an expert body.";
      os << "\n\n";
      printTable(os, s);
    }
  }
}

} // namespace archc::ir
