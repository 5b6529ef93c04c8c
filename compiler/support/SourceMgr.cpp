//===- SourceMgr.cpp - Source buffers and locations -----------------------===//
//
// This file implements SourceMgr: file loading and offset/line mapping.
//
//===----------------------------------------------------------------------===//
#include "support/SourceMgr.h"

#include "support/FileRead.h"

#include <algorithm>

namespace archc {

uint32_t SourceMgr::addFile(const std::string &path, std::string &error,
                            uint64_t maxBytes) {
  std::string text;
  if (!readRegularFile(path, maxBytes, text, error))
    return 0;
  return addBuffer(path, std::move(text));
}

uint32_t SourceMgr::addBuffer(std::string name, std::string text) {
  auto file = std::make_unique<File>();
  file->name = std::move(name);
  file->text = std::move(text);
  file->lineStarts.push_back(0);
  for (size_t i = 0; i < file->text.size(); ++i)
    if (file->text[i] == '\n')
      file->lineStarts.push_back(i + 1);
  files.push_back(std::move(file));
  return static_cast<uint32_t>(files.size());
}

uint32_t SourceMgr::findFile(const std::string &path) const {
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i]->name == path)
      return static_cast<uint32_t>(i + 1);
  return 0;
}

const SourceMgr::File *SourceMgr::get(uint32_t id) const {
  if (id == 0 || id > files.size())
    return nullptr;
  return files[id - 1].get();
}

const std::string &SourceMgr::getName(uint32_t fileId) const {
  static const std::string unknown = "<unknown>";
  const File *f = get(fileId);
  return f ? f->name : unknown;
}

std::string_view SourceMgr::getText(uint32_t fileId) const {
  const File *f = get(fileId);
  return f ? std::string_view(f->text) : std::string_view();
}

uint32_t SourceMgr::getNumLines(uint32_t fileId) const {
  const File *f = get(fileId);
  return f ? static_cast<uint32_t>(f->lineStarts.size()) : 0;
}

std::string_view SourceMgr::getLine(uint32_t fileId, uint32_t line) const {
  const File *f = get(fileId);
  if (!f || line == 0 || line > f->lineStarts.size())
    return {};
  size_t begin = f->lineStarts[line - 1];
  size_t end =
      line < f->lineStarts.size() ? f->lineStarts[line] - 1 : f->text.size();
  std::string_view text(f->text);
  std::string_view result = text.substr(begin, end - begin);
  if (!result.empty() && result.back() == '\r')
    result.remove_suffix(1);
  return result;
}

SourceLoc SourceMgr::getLoc(uint32_t fileId, size_t offset) const {
  const File *f = get(fileId);
  if (!f)
    return {};
  offset = std::min(offset, f->text.size());
  auto it =
      std::upper_bound(f->lineStarts.begin(), f->lineStarts.end(), offset);
  size_t line = static_cast<size_t>(it - f->lineStarts.begin());
  size_t col = offset - f->lineStarts[line - 1] + 1;
  return {fileId, static_cast<uint32_t>(line), static_cast<uint32_t>(col)};
}

} // namespace archc
