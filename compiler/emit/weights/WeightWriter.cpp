//===- WeightWriter.cpp - The bytes of each stored weight, written -------===//
//
// This file implements data production and writing. Float output runs over
// fixed-size chunks (1 Mi elements) of the mapped source, and released
// source pages are dropped, so peak memory does not grow with the model.
// Quantized output streams one output row (or a tile of rows of an [in,
// out] matrix) at a time; a tensor's scales and zero points (1/16 of its
// bf16 bytes at block 32) are held until its codes are written. The
// initializers are described in the graph with their data streamed to the
// external data files, or embedded.
//
//===----------------------------------------------------------------------===//
#include "emit/weights/WeightPlan.h"

#include "emit/onnx/OnnxBuilder.h"
#include "emit/weights/WeightElements.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>

namespace archc {

using namespace weights;

bool WeightPlan::storeChecked(uint8_t *out, const float *in, uint64_t n,
                              ir::DType dtype, const std::string &name,
                              uint64_t first, DiagnosticEngine &diags) const {
  uint64_t bad = storeFloats(out, in, n, dtype);
  if (bad == n || allowOverflow)
    return true;
  diags.error(SourceRange(),
              "cannot write weight '{}' as {}: element {} is {:g}, beyond "
              "{}'s largest value {} (--allow-overflow writes it as inf)",
              name, ir::dtypeName(dtype), first + bad, in[bad],
              ir::dtypeName(dtype), largestFinite(dtype));
  return false;
}

bool WeightPlan::quantizeChecked(RowQuantizer &q, const float *row, uint64_t r,
                                 uint8_t *codes, const std::string &name,
                                 DiagnosticEngine &diags) const {
  if (q.quantize(row, r, codes))
    return true;
  if (q.nonFiniteColumn >= 0)
    diags.error(SourceRange(),
                "cannot quantize weight '{}': row {} holds {} at column {}",
                name, r, nonFiniteName(row[q.nonFiniteColumn]),
                q.nonFiniteColumn);
  else
    diags.error(SourceRange(),
                "cannot quantize weight '{}': the scale of row {} block {} "
                "overflows {} (a value beyond the scale dtype's range)",
                name, r, q.overflowBlock, ir::dtypeName(q.scaleType()));
  return false;
}

template <typename Sink>
bool WeightPlan::produceTransposed(const Entry &e, DiagnosticEngine &diags,
                                   WeightStats &stats, Sink &&sink) const {
  // The [rows, cols] tensor in memory (converted or dequantized as a plain
  // tensor is), written as [cols, rows] in chunks of output rows.
  std::vector<uint8_t> whole;
  auto collect = [&whole](const uint8_t *p, uint64_t n, DiagnosticEngine &) {
    whole.insert(whole.end(), p, p + n);
    return true;
  };
  if (!produceTensor(e, diags, stats, collect))
    return false;
  const uint64_t rows = static_cast<uint64_t>(e.shape[0]),
                 cols = static_cast<uint64_t>(e.shape[1]);
  const size_t es = ir::dtypeBits(e.type.dtype) / 8;
  const uint64_t perChunk =
      std::max<uint64_t>(1, rows ? kChunkElems / rows : 1);
  std::vector<uint8_t> out(std::min(cols, perChunk) * rows * es);
  for (uint64_t c0 = 0; c0 < cols; c0 += perChunk) {
    uint64_t n = std::min(perChunk, cols - c0);
    switch (es) {
    case 2:
      transposeBlock<uint16_t>(whole.data(), out.data(), rows, cols, c0, n);
      break;
    case 4:
      transposeBlock<uint32_t>(whole.data(), out.data(), rows, cols, c0, n);
      break;
    case 8:
      transposeBlock<uint64_t>(whole.data(), out.data(), rows, cols, c0, n);
      break;
    default:
      transposeBlock<uint8_t>(whole.data(), out.data(), rows, cols, c0, n);
    }
    // produceTensor counted these bytes when it produced them.
    if (!sink(out.data(), n * rows * es, diags))
      return false;
  }
  return true;
}

bool WeightPlan::produceExpertMatrix(const Entry &stacked, size_t expert,
                                     DiagnosticEngine &diags,
                                     WeightStats &stats,
                                     std::vector<uint8_t> &matrix) const {
  const size_t g = static_cast<size_t>(stacked.interleave);
  std::vector<std::vector<uint8_t>> parts(g);
  for (size_t j = 0; j < g; ++j) {
    std::vector<uint8_t> &whole = parts[j];
    auto collect = [&whole](const uint8_t *p, uint64_t n, DiagnosticEngine &) {
      whole.insert(whole.end(), p, p + n);
      return true;
    };
    if (!produceTensor(memberEntry(stacked, expert * g + j), diags, stats,
                       collect))
      return false;
  }
  if (g == 1) {
    matrix = std::move(parts[0]);
    return true;
  }
  // Row r of member j at row r * G + j.
  const uint64_t rows = static_cast<uint64_t>(memberEntry(stacked, 0).shape[0]);
  const uint64_t rowBytes = rows ? parts[0].size() / rows : 0;
  matrix.clear();
  matrix.reserve(parts[0].size() * g);
  for (uint64_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < g; ++j)
      matrix.insert(matrix.end(), parts[j].begin() + r * rowBytes,
                    parts[j].begin() + (r + 1) * rowBytes);
  return true;
}

template <typename Sink>
bool WeightPlan::produceInterleaved(const Entry &stacked,
                                    DiagnosticEngine &diags, WeightStats &stats,
                                    Sink &&sink) const {
  const size_t experts =
      stacked.members.size() / static_cast<size_t>(stacked.interleave);
  const uint64_t parts = static_cast<uint64_t>(stacked.parts);
  // The block's [rows, cols] (one entry of the stack).
  const uint64_t rows = static_cast<uint64_t>(stacked.shape[1]),
                 cols = static_cast<uint64_t>(stacked.shape[2]);
  const uint64_t es = ir::dtypeBits(stacked.type.dtype) / 8;
  std::vector<uint8_t> matrix;
  for (uint64_t p = 0; p < parts; ++p)
    for (size_t e = 0; e < experts; ++e) {
      // Blocks after the first re-produce the expert: counted once.
      WeightStats again;
      if (!produceExpertMatrix(stacked, e, diags, p ? again : stats, matrix))
        return false;
      if (stacked.partAxis == 0) {
        if (!sink(matrix.data() + p * rows * cols * es, rows * cols * es,
                  diags))
          return false;
        continue;
      }
      // Columns [p * cols, (p + 1) * cols) of every row.
      for (uint64_t r = 0; r < rows; ++r)
        if (!sink(matrix.data() + (r * parts + p) * cols * es, cols * es,
                  diags))
          return false;
    }
  return true;
}

template <typename Sink>
bool WeightPlan::produceExpertBlocks(const Entry &e, DiagnosticEngine &diags,
                                     WeightStats &stats, Sink &&sink) const {
  const ExpertBlocks &l = e.blockLayout;
  const size_t g = e.members.size();
  auto viewDim = [&](size_t i) {
    return static_cast<uint64_t>(e.view.dims[i].getConstant().value_or(0));
  };
  const uint64_t experts = viewDim(0);
  // One source's slice as the view has it ([sr, sc]; a vector's is [C,
  // 1]), then as the block reads it ([mr, mc], transposed or not).
  const uint64_t sr = viewDim(1), sc = e.view.rank() == 3 ? viewDim(2) : 1;
  const uint64_t n = sr * sc;
  const uint64_t mr = l.transposed ? sc : sr, mc = l.transposed ? sr : sc;
  // The expert's matrix: the sources' rows alternating, [g * mr, mc].
  const uint64_t rows = g * mr, cols = mc;
  const uint64_t parts = static_cast<uint64_t>(l.parts);
  const uint64_t pieces = l.firstPartOnly ? 1 : parts;
  const uint64_t bRows = l.axis == 0 ? rows / pieces : rows;
  const uint64_t bCols = l.axis == 1 ? cols / pieces : cols;
  const size_t es = ir::dtypeBits(e.type.dtype) / 8;
  std::vector<Entry> srcs;
  std::vector<std::unique_ptr<FloatSource>> values;
  for (size_t j = 0; j < g; ++j) {
    srcs.push_back(blockSource(e, j));
    values.push_back(valuesOf(srcs.back()));
  }
  std::vector<float> slice(g * n), matrix(rows * cols);
  std::vector<uint8_t> out(bRows * bCols * es);
  for (uint64_t p = 0; p < parts; ++p) {
    for (uint64_t x = 0; x < experts; ++x) {
      if (p > 0 && l.firstPartOnly) {
        std::fill(out.begin(), out.end(), 0);
      } else {
        for (size_t j = 0; j < g; ++j) {
          // Released on every pass: a later pass maps the pages again, so
          // memory holds one expert's slices whatever the stacks' size.
          values[j]->read(x * n, n, slice.data() + j * n);
          values[j]->release(x * n, n);
          if (!values[j]->error.empty()) {
            diags.error(SourceRange(), "cannot read weight '{}': {}",
                        srcs[j].name, values[j]->error);
            return false;
          }
        }
        // Row r of the expert's matrix is row `from` of source j's [mr, mc]
        // (its slice stored [sr, sc]).
        const uint64_t half = rows / 2;
        for (uint64_t r = 0; r < rows; ++r) {
          uint64_t j = g > 1 ? r % g : 0;
          uint64_t from = g > 1                ? r / g
                          : l.interleaveHalves ? (r % 2) * half + r / 2
                                               : r;
          const float *s = slice.data() + j * n;
          for (uint64_t c = 0; c < cols; ++c)
            matrix[r * cols + c] =
                l.transposed ? s[c * mr + from] : s[from * mc + c];
        }
        uint64_t r0 = l.axis == 0 ? p * bRows : 0;
        uint64_t c0 = l.axis == 1 ? p * bCols : 0;
        for (uint64_t r = 0; r < bRows; ++r)
          if (!storeChecked(out.data() + r * bCols * es,
                            matrix.data() + (r0 + r) * cols + c0, bCols,
                            e.type.dtype, e.name, (x * bRows + r) * bCols,
                            diags))
            return false;
      }
      if (!sink(out.data(), out.size(), diags))
        return false;
      stats.bytesWritten += out.size();
    }
    // Later passes re-read the same data: counted once.
    if (p == 0)
      for (const auto &v : values)
        stats.bytesRead += v->bytesRead;
  }
  return true;
}

template <typename Sink>
bool WeightPlan::producePlain(const Entry &e, DiagnosticEngine &diags,
                              WeightStats &stats, Sink &&sink) const {
  if (e.blocks)
    return produceExpertBlocks(e, diags, stats, sink);
  if (e.interleave > 1 || e.parts > 1)
    return produceInterleaved(e, diags, stats, sink);
  if (!e.members.empty()) {
    // A stacked tensor: its members' data one after the other, each
    // streamed in chunks like a tensor of its own (or, for a transposed
    // stack, held in memory while it is transposed).
    for (size_t i = 0; i < e.members.size(); ++i) {
      Entry m = memberEntry(e, i);
      if (!(e.membersTransposed ? produceTransposed(m, diags, stats, sink)
                                : produceTensor(m, diags, stats, sink)))
        return false;
    }
    return true;
  }
  return e.transposed ? produceTransposed(e, diags, stats, sink)
                      : produceTensor(e, diags, stats, sink);
}

template <typename Sink>
bool WeightPlan::produceTensor(const Entry &e, DiagnosticEngine &diags,
                               WeightStats &stats, Sink &&sink) const {
  uint64_t n = numElements(e.shape);
  size_t outSize = ir::dtypeBits(e.type.dtype) / 8;
  std::vector<uint8_t> buf(std::min(n, kChunkElems) * outSize);
  bool wantFloat = ir::isFloat(e.type.dtype);
  const StoredTensor *stored =
      source == WeightSource::Checkpoint && binder
          ? binder->bind(e.name, e.shape, wantFloat, e.inOut)
          : nullptr;
  const StTensor *src = stored && !stored->quantized() ? stored->data : nullptr;
  // Float output from a quantized checkpoint tensor or generated data goes
  // through a FloatSource; same-dtype and integer tensors are copied.
  std::unique_ptr<FloatSource> values;
  std::vector<float> floats;
  if (wantFloat &&
      (!src ||
       !((src->dtype == StDType::F32 && e.type.dtype == ir::DType::F32) ||
         (src->dtype == StDType::F16 && e.type.dtype == ir::DType::F16) ||
         (src->dtype == StDType::BF16 && e.type.dtype == ir::DType::BF16)))) {
    if (stored || source != WeightSource::Checkpoint)
      values = valuesOf(e);
    floats.resize(std::min(n, kChunkElems));
  }
  size_t inSize = src ? stDTypeSize(src->dtype) : 0;
  for (uint64_t start = 0; start < n; start += kChunkElems) {
    uint64_t count = std::min(kChunkElems, n - start);
    uint8_t *out = buf.data();
    if (values) {
      values->read(start, count, floats.data());
      values->release(start, count);
      if (!values->error.empty()) {
        diags.error(SourceRange(), "cannot read weight '{}': {}", e.name,
                    values->error);
        return false;
      }
      if (!storeChecked(out, floats.data(), count, e.type.dtype, e.name, start,
                        diags))
        return false;
    } else if (src) {
      const uint8_t *in = src->data + start * inSize;
      // A same-dtype copy is checked like a converted tensor.
      if (wantFloat)
        if (uint64_t bad = firstNonFinite(in, count, src->dtype); bad < count) {
          diags.error(SourceRange(), "cannot read weight '{}': {}", e.name,
                      describeNonFiniteElement(*src, start + bad));
          return false;
        }
      if (wantFloat ||
          (src->dtype == StDType::I64 && e.type.dtype == ir::DType::I64))
        std::memcpy(out, in, count * outSize);
      else
        for (uint64_t i = 0; i < count; ++i)
          storeInt(out + i * outSize, loadInt(in + i * inSize, src->dtype),
                   e.type.dtype);
      stats.bytesRead += count * inSize;
      ckpt->file(src->file).release(in, count * inSize);
    } else {
      std::memset(out, 0, count * outSize);
    }
    if (!sink(out, count * outSize, diags))
      return false;
    stats.bytesWritten += count * outSize;
  }
  if (values)
    stats.bytesRead += values->bytesRead;
  return true;
}

template <typename Sink>
bool WeightPlan::produceQuantized(const Entry &e, DiagnosticEngine &diags,
                                  WeightStats &stats, Sink &&codesSink,
                                  std::vector<uint8_t> &scales,
                                  std::vector<uint8_t> &zeroPoints) const {
  // A stack made of other tensors (quantizeStack): its float rows as the
  // float stack would be written.
  if (e.blocks || !e.members.empty())
    return quantizeProducedRows(e, diags, stats, codesSink, scales, zeroPoints);
  const ir::QuantLayout &l = e.layout;
  RowQuantizer quantizer(l, e.type, scales, zeroPoints);
  std::unique_ptr<FloatSource> values = valuesOf(e);
  const uint64_t N = static_cast<uint64_t>(l.rows),
                 K = static_cast<uint64_t>(l.cols);
  const uint64_t rowBytes = quantizer.codeBytes();
  // Output rows are quantized in tiles of T rows: rows of an [out, in]
  // matrix are contiguous; an [in, out] matrix is read column tiles.
  uint64_t T = std::max<uint64_t>(1, std::min<uint64_t>(N, kChunkElems / K));
  std::vector<float> tile(T * K), row(K);
  std::vector<uint8_t> codes(T * rowBytes);
  for (int64_t x = 0; x < l.experts; ++x) {
    uint64_t base = static_cast<uint64_t>(x) * N * K;
    for (uint64_t n0 = 0; n0 < N; n0 += T) {
      uint64_t t = std::min(T, N - n0);
      if (e.inOut) {
        for (uint64_t k = 0; k < K; ++k)
          values->read(base + k * N + n0, t, tile.data() + k * t);
      } else {
        values->read(base + n0 * K, t * K, tile.data());
        values->release(base + n0 * K, t * K);
      }
      for (uint64_t i = 0; i < t; ++i) {
        const float *src = tile.data() + i * K;
        if (e.inOut) {
          for (uint64_t k = 0; k < K; ++k)
            row[k] = tile[k * t + i];
          src = row.data();
        }
        if (values->error.empty() &&
            !quantizeChecked(quantizer, src,
                             static_cast<uint64_t>(x) * N + n0 + i,
                             codes.data() + i * rowBytes, e.name, diags))
          return false;
      }
      if (!values->error.empty()) {
        diags.error(SourceRange(), "cannot read weight '{}': {}", e.name,
                    values->error);
        return false;
      }
      uint64_t bytes = t * rowBytes;
      if (!codesSink(codes.data(), bytes, diags))
        return false;
      stats.bytesWritten += bytes;
    }
    if (e.inOut)
      values->release(base, N * K);
  }
  stats.bytesRead += values->bytesRead;
  return true;
}

template <typename Sink>
bool WeightPlan::quantizeProducedRows(const Entry &e, DiagnosticEngine &diags,
                                      WeightStats &stats, Sink &&codesSink,
                                      std::vector<uint8_t> &scales,
                                      std::vector<uint8_t> &zeroPoints) const {
  const ir::QuantLayout &l = e.layout;
  RowQuantizer quantizer(l, e.type, scales, zeroPoints);
  const uint64_t K = static_cast<uint64_t>(l.cols);
  const size_t es = ir::dtypeBits(e.type.dtype) / 8;
  // Bytes arrive in pieces of any size; each complete row is quantized.
  std::vector<uint8_t> pending;
  pending.reserve(K * es);
  std::vector<float> row(K);
  std::vector<uint8_t> codes(quantizer.codeBytes());
  uint64_t r = 0;
  const uint64_t totalRows = static_cast<uint64_t>(l.experts * l.rows);
  auto rows = [&](const uint8_t *p, uint64_t n, DiagnosticEngine &d) {
    while (n > 0) {
      uint64_t take = std::min<uint64_t>(n, K * es - pending.size());
      pending.insert(pending.end(), p, p + take);
      p += take;
      n -= take;
      if (pending.size() < K * es)
        continue;
      if (r >= totalRows) {
        d.error(SourceRange(),
                "weight '{}' produced more rows than its "
                "{} x {} stack",
                e.name, l.experts, l.rows);
        return false;
      }
      for (uint64_t k = 0; k < K; ++k)
        row[k] = loadFloat(pending.data() + k * es, e.type.dtype);
      pending.clear();
      if (!quantizeChecked(quantizer, row.data(), r++, codes.data(), e.name, d))
        return false;
      if (!codesSink(codes.data(), codes.size(), d))
        return false;
    }
    return true;
  };
  // The float bytes the producer counts are not written: its count is
  // replaced by the codes'.
  uint64_t written = stats.bytesWritten;
  if (!producePlain(e, diags, stats, rows))
    return false;
  stats.bytesWritten = written + r * codes.size();
  assert(r == totalRows && pending.empty() && "whole rows of the stack");
  return true;
}

static void describe(onnx::TensorProto *t, const std::string &name,
                     const std::vector<int64_t> &dims, int32_t type) {
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims)
    t->add_dims(d);
}

bool WeightPlan::writeExternal(onnx::GraphProto &graph, ExternalDataWriter &out,
                               DiagnosticEngine &diags,
                               WeightStats &stats) const {
  bool write = source != WeightSource::Layout;
  auto sink = [&](const uint8_t *p, uint64_t n, DiagnosticEngine &d) {
    return out.write(p, n, d);
  };
  // Each region of an entry is placed on its own (aligned, in the chunk
  // that has room for it), so the codes, scales and zero points of one
  // quantized weight may lie in different data files; every view names its
  // region's file.
  struct Placed {
    std::string location;
    uint64_t offset = 0;
  };
  for (const Entry &e : entries) {
    Placed region[4];
    auto place = [&](int r) {
      return out.place(regionBytes(e, r), region[r].location, region[r].offset,
                       diags);
    };
    if (e.plain) {
      if (!place(0) || (write && !producePlain(e, diags, stats, sink)))
        return false;
    }
    if (e.quantized) {
      std::vector<uint8_t> scales, zps;
      // The scales and zero points are known once the codes are written.
      if (!place(1) ||
          (write && !produceQuantized(e, diags, stats, sink, scales, zps)))
        return false;
      if (!place(2) ||
          (write && !out.write(scales.data(), scales.size(), diags)))
        return false;
      stats.bytesWritten += write ? scales.size() : 0;
      if (!e.layout.symmetric) {
        if (!place(3) || (write && !out.write(zps.data(), zps.size(), diags)))
          return false;
        stats.bytesWritten += write ? zps.size() : 0;
      }
    }
    ++stats.tensors;
    for (const View &v : e.views) {
      onnx::TensorProto *t = graph.add_initializer();
      describe(t, v.name, v.dims, v.onnxType);
      t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
      auto add = [&](const std::string &k, const std::string &val) {
        auto *kv = t->add_external_data();
        kv->set_key(k);
        kv->set_value(val);
      };
      add("location", region[v.region].location);
      add("offset", std::to_string(region[v.region].offset + v.offset));
      add("length", std::to_string(v.bytes));
    }
  }
  return out.finish(diags);
}

bool WeightPlan::embed(onnx::GraphProto &graph, DiagnosticEngine &diags,
                       WeightStats &stats, ProgressBar *progress) const {
  for (const Entry &e : entries) {
    std::string region[4];
    auto appendTo = [progress](std::string &s) {
      return [&s, progress](const uint8_t *p, uint64_t n, DiagnosticEngine &) {
        s.append(reinterpret_cast<const char *>(p), n);
        if (progress)
          progress->advance(n);
        return true;
      };
    };
    if (e.plain && !producePlain(e, diags, stats, appendTo(region[0])))
      return false;
    if (e.quantized) {
      std::vector<uint8_t> scales, zps;
      if (!produceQuantized(e, diags, stats, appendTo(region[1]), scales, zps))
        return false;
      region[2].assign(scales.begin(), scales.end());
      region[3].assign(zps.begin(), zps.end());
      if (progress)
        progress->advance(scales.size() + zps.size());
    }
    ++stats.tensors;
    for (const View &v : e.views) {
      onnx::TensorProto *t = graph.add_initializer();
      describe(t, v.name, v.dims, v.onnxType);
      t->set_raw_data(region[v.region].substr(v.offset, v.bytes));
    }
  }
  if (progress)
    progress->finish();
  return true;
}

} // namespace archc
