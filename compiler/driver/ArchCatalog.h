//===- ArchCatalog.h - Bundled families: listing and suggestions -*- C++
//-*-===//
//
// This file declares `archc --list-archs` and the "did you mean" list of
// errors that name an unknown architecture.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_ARCHCATALOG_H
#define ARCHC_DRIVER_ARCHCATALOG_H

#include <ostream>
#include <string>
#include <vector>

namespace archc {

/// Prints each bundled family: its name, its file and the Hugging Face
/// `architectures` it matches.
void printBundledArchs(std::ostream &out);

/// Up to `limit` names of `candidates` closest to `name` (case-insensitive
/// edit distance, closest first; names sharing the model prefix of `name`,
/// such as "Llama" of "LlamaForSequenceClassification", rank first). Names
/// too far away to be a plausible typo are left out.
std::vector<std::string>
closestNames(const std::string &name,
             const std::vector<std::string> &candidates, size_t limit = 3);

} // namespace archc

#endif // ARCHC_DRIVER_ARCHCATALOG_H
