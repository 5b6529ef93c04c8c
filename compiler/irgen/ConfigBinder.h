//===- ConfigBinder.h - Bind config.json to an arch's schema ----*- C++ -*-===//
//
// This file declares bindConfig(): it reads each field the arch's `config`
// block declares from a Hugging Face config.json (looking in `text_config`
// first when present, then at the top level, then under each alias), checks
// its type, fills defaults, evaluates `let` values and runs `check`s.
// Fields the arch does not declare are ignored.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_CONFIG_CONFIGBINDER_H
#define ARCHC_CONFIG_CONFIGBINDER_H

#include "config/JsonSource.h"
#include "frontend/Ast.h"
#include "frontend/Program.h"
#include "irgen/EvalValue.h"

namespace archc {

class Evaluator;

/// Converts a JSON value to a compile-time value. Reports (at `where`) and
/// returns poison for values that do not fit (integers beyond int64, nesting
/// deeper than 64).
EvalValue jsonToValue(const nlohmann::json &j, SourceRange where,
                      DiagnosticEngine &diags, unsigned depth = 0);

/// Binds the config. Returns the environment holding every field and let,
/// or null after reporting errors.
std::shared_ptr<Env> bindConfig(const ast::ArchDecl &arch,
                                const JsonSource &config, Evaluator &eval,
                                DiagnosticEngine &diags);

/// Binds the config of `arch` and of every arch it uses (`use A as N`, found
/// in `program`): each used arch's config is bound to the same config.json
/// (its own fields, text_config first as always), and N becomes a namespace
/// of its config values and defs that the arch's config block and code see.
std::shared_ptr<Env> bindConfig(const ast::ArchDecl &arch,
                                const JsonSource &config, Evaluator &eval,
                                DiagnosticEngine &diags,
                                const Program &program);

} // namespace archc

#endif // ARCHC_CONFIG_CONFIGBINDER_H
