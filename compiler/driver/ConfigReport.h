//===- ConfigReport.h - -emit=config ----------------------------*- C++ -*-===//
//
// This file declares the -emit=config output: every config field of the
// family (and of the archs it uses) with its bound value and where the value
// came from, and the inert keys the config carries, so a user can see what
// archc understood of a config.json.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_CONFIGREPORT_H
#define ARCHC_DRIVER_CONFIGREPORT_H

#include "driver/Compiler.h"

#include <ostream>

namespace archc {

/// Prints c.boundFields as a table, or as JSON with `format` "json".
void printBoundConfig(const Compilation &c, const std::string &format,
                      std::ostream &out);

/// Prints the config schema of c.arch (-emit=config without a config): its
/// claims, every field with its type, default (source text) and declaring
/// arch, the inert keys (its own, its bases' and those of the archs it
/// uses) and the checks that refuse values, as a table or as JSON. The
/// family table of docs/families.md is generated from the JSON.
void printConfigSchema(const Compilation &c, const std::string &format,
                       std::ostream &out);

} // namespace archc

#endif // ARCHC_DRIVER_CONFIGREPORT_H
