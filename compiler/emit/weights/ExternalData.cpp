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
  std::string name = modelFile + "_data";
  if (index) {
    name += '_';
    name += std::to_string(index);
  }
  return name;
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

bool ExternalDataWriter::closeFile(size_t i, DiagnosticEngine &diags) {
  StagedFile &f = streams[i];
  if (!f.isOpen())
    return true;
  // The layout's sparse size, or the alignment padding of a last region
  // that was never written.
  if (f.size() < ends[i] && !f.resize(ends[i], diags))
    return false;
  return f.close(diags);
}

bool ExternalDataWriter::openChunk(DiagnosticEngine &diags) {
  if (!names.empty())
    ends.back() = offset;
  std::string name =
      externalDataName(modelFile, static_cast<unsigned>(names.size()));
  std::string rel = (std::filesystem::path(relDir) / name).string();
  names.push_back(name);
  ends.push_back(0);
  offset = 0;
  streams.emplace_back();
  return streams.back().open(set.stage(rel), set.finalPath(rel), diags);
}

bool ExternalDataWriter::place(uint64_t bytes, DataRegion &region,
                               DiagnosticEngine &diags) {
  uint64_t pad = (kAlign - offset % kAlign) % kAlign;
  if (names.empty() || (offset > 0 && offset + pad + bytes > limit)) {
    if (!openChunk(diags))
      return false;
    pad = 0;
  }
  region.file = static_cast<unsigned>(names.size() - 1);
  region.offset = offset + pad;
  region.bytes = bytes;
  offset += pad + bytes;
  ends.back() = offset;
  return true;
}

bool ExternalDataWriter::place(uint64_t bytes, std::string &location,
                               uint64_t &off, DiagnosticEngine &diags) {
  if (!place(bytes, last, diags))
    return false;
  lastFill = 0;
  location = names[last.file];
  off = last.offset;
  return true;
}

bool ExternalDataWriter::write(const uint8_t *data, uint64_t size,
                               DiagnosticEngine &diags) {
  if (!writeAt(last, lastFill, data, size, diags))
    return false;
  lastFill += size;
  return true;
}

bool ExternalDataWriter::writeAt(const DataRegion &region, uint64_t at,
                                 const uint8_t *data, uint64_t size,
                                 DiagnosticEngine &diags) {
  if (!streams[region.file].writeAt(region.offset + at, data, size, diags))
    return false;
  if (progress)
    progress->advance(size);
  return true;
}

bool ExternalDataWriter::copyAt(const DataRegion &region, uint64_t at,
                                int srcFd, uint64_t srcOffset,
                                const uint8_t *data, uint64_t size,
                                DiagnosticEngine &diags) {
  if (!streams[region.file].copyAt(region.offset + at, srcFd, srcOffset, data,
                                   size, diags))
    return false;
  if (progress)
    progress->advance(size);
  return true;
}

bool ExternalDataWriter::settle(DiagnosticEngine &diags) {
  for (size_t i = 0; i + 1 < streams.size(); ++i)
    if (!closeFile(i, diags))
      return false;
  return true;
}

bool ExternalDataWriter::finish(DiagnosticEngine &diags) {
  if (progress)
    progress->finish();
  // A model without initializers has no data file.
  for (size_t i = 0; i < streams.size(); ++i)
    if (!closeFile(i, diags))
      return false;
  return true;
}

} // namespace archc
