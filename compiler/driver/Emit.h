//===- Emit.h - Back ends of the driver -------------------------*- C++ -*-===//
//
// This file declares emit(), which writes the output of the -emit target
// for a compiled module.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_EMIT_H
#define ARCHC_DRIVER_EMIT_H

#include "driver/Compiler.h"

namespace archc {

/// Produces the output for opts.emit. Returns false after reporting errors.
bool emit(const Options &opts, Compilation &c, std::ostream &out);

} // namespace archc

#endif // ARCHC_DRIVER_EMIT_H
