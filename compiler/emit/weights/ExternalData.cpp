//===- ExternalData.cpp - The external data files of one model ------------===//
//
// This file implements ExternalDataWriter and the data file names.
//
//===----------------------------------------------------------------------===//
#include "emit/weights/ExternalData.h"

#include <filesystem>

namespace archc {

namespace {
constexpr uint64_t kAlign = 64;
} // namespace

std::string externalDataName(const std::string &modelFile, unsigned index) {
  return modelFile + "_data" + (index ? "_" + std::to_string(index) : "");
}

bool isExternalDataOf(const std::string &modelFile, const std::string &name) {
  if (name == modelFile + ".data" || name == modelFile + "_data")
    return true;
  std::string prefix = modelFile + "_data_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix))
    return false;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9')
      return false;
  return true;
}

ExternalDataWriter::ExternalDataWriter(OutputSet &set, std::string relDir,
                                       std::string modelFile,
                                       uint64_t chunkLimit, bool layoutOnly,
                                       ProgressBar *progress)
    : set(set), relDir(std::move(relDir)), modelFile(std::move(modelFile)),
      limit(chunkLimit ? chunkLimit : kDefaultDataChunkBytes),
      layout(layoutOnly), progress(progress) {}

bool ExternalDataWriter::openChunk(DiagnosticEngine &diags) {
  if (!names.empty()) {
    ends.push_back(offset);
    if (layout && !current.resize(offset, diags))
      return false;
    if (!current.close(diags))
      return false;
  }
  std::string name =
      externalDataName(modelFile, static_cast<unsigned>(names.size()));
  std::string rel = (std::filesystem::path(relDir) / name).string();
  names.push_back(name);
  offset = 0;
  return current.open(set.stage(rel), set.finalPath(rel), diags);
}

bool ExternalDataWriter::place(uint64_t bytes, std::string &location,
                               uint64_t &off, DiagnosticEngine &diags) {
  uint64_t pad = (kAlign - offset % kAlign) % kAlign;
  if (names.empty() || (offset > 0 && offset + pad + bytes > limit)) {
    if (!openChunk(diags))
      return false;
    pad = 0;
  }
  if (pad && !layout) {
    static const uint8_t zeros[kAlign] = {};
    if (!current.write(zeros, pad, diags))
      return false;
  }
  offset += pad;
  location = names.back();
  off = offset;
  offset += bytes;
  return true;
}

bool ExternalDataWriter::write(const uint8_t *data, uint64_t size,
                               DiagnosticEngine &diags) {
  if (!current.write(data, size, diags))
    return false;
  if (progress)
    progress->advance(size);
  return true;
}

bool ExternalDataWriter::finish(DiagnosticEngine &diags) {
  if (names.empty()) { // a model without initializers has no data file
    if (progress)
      progress->finish();
    return true;
  }
  ends.push_back(offset);
  if (layout && !current.resize(offset, diags))
    return false;
  if (progress)
    progress->finish();
  return current.close(diags);
}

} // namespace archc
