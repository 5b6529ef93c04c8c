//===- ConfigClosure.h - Closed-world config binding ------------*- C++ -*-===//
//
// This file declares the driver's checks that make config binding
// closed-world (docs/language.md, "Config schema"): the config's
// `model_type` and `architectures[0]` must be ones the arch claims, and
// every config.json key must be read by a field of the family, declared
// inert by it, or consumed by the driver (the checkpoint's
// quantization_config). Anything else is refused by name, since a key the
// family does not honour would otherwise be a silently different model.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_CONFIGCLOSURE_H
#define ARCHC_DRIVER_CONFIGCLOSURE_H

#include "config/ConfigUse.h"
#include "config/JsonSource.h"
#include "driver/Options.h"
#include "frontend/Ast.h"

namespace archc {

/// Checks that the config's model_type and architectures[0] are claimed by
/// `arch` (errors, or warnings with --arch-override) and accounts for the
/// keys the driver reads itself. Returns false after reporting errors.
bool checkConfigClaims(const ast::ArchDecl &arch, const JsonSource &config,
                       const Options &opts, ConfigUse &use,
                       DiagnosticEngine &diags);

/// Reports every config.json key `use` does not account for: errors, or
/// warnings with --allow-unknown-config. Returns false after errors.
bool checkConfigUsed(const ast::ArchDecl &arch, const JsonSource &config,
                     const Options &opts, const ConfigUse &use,
                     DiagnosticEngine &diags);

} // namespace archc

#endif // ARCHC_DRIVER_CONFIGCLOSURE_H
