//===- WeightStreams.cpp - Float weight data in bounded buffers -----------===//
//
// This file implements the producers of float weight data: one tensor in
// chunks, a matrix transposed, an interleaved or part-major stack of expert
// matrices, and expert blocks cut from checkpoint stacks. Each reads its
// sources in ranges, releases their mapped pages once consumed, and holds
// at most a chunk of kChunkElems elements and one tile of tileBytes(), so
// peak memory does not grow with the size of a tensor.
//
// A transpose of [rows, cols] into [cols, rows] gathers a tile of T output
// rows (T source columns) from bands of source rows and appends it. When T
// would make the strided reads short (a tall matrix such as an untied
// lm_head, [vocab, hidden], whose output rows are long) and the sink writes
// at offsets, it reads bands of L whole source rows instead, transposes each
// into a [cols, L] tile and writes its `cols` pieces of L elements at their
// places in the placed tensor: sequential reads, writes of tileBytes() /
// cols bytes each, the same bytes either way.
//
//===----------------------------------------------------------------------===//
#include "emit/weights/RegionSink.h"
#include "emit/weights/WeightElements.h"
#include "emit/weights/WeightPlan.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace archc {

using namespace weights;

namespace {
/// Strided reads of a transpose shorter than this (in source bytes) make
/// it read whole rows and write pieces at offsets instead, where it can.
constexpr double kShortStridedRead = 2048;
} // namespace

/// One tensor's elements in its stored dtype: copied (same dtype, integers
/// converted), converted through floats (other dtypes, quantized
/// checkpoint formats, generated data), or zeros.
struct WeightPlan::Elements {
  Elements(const WeightPlan &plan, const Entry &e)
      : plan(plan), name(e.name), dtype(e.type.dtype),
        es(ir::dtypeBits(e.type.dtype) / 8), wantFloat(ir::isFloat(dtype)) {
    const StoredTensor *stored =
        plan.source == WeightSource::Checkpoint && plan.binder
            ? plan.binder->bind(e.name, e.shape, wantFloat, e.inOut)
            : nullptr;
    src = stored && !stored->quantized() ? stored->data : nullptr;
    inSize = src ? stDTypeSize(src->dtype) : 0;
    if (wantFloat &&
        (!src || !((src->dtype == StDType::F32 && dtype == ir::DType::F32) ||
                   (src->dtype == StDType::F16 && dtype == ir::DType::F16) ||
                   (src->dtype == StDType::BF16 && dtype == ir::DType::BF16))))
      if (stored || plan.source != WeightSource::Checkpoint)
        values = plan.valuesOf(e);
    uint64_t n = numElements(e.shape);
    if (stored && n)
      sourceBytes =
          static_cast<double>(stored->data->size) / static_cast<double>(n);
  }

  /// Elements [start, start + count) into `out` (count * es bytes).
  bool read(uint64_t start, uint64_t count, uint8_t *out,
            DiagnosticEngine &diags) {
    if (values) {
      float *floats = plan.scratch->floats(0, std::min(count, kChunkElems));
      for (uint64_t done = 0; done < count;) {
        uint64_t k = std::min(count - done, kChunkElems);
        values->read(start + done, k, floats);
        if (!values->error.empty()) {
          diags.error(SourceRange(), "cannot read weight '{}': {}", name,
                      values->error);
          return false;
        }
        // A value beyond the stored dtype's range is an error unless
        // --allow-overflow.
        if (!plan.storeChecked(out + done * es, floats, k, dtype, name,
                               start + done, diags))
          return false;
        done += k;
      }
    } else if (src) {
      const uint8_t *in = src->data + start * inSize;
      if (wantFloat && !checkCopied(in, start, count, diags))
        return false;
      if (wantFloat || (src->dtype == StDType::I64 && dtype == ir::DType::I64))
        std::memcpy(out, in, count * es);
      else
        for (uint64_t i = 0; i < count; ++i)
          storeInt(out + i * es, loadInt(in + i * inSize, src->dtype), dtype);
      raw += count * inSize;
    } else {
      std::memset(out, 0, count * es);
    }
    return true;
  }

  /// Whether read() copies the mapped bytes as they are (direct()).
  bool copies() const {
    return !values && src &&
           (wantFloat ||
            (src->dtype == StDType::I64 && dtype == ir::DType::I64));
  }
  /// The mapped bytes of element `start` (copies() only).
  const uint8_t *direct(uint64_t start) const {
    return src->data + start * inSize;
  }

  /// A same-dtype copy is checked like a converted tensor: a NaN or Inf
  /// among the `count` mapped elements from `start` is an error naming the
  /// weight and the element.
  bool checkCopied(const uint8_t *in, uint64_t start, uint64_t count,
                   DiagnosticEngine &diags) const {
    uint64_t bad = firstNonFinite(in, count, src->dtype);
    if (bad == count)
      return true;
    diags.error(SourceRange(), "cannot read weight '{}': {}", name,
                describeNonFiniteElement(*src, start + bad));
    return false;
  }

  /// The source pages behind [start, start + count) are not needed now.
  void release(uint64_t start, uint64_t count) {
    if (values)
      values->release(start, count);
    else if (src)
      plan.ckpt->file(src->file).release(src->data + start * inSize,
                                         count * inSize);
  }

  /// Checkpoint bytes read so far.
  uint64_t bytesRead() const { return raw + (values ? values->bytesRead : 0); }

  const WeightPlan &plan;
  std::string name;
  ir::DType dtype;
  size_t es;
  bool wantFloat;
  const StTensor *src = nullptr;
  size_t inSize = 0;
  std::unique_ptr<FloatSource> values;
  uint64_t raw = 0;
  /// Checkpoint bytes per element (0: generated data, nothing mapped).
  double sourceBytes = 0;
};

bool WeightPlan::produceTensor(const Entry &e, DiagnosticEngine &diags,
                               WeightStats &stats, RegionSink &sink) const {
  Elements el(*this, e);
  const uint64_t n = numElements(e.shape);
  uint8_t *buf = el.copies()
                     ? nullptr
                     : scratch->bytes(1, std::min(n, kChunkElems) * el.es);
  for (uint64_t start = 0; start < n; start += kChunkElems) {
    uint64_t count = std::min(kChunkElems, n - start);
    // The checkpoint's own bytes go from the mapping to the sink.
    if (el.copies()) {
      el.raw += count * el.inSize;
      const MappedFile &file = ckpt->file(el.src->file);
      const uint8_t *p = el.direct(start);
      if (el.wantFloat && !el.checkCopied(p, start, count, diags))
        return false;
      if (!sink.appendCopy(p, count * el.es, file.descriptor(),
                           static_cast<uint64_t>(p - file.data()), diags))
        return false;
      el.release(start, count);
      continue;
    }
    if (!el.read(start, count, buf, diags))
      return false;
    el.release(start, count);
    if (!sink.append(buf, count * el.es, diags))
      return false;
  }
  stats.bytesRead += el.bytesRead();
  return true;
}

namespace {

/// A transpose in tiles of output rows: T source columns at a time, each
/// gathered from bands of source rows (released after each band: a later
/// tile maps their pages again) and appended.
template <typename Elements>
bool transposeByColumns(Elements &el, uint64_t rows, uint64_t cols,
                        uint64_t tileBytes, Scratch &scratch, RegionSink &sink,
                        DiagnosticEngine &diags) {
  const size_t es = el.es;
  const uint64_t T = std::clamp<uint64_t>(tileBytes / (rows * es), 1, cols);
  const uint64_t band = std::clamp<uint64_t>(kChunkElems / T, 1, rows);
  // Both buffers' rows padded (paddedStride).
  const uint64_t ts = paddedStride(rows, es), bs = paddedStride(T, es);
  uint8_t *tile = scratch.bytes(0, T * ts * es),
          *buf = scratch.bytes(1, band * bs * es);
  for (uint64_t c0 = 0; c0 < cols; c0 += T) {
    const uint64_t t = std::min(T, cols - c0);
    for (uint64_t k0 = 0; k0 < rows; k0 += band) {
      const uint64_t n = std::min(band, rows - k0);
      for (uint64_t k = 0; k < n; ++k)
        if (!el.read((k0 + k) * cols + c0, t, buf + k * bs * es, diags))
          return false;
      transposeTile(buf, bs, tile + k0 * es, ts, n, t, es);
      el.release(k0 * cols, n * cols);
    }
    for (uint64_t c = 0; c < t; ++c)
      if (!sink.append(tile + c * ts * es, rows * es, diags))
        return false;
  }
  return true;
}

/// A transpose in bands of L whole source rows, each written as `cols`
/// pieces of L elements at their offsets (a sink that writes at offsets).
template <typename Elements>
bool transposeByRows(Elements &el, uint64_t rows, uint64_t cols,
                     uint64_t tileBytes, Scratch &scratch, RegionSink &sink,
                     DiagnosticEngine &diags) {
  const size_t es = el.es;
  const uint64_t L = std::clamp<uint64_t>(tileBytes / (cols * es), 1, rows);
  const uint64_t chunk = std::clamp<uint64_t>(kChunkElems / cols, 1, L);
  const uint64_t ts = paddedStride(L, es), bs = paddedStride(cols, es);
  uint8_t *tile = scratch.bytes(0, cols * ts * es),
          *buf = scratch.bytes(1, chunk * bs * es);
  // Bytes appended before this tensor are written first.
  if (!sink.flush(diags))
    return false;
  const uint64_t base = sink.cursor();
  for (uint64_t r0 = 0; r0 < rows; r0 += L) {
    const uint64_t l = std::min(L, rows - r0);
    for (uint64_t k0 = r0; k0 < r0 + l; k0 += chunk) {
      const uint64_t n = std::min(chunk, r0 + l - k0);
      for (uint64_t k = 0; k < n; ++k)
        if (!el.read((k0 + k) * cols, cols, buf + k * bs * es, diags))
          return false;
      el.release(k0 * cols, n * cols);
      transposeTile(buf, bs, tile + (k0 - r0) * es, ts, n, cols, es);
    }
    for (uint64_t c = 0; c < cols; ++c)
      if (!sink.writeAt(base + (c * rows + r0) * es, tile + c * ts * es, l * es,
                        diags))
        return false;
  }
  sink.skip(rows * cols * es);
  return true;
}

} // namespace

bool WeightPlan::produceTransposed(const Entry &e, DiagnosticEngine &diags,
                                   WeightStats &stats, RegionSink &sink) const {
  const uint64_t rows = static_cast<uint64_t>(e.shape[0]),
                 cols = static_cast<uint64_t>(e.shape[1]);
  if (rows == 0 || cols == 0)
    return true;
  Elements el(*this, e);
  const uint64_t es = el.es;
  // Output rows per tile, and the bytes each strided read spans.
  const uint64_t T = std::clamp<uint64_t>(tile / (rows * es), 1, cols);
  const double strided = static_cast<double>(T) * el.sourceBytes;
  const uint64_t L = std::clamp<uint64_t>(tile / (cols * es), 1, rows);
  bool byRows = T < cols && sink.positional() && el.sourceBytes > 0 &&
                strided < kShortStridedRead && L > T;
  if (!(byRows
            ? transposeByRows(el, rows, cols, tile, *scratch, sink, diags)
            : transposeByColumns(el, rows, cols, tile, *scratch, sink, diags)))
    return false;
  stats.bytesRead += el.bytesRead();
  return true;
}

bool WeightPlan::produceInterleaved(const Entry &stacked,
                                    DiagnosticEngine &diags, WeightStats &stats,
                                    RegionSink &sink) const {
  const uint64_t g = static_cast<uint64_t>(stacked.interleave);
  const size_t experts = stacked.members.size() / g;
  const uint64_t parts = static_cast<uint64_t>(stacked.parts);
  // The block's [rows, cols] (one entry of the stack), and the members'.
  const uint64_t rows = static_cast<uint64_t>(stacked.shape[1]),
                 cols = static_cast<uint64_t>(stacked.shape[2]);
  const Entry first = memberEntry(stacked, 0);
  const uint64_t memberCols = static_cast<uint64_t>(first.shape[1]);
  const size_t es = ir::dtypeBits(stacked.type.dtype) / 8;
  const uint64_t band =
      std::clamp<uint64_t>(kChunkElems / std::max<uint64_t>(cols, 1), 1,
                           std::max<uint64_t>(rows, 1));
  uint8_t *buf = scratch->bytes(1, band * cols * es);
  for (uint64_t p = 0; p < parts; ++p)
    for (size_t x = 0; x < experts; ++x) {
      std::vector<Entry> members;
      std::vector<std::unique_ptr<Elements>> el;
      for (uint64_t j = 0; j < g; ++j)
        members.push_back(memberEntry(stacked, x * g + j));
      for (uint64_t j = 0; j < g; ++j)
        el.push_back(std::make_unique<Elements>(*this, members[j]));
      // Row R of the expert's matrix is row R / G of member R % G; the
      // block takes rows [r0, r0 + rows) and columns [c0, c0 + cols).
      const uint64_t r0 = stacked.partAxis == 0 ? p * rows : 0;
      const uint64_t c0 = stacked.partAxis == 1 ? p * cols : 0;
      for (uint64_t b0 = 0; b0 < rows; b0 += band) {
        const uint64_t n = std::min(band, rows - b0);
        for (uint64_t i = 0; i < n; ++i) {
          uint64_t R = r0 + b0 + i;
          if (!el[R % g]->read((R / g) * memberCols + c0, cols,
                               buf + i * cols * es, diags))
            return false;
        }
        // Blocks of columns read a row again for each part.
        uint64_t lo = (r0 + b0) / g, hi = (r0 + b0 + n - 1) / g;
        for (uint64_t j = 0; j < g; ++j)
          el[j]->release(lo * memberCols, (hi - lo + 1) * memberCols);
        if (!sink.append(buf, n * cols * es, diags))
          return false;
      }
      // Blocks after the first read the expert again: counted once.
      if (p == 0)
        for (const auto &m : el)
          stats.bytesRead += m->bytesRead();
    }
  return true;
}

namespace {

/// Consecutive rows of an expert's matrix that come from consecutive lines
/// (rows, or columns when transposed) of one source: rows out, out +
/// stride, ... are lines from, from + 1, ... of source j.
struct LineRun {
  uint64_t j, from, count, out, stride;
};

/// The runs of matrix rows [a, b): G sources alternating (row r is line r /
/// G of source r % G), two halves alternating (row 2r is line r, row 2r +
/// 1 line H + r), or one source in order.
std::vector<LineRun> lineRuns(uint64_t a, uint64_t b, uint64_t g, bool halves,
                              uint64_t half) {
  std::vector<LineRun> runs;
  auto add = [&](uint64_t j, uint64_t first, uint64_t stride, uint64_t fromOf) {
    if (first < b)
      runs.push_back({j, fromOf, (b - 1 - first) / stride + 1, first, stride});
  };
  if (g > 1) {
    for (uint64_t j = 0; j < g; ++j) {
      uint64_t first = a + (j + g - a % g) % g;
      add(j, first, g, first / g);
    }
  } else if (halves) {
    uint64_t even = a + a % 2, odd = a + 1 - a % 2;
    add(0, even, 2, even / 2);
    add(0, odd, 2, half + odd / 2);
  } else {
    add(0, a, 1, a);
  }
  return runs;
}

} // namespace

bool WeightPlan::produceExpertBlocks(const Entry &e, DiagnosticEngine &diags,
                                     WeightStats &stats,
                                     RegionSink &sink) const {
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
  // The rows of the slice taken (all, or a range of them: MLA's U_K and
  // U_V of kv_b_proj).
  const uint64_t ur = l.rowCount > 0 ? static_cast<uint64_t>(l.rowCount) : sr;
  const uint64_t first = static_cast<uint64_t>(l.firstRow) * sc;
  const uint64_t mr = l.transposed ? sc : ur, mc = l.transposed ? ur : sc;
  // The expert's matrix: the sources' rows alternating, [g * mr, mc].
  const uint64_t rows = g * mr, cols = mc;
  const uint64_t parts = static_cast<uint64_t>(l.parts);
  const uint64_t pieces = l.firstPartOnly ? 1 : parts;
  const uint64_t bRows = l.axis == 0 ? rows / pieces : rows;
  const uint64_t bCols = l.axis == 1 ? cols / pieces : cols;
  const size_t es = ir::dtypeBits(e.type.dtype) / 8;
  if (bRows == 0 || bCols == 0)
    return true;
  std::vector<Entry> srcs;
  std::vector<std::unique_ptr<FloatSource>> values;
  for (size_t j = 0; j < g; ++j) {
    srcs.push_back(blockSource(e, j));
    values.push_back(valuesOf(srcs.back()));
  }
  auto failed = [&](size_t j) {
    if (values[j]->error.empty())
      return false;
    diags.error(SourceRange(), "cannot read weight '{}': {}", srcs[j].name,
                values[j]->error);
    return true;
  };
  // A tile of T rows of the block. Untransposed, each row is a run of one
  // source row; transposed, a tile reads the block's bCols source rows
  // (its columns) a group at a time, each the runs' spans of columns.
  const uint64_t T = l.transposed
                         ? std::clamp<uint64_t>(tile / (bCols * es), 1, bRows)
                         : std::clamp<uint64_t>(kChunkElems / bCols, 1, bRows);
  const uint64_t group = std::clamp<uint64_t>(kChunkElems / T, 1, bCols);
  const uint64_t outBytes = T * bCols * es;
  uint8_t *out = scratch->bytes(0, outBytes);
  float *floats = scratch->floats(1, l.transposed ? group * T : bCols);
  const uint64_t half = rows / 2;
  for (uint64_t p = 0; p < parts; ++p) {
    for (uint64_t x = 0; x < experts; ++x) {
      if (p > 0 && l.firstPartOnly) {
        std::memset(out, 0, outBytes);
        for (uint64_t done = 0; done < bRows; done += T)
          if (!sink.append(out, std::min(T, bRows - done) * bCols * es, diags))
            return false;
        continue;
      }
      const uint64_t r0 = l.axis == 0 ? p * bRows : 0;
      const uint64_t c0 = l.axis == 1 ? p * bCols : 0;
      const uint64_t base = x * n + first;
      for (uint64_t a = r0; a < r0 + bRows; a += T) {
        const uint64_t b = std::min(a + T, r0 + bRows);
        std::vector<LineRun> runs =
            lineRuns(a, b, g, g == 1 && l.interleaveHalves, half);
        if (!l.transposed) {
          // Row `from` of source j's [mr, mc], columns [c0, c0 + bCols).
          for (const LineRun &run : runs) {
            for (uint64_t i = 0; i < run.count; ++i) {
              values[run.j]->read(base + (run.from + i) * mc + c0, bCols,
                                  floats);
              uint64_t r = run.out + i * run.stride - a;
              if (!values[run.j]->error.empty())
                break; // reported below, by name
              if (!storeChecked(out + r * bCols * es, floats, bCols,
                                e.type.dtype, e.name,
                                (x * bRows + a - r0 + r) * bCols, diags))
                return false;
            }
            values[run.j]->release(base + run.from * mc, run.count * mc);
            if (failed(run.j))
              return false;
          }
        } else {
          // Element (r, c) is source row c, column `from` of r ([sr, sc]
          // stored, sc = mr).
          for (uint64_t k0 = c0; k0 < c0 + bCols; k0 += group) {
            const uint64_t kn = std::min(group, c0 + bCols - k0);
            for (const LineRun &run : runs) {
              for (uint64_t k = 0; k < kn; ++k)
                values[run.j]->read(base + (k0 + k) * sc + run.from, run.count,
                                    floats + k * run.count);
              for (uint64_t i = 0; i < run.count; ++i) {
                uint8_t *o =
                    out +
                    ((run.out + i * run.stride - a) * bCols + (k0 - c0)) * es;
                for (uint64_t k = 0; k < kn; ++k)
                  if (!storeChecked(
                          o + k * es, floats + k * run.count + i, 1,
                          e.type.dtype, e.name,
                          (x * bRows + run.out + i * run.stride - r0) * bCols +
                              k0 - c0 + k,
                          diags))
                    return false;
              }
            }
            // Whole source rows: a later tile maps their pages again.
            for (size_t j = 0; j < g; ++j) {
              values[j]->release(base + k0 * sc, kn * sc);
              if (failed(j))
                return false;
            }
          }
        }
        if (!sink.append(out, (b - a) * bCols * es, diags))
          return false;
      }
    }
    // Later passes re-read the same data: counted once.
    if (p == 0)
      for (const auto &v : values)
        stats.bytesRead += v->bytesRead;
  }
  return true;
}

} // namespace archc
