//===- ConfigBinder.h - Bind config.json to an arch's schema ----*- C++ -*-===//
//
// This file declares bindConfig(): it reads each field the arch's `config`
// block declares from a Hugging Face config.json (looking in `text_config`
// first when present, then at the top level, then under each alias), checks
// its type, fills defaults, evaluates `let` values and runs `check`s. The
// keys it reads, and those the arch declares `inert`, are recorded in a
// ConfigUse, so that the driver can refuse every other key by name
// (closed-world binding, config/ConfigUse.h); -emit=config prints the
// fields as bound (BoundField).
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
/// deeper than 64) and for non-finite numbers: NaN anywhere, and an
/// infinity outside a list (a list may hold one as a bound, Mamba-2's
/// `time_step_limit: [0.0, Infinity]`) unless `allowInfinity`. With `use`,
/// objects become dicts whose keys are accounted for in `use` as they are
/// read (`pointer` is the value's JSON pointer).
EvalValue jsonToValue(const nlohmann::json &j, SourceRange where,
                      DiagnosticEngine &diags, unsigned depth = 0,
                      const std::shared_ptr<ConfigUse> &use = nullptr,
                      const std::string &pointer = "",
                      bool allowInfinity = false);

/// One config field (or inert key) as bound, for -emit=config.
struct BoundField {
  enum class Source {
    Config,  ///< read from config.json at `pointer`
    Default, ///< absent: the default declared by arch `declaredBy`
    Inert    ///< in config.json at `pointer`, declared inert
  };
  std::string arch; ///< the arch that binds it (a used arch's own name)
  std::string name;
  EvalValue value;
  Source source = Source::Config;
  std::string pointer;
  std::string declaredBy;
};

/// Where binding records what it read.
struct BindLog {
  /// The config.json keys accounted for (fields read, inert keys).
  std::shared_ptr<ConfigUse> use;
  /// When set, every field and inert key as bound (the first binding of
  /// each arch only: named graphs bind the same config again).
  std::vector<BoundField> *fields = nullptr;
};

/// Binds the config. Returns the environment holding every field and let,
/// or null after reporting errors.
std::shared_ptr<Env> bindConfig(const ast::ArchDecl &arch,
                                const JsonSource &config, Evaluator &eval,
                                DiagnosticEngine &diags,
                                const BindLog &log = {});

/// Binds the config of `arch` and of every arch it uses (`use A as N`, found
/// in `program`): each used arch's config is bound to the same config.json
/// (its own fields, text_config first as always), and N becomes a namespace
/// of its config values and defs that the arch's config block and code see.
std::shared_ptr<Env> bindConfig(const ast::ArchDecl &arch,
                                const JsonSource &config, Evaluator &eval,
                                DiagnosticEngine &diags, const Program &program,
                                const BindLog &log = {});

/// A dotted config path ("rope_parameters.rope_theta") as a JSON pointer
/// under `prefix` ("/text_config" or "").
std::string configPathPointer(const std::string &path,
                              const std::string &prefix = "");

} // namespace archc

#endif // ARCHC_CONFIG_CONFIGBINDER_H
