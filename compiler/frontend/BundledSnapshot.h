//===- BundledSnapshot.h - The AST snapshot archc was built with -*- C++
//-*-===//
//
// This file declares where archc finds the AST snapshot of its bundled
// .arch files (AstSnapshot.h): the file the build writes beside the
// executable, or the one the ARCHC_AST_SNAPSHOT environment variable names
// ("off" or empty: none). It is read once per process.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_BUNDLEDSNAPSHOT_H
#define ARCHC_FRONTEND_BUNDLEDSNAPSHOT_H

#include "frontend/AstSnapshot.h"

#include <string>

namespace archc {

/// The snapshot's file name beside the executable.
constexpr const char *kAstSnapshotFileName = "archs.ast-snapshot";

/// The snapshot file to read: ARCHC_AST_SNAPSHOT when set, else
/// kAstSnapshotFileName beside the running executable. Empty when
/// ARCHC_AST_SNAPSHOT is empty, "off", "none" or "0".
std::string bundledAstSnapshotPath();

/// The bundled snapshot, read at the first call; null when there is none
/// or it cannot be used (missing, unreadable, corrupt, from another build
/// of archc). `status` (optional) receives a line saying which, for
/// --trace-ast-snapshot.
const AstSnapshot *bundledAstSnapshot(std::string *status = nullptr);

} // namespace archc

#endif // ARCHC_FRONTEND_BUNDLEDSNAPSHOT_H
