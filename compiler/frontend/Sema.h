//===- Sema.h - Static checks of .arch programs -----------------*- C++ -*-===//
//
// This file declares runSema(), the checks that need no config values: name
// resolution (with "did you mean" notes), call arity and named arguments for
// defs and built-ins, known type names, `{name}` placeholders in scope
// strings, duplicate declarations, and statement placement rules. All errors
// of a run are reported, not just the first.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_SEMA_H
#define ARCHC_FRONTEND_SEMA_H

#include "frontend/Program.h"

namespace archc {

/// Checks every file of `program` and the selected arch (if any). Returns false
/// when errors were reported.
bool runSema(const Program &program, const ast::ArchDecl *arch,
             DiagnosticEngine &diags);

/// Language type names usable in config fields and def parameters.
bool isKnownTypeName(const std::string &name);

/// Extracts `{name}` placeholders from a scope or message string, with the
/// byte offset of each `{`.
std::vector<std::pair<std::string, size_t>>
findPlaceholders(const std::string &text);

} // namespace archc

#endif // ARCHC_FRONTEND_SEMA_H
