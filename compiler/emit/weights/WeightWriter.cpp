//===- WeightWriter.cpp - The bytes of each stored weight, written -------===//
//
// This file implements the dispatch of an entry's float data to its
// producer (WeightStreams.cpp), quantized output and the writing of the
// regions. Quantized output streams a tile of output rows at a time (rows
// of an [out, in] matrix, or columns of an [in, out] one read in bands of
// its rows); each row's codes, scales and zero points go to their three
// regions as they are made, so nothing grows with the tensor. The
// initializers are described in the graph with their data streamed to the
// external data files, whose regions are all placed before an entry is
// written, or embedded.
//
//===----------------------------------------------------------------------===//
#include "emit/weights/WeightPlan.h"

#include "emit/onnx/OnnxBuilder.h"
#include "emit/weights/RegionSink.h"
#include "emit/weights/WeightElements.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
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

namespace {
/// Quantizes row `r` of weight `name` into its codes, scales and zero
/// points; reports a non-finite value or an overflowing scale.
bool quantizeChecked(RowQuantizer &q, const float *row, uint64_t r,
                     uint8_t *codes, uint8_t *scales, uint8_t *zeroPoints,
                     const std::string &name, DiagnosticEngine &diags) {
  if (q.quantize(row, codes, scales, zeroPoints))
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
} // namespace

bool WeightPlan::producePlain(const Entry &e, DiagnosticEngine &diags,
                              WeightStats &stats, RegionSink &sink) const {
  if (e.blocks)
    return produceExpertBlocks(e, diags, stats, sink);
  if (e.interleave > 1 || e.parts > 1)
    return produceInterleaved(e, diags, stats, sink);
  if (!e.members.empty()) {
    // A stacked tensor: its members' data one after the other, each
    // streamed like a tensor of its own (transposed in tiles for a
    // transposed stack).
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

namespace {
/// Rows of [in, out] source read between two releases of their pages.
constexpr uint64_t kReleaseRows = 256;
} // namespace

std::vector<const PackedWeight *>
WeightPlan::packedSources(const Entry &e) const {
  if (!packed || e.blocks)
    return {};
  if (e.members.empty()) {
    const PackedWeight *p = packed->get(e.name);
    return p ? std::vector<const PackedWeight *>{p}
             : std::vector<const PackedWeight *>{};
  }
  std::vector<const PackedWeight *> out;
  for (const std::string &m : e.members) {
    const PackedWeight *p = packed->get(m);
    if (!p)
      return {};
    out.push_back(p);
  }
  return out;
}

bool WeightPlan::producePacked(const Entry &e,
                               const std::vector<const PackedWeight *> &members,
                               DiagnosticEngine &diags, WeightStats &stats,
                               RegionSink &codesSink, RegionSink &scalesSink,
                               RegionSink &zeroPointsSink) const {
  const ir::QuantLayout &l = e.layout;
  const int64_t g = e.interleave;
  for (const PackedWeight *p : members)
    if (p->containerBits != l.bits || p->block != l.block ||
        p->storeZeros == l.symmetric || p->cols != l.cols ||
        p->rows * g != l.rows || e.parts != 1 ||
        static_cast<int64_t>(members.size()) != l.experts * g) {
      diags.error(SourceRange(),
                  "internal: the codes of '{}' do not fit the layout of '{}' "
                  "({} bits, block {})",
                  p->name, e.name, l.bits, l.block);
      return false;
    }
  const ir::DType sdt = scaleDType(e.type);
  const int64_t ss = ir::dtypeBits(sdt) / 8;
  const int64_t nb = l.blocksPerRow(), rowBytes = nb * l.blobBytes();
  const int64_t zpb = l.zeroPointBytesPerRow(); // 0 when symmetric
  // Rows of one member at a time, in tiles, appended as read; with G > 1
  // members per expert (gate and up alternating) one expert's rows are held
  // and interleaved, then appended.
  const int64_t memberRows = l.rows / g;
  const int64_t T = std::clamp<int64_t>(
      static_cast<int64_t>(kChunkElems) / l.cols, 1, memberRows);
  const int64_t held = g > 1 ? l.rows : T; // rows of the buffers below
  std::vector<uint8_t> codes(static_cast<size_t>(held * rowBytes)),
      scales(static_cast<size_t>(held * nb * ss)),
      zeroPoints(static_cast<size_t>(held * zpb)),
      tileCodes(static_cast<size_t>(T * rowBytes)),
      tileZp(static_cast<size_t>(T * zpb));
  std::vector<float> sc(static_cast<size_t>(T * nb));
  auto flush = [&](int64_t rows) {
    return codesSink.append(codes.data(), rows * rowBytes, diags) &&
           scalesSink.append(scales.data(), rows * nb * ss, diags) &&
           (zpb == 0 ||
            zeroPointsSink.append(zeroPoints.data(), rows * zpb, diags));
  };
  for (int64_t x = 0; x < l.experts; ++x) {
    for (int64_t j = 0; j < g; ++j) {
      const PackedWeight &p = *members[x * g + j];
      PackedReader reader(p, *ckpt);
      for (int64_t n0 = 0; n0 < memberRows; n0 += T) {
        const int64_t t = std::min(T, memberRows - n0);
        reader.rows(n0, t, tileCodes.data(), sc.data(),
                    zpb ? tileZp.data() : nullptr);
        for (int64_t r = 0; r < t; ++r) {
          // The row's place in the buffers (the expert's row when held).
          const int64_t at = g > 1 ? (n0 + r) * g + j : r;
          for (int64_t b = 0; b < nb; ++b) {
            uint8_t *dst = scales.data() + (at * nb + b) * ss;
            if (!std::isfinite(sc[r * nb + b])) {
              diags.error(SourceRange(),
                          "{}: the scale of output {}, input block {} is {}; "
                          "the weights it scales would not be finite",
                          p.scales->name, n0 + r, b,
                          nonFiniteName(sc[r * nb + b]));
              return false;
            }
            storeFloat(dst, sc[r * nb + b], sdt);
            // MatMulNBits' scales take the activation dtype: a scale it
            // cannot hold exactly would change the checkpoint's weights.
            if (loadFloat(dst, sdt) != sc[r * nb + b]) {
              diags.error(SourceRange(),
                          "{}: the scale {} (output {}, input block {}) is "
                          "not exact in {}, the dtype of MatMulNBits' "
                          "scales with --dtype={}; --dtype=f32 keeps every "
                          "scale of the checkpoint",
                          p.scales->name, sc[r * nb + b], n0 + r, b,
                          ir::dtypeName(sdt), ir::dtypeName(sdt));
              return false;
            }
          }
          std::memcpy(codes.data() + at * rowBytes,
                      tileCodes.data() + r * rowBytes,
                      static_cast<size_t>(rowBytes));
          if (zpb)
            std::memcpy(zeroPoints.data() + at * zpb, tileZp.data() + r * zpb,
                        static_cast<size_t>(zpb));
        }
        if (g == 1 && !flush(t))
          return false;
      }
      stats.bytesRead += reader.bytesRead();
      // Its checkpoint pages are not needed again (memory stays bounded by
      // one member, not the checkpoint).
      for (const StTensor *t : p.tensors())
        ckpt->file(t->file).release(t->data, t->size);
    }
    if (g > 1 && !flush(l.rows))
      return false;
  }
  return true;
}

bool WeightPlan::produceQuantized(const Entry &e, DiagnosticEngine &diags,
                                  WeightStats &stats, RegionSink &codesSink,
                                  RegionSink &scalesSink,
                                  RegionSink &zeroPointsSink) const {
  // The checkpoint's own codes, copied.
  if (source == WeightSource::Checkpoint) {
    std::vector<const PackedWeight *> members = packedSources(e);
    if (!members.empty())
      return producePacked(e, members, diags, stats, codesSink, scalesSink,
                           zeroPointsSink);
  }
  // A stack made of other tensors (quantizeStack): its float rows as the
  // float stack would be written.
  if (e.blocks || !e.members.empty())
    return quantizeProducedRows(e, diags, stats, codesSink, scalesSink,
                                zeroPointsSink);
  const ir::QuantLayout &l = e.layout;
  RowQuantizer quantizer(l, e.type);
  std::unique_ptr<FloatSource> values = valuesOf(e);
  const uint64_t N = static_cast<uint64_t>(l.rows),
                 K = static_cast<uint64_t>(l.cols);
  const uint64_t cb = quantizer.codeBytes(), sb = quantizer.scaleBytes(),
                 zb = quantizer.zeroPointBytes();
  // Output rows are quantized in tiles of T rows: rows of an [out, in]
  // matrix are contiguous; an [in, out] matrix is read a tile of columns at
  // a time, its rows' pages released every kReleaseRows rows (a later tile
  // maps them again).
  uint64_t T = std::clamp<uint64_t>(
      e.inOut ? tile / (K * sizeof(float)) : kChunkElems / K, 1, N);
  float *floats = scratch->floats(1, T * K);
  std::vector<float> row(K);
  std::vector<uint8_t> codes(T * cb), scales(T * sb), zeroPoints(T * zb);
  for (int64_t x = 0; x < l.experts; ++x) {
    uint64_t base = static_cast<uint64_t>(x) * N * K;
    for (uint64_t n0 = 0; n0 < N; n0 += T) {
      uint64_t t = std::min(T, N - n0);
      if (e.inOut) {
        for (uint64_t k0 = 0; k0 < K; k0 += kReleaseRows) {
          uint64_t kn = std::min(kReleaseRows, K - k0);
          for (uint64_t k = k0; k < k0 + kn; ++k)
            values->read(base + k * N + n0, t, floats + k * t);
          values->release(base + k0 * N, kn * N);
        }
      } else {
        values->read(base + n0 * K, t * K, floats);
        values->release(base + n0 * K, t * K);
      }
      for (uint64_t i = 0; i < t; ++i) {
        const float *src = floats + i * K;
        if (e.inOut) {
          for (uint64_t k = 0; k < K; ++k)
            row[k] = floats[k * t + i];
          src = row.data();
        }
        // A source error (a NaN code, ...) is reported below, by name.
        if (values->error.empty() &&
            !quantizeChecked(quantizer, src,
                             static_cast<uint64_t>(x) * N + n0 + i,
                             codes.data() + i * cb, scales.data() + i * sb,
                             zeroPoints.data() + i * zb, e.name, diags))
          return false;
      }
      if (!values->error.empty()) {
        diags.error(SourceRange(), "cannot read weight '{}': {}", e.name,
                    values->error);
        return false;
      }
      if (!codesSink.append(codes.data(), t * cb, diags) ||
          !scalesSink.append(scales.data(), t * sb, diags) ||
          (zb && !zeroPointsSink.append(zeroPoints.data(), t * zb, diags)))
        return false;
    }
    // A source that releases whole matrices only (MXFP4) lets go here.
    if (e.inOut)
      values->release(base, N * K);
  }
  stats.bytesRead += values->bytesRead;
  return true;
}

namespace {

/// Takes a stack's float rows in pieces of any size and quantizes each
/// complete row into its codes, scales and zero points.
class RowQuantizingSink : public RegionSink {
public:
  RowQuantizingSink(const ir::QuantLayout &l, const ir::TensorType &type,
                    const std::string &name, RegionSink &codes,
                    RegionSink &scales, RegionSink &zeroPoints)
      : l(l), quantizer(l, type), dtype(type.dtype),
        es(ir::dtypeBits(type.dtype) / 8), K(static_cast<uint64_t>(l.cols)),
        totalRows(static_cast<uint64_t>(l.experts * l.rows)), name(name),
        codesSink(codes), scalesSink(scales), zeroPointsSink(zeroPoints),
        row(K), codes(quantizer.codeBytes()), scales(quantizer.scaleBytes()),
        zeroPoints(quantizer.zeroPointBytes()) {
    pending.reserve(K * es);
  }

  bool append(const uint8_t *p, uint64_t n, DiagnosticEngine &d) override {
    at += n;
    while (n > 0) {
      uint64_t take = std::min<uint64_t>(n, K * es - pending.size());
      pending.insert(pending.end(), p, p + take);
      p += take;
      n -= take;
      if (pending.size() < K * es)
        continue;
      if (rows >= totalRows) {
        d.error(SourceRange(),
                "weight '{}' produced more rows than its "
                "{} x {} stack",
                name, l.experts, l.rows);
        return false;
      }
      for (uint64_t k = 0; k < K; ++k)
        row[k] = loadFloat(pending.data() + k * es, dtype);
      pending.clear();
      if (!quantizeChecked(quantizer, row.data(), rows, codes.data(),
                           scales.data(), zeroPoints.data(), name, d))
        return false;
      ++rows;
      if (!codesSink.append(codes.data(), codes.size(), d) ||
          !scalesSink.append(scales.data(), scales.size(), d) ||
          (!zeroPoints.empty() &&
           !zeroPointsSink.append(zeroPoints.data(), zeroPoints.size(), d)))
        return false;
    }
    return true;
  }

  bool complete() const { return rows == totalRows && pending.empty(); }

private:
  const ir::QuantLayout &l;
  RowQuantizer quantizer;
  ir::DType dtype;
  size_t es;
  uint64_t K, totalRows, rows = 0;
  const std::string &name;
  RegionSink &codesSink, &scalesSink, &zeroPointsSink;
  std::vector<uint8_t> pending;
  std::vector<float> row;
  std::vector<uint8_t> codes, scales, zeroPoints;
};

} // namespace

bool WeightPlan::quantizeProducedRows(const Entry &e, DiagnosticEngine &diags,
                                      WeightStats &stats, RegionSink &codes,
                                      RegionSink &scales,
                                      RegionSink &zeroPoints) const {
  RowQuantizingSink rows(e.layout, e.type, e.name, codes, scales, zeroPoints);
  if (!producePlain(e, diags, stats, rows))
    return false;
  assert(rows.complete() && "whole rows of the stack");
  (void)rows;
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
  // Each region of an entry is placed on its own (aligned, in the chunk
  // that has room for it), so the codes, scales and zero points of one
  // quantized weight may lie in different data files; every view names its
  // region's file. All of an entry's regions are placed before its bytes
  // are made: the three regions of a quantized weight fill side by side.
  for (const Entry &e : entries) {
    const bool has[4] = {e.plain, e.quantized, e.quantized,
                         e.quantized && !e.layout.symmetric};
    DataRegion region[4];
    for (int r = 0; r < 4; ++r)
      if (has[r] && !out.place(regionBytes(e, r), region[r], diags))
        return false;
    if (write) {
      if (e.plain) {
        FileRegionSink sink(out, region[0]);
        if (!producePlain(e, diags, stats, sink) || !sink.flush(diags))
          return false;
        assert(sink.cursor() == region[0].bytes && "the whole region");
      }
      if (e.quantized) {
        FileRegionSink codes(out, region[1]), scales(out, region[2]),
            zeroPoints(out, region[3]);
        if (!produceQuantized(e, diags, stats, codes, scales, zeroPoints) ||
            !codes.flush(diags) || !scales.flush(diags) ||
            !zeroPoints.flush(diags))
          return false;
        assert(codes.cursor() == region[1].bytes &&
               scales.cursor() == region[2].bytes &&
               zeroPoints.cursor() == region[3].bytes && "the whole regions");
      }
      for (int r = 0; r < 4; ++r)
        stats.bytesWritten += has[r] ? region[r].bytes : 0;
    }
    if (!out.settle(diags))
      return false;
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
      add("location", out.location(region[v.region]));
      add("offset", std::to_string(region[v.region].offset + v.offset));
      add("length", std::to_string(v.bytes));
    }
  }
  return out.finish(diags);
}

namespace {
bool sameLayout(const ir::QuantLayout &a, const ir::QuantLayout &b) {
  return a.bits == b.bits && a.block == b.block && a.rows == b.rows &&
         a.cols == b.cols && a.experts == b.experts &&
         a.symmetric == b.symmetric && a.scaleBits == b.scaleBits;
}
} // namespace

bool WeightPlan::shareExternal(onnx::GraphProto &graph,
                               const std::vector<Written> &written) const {
  // Every view's external reference, found before anything is added.
  std::vector<std::pair<const View *, const onnx::TensorProto *>> refs;
  for (const Entry &e : entries) {
    bool found = false;
    for (const Written &w : written) {
      auto at = w.plan->index.find(e.name);
      if (at == w.plan->index.end())
        continue;
      const Entry &o = w.plan->entries[at->second];
      // Stored the same way: the same bytes (expert block stacks and
      // graph-input weights are not compared, so never shared).
      if (e.blocks || o.blocks || e.inOut || o.inOut ||
          o.type.str() != e.type.str() || o.shape != e.shape ||
          o.plain != e.plain || o.quantized != e.quantized ||
          (e.quantized && !sameLayout(o.layout, e.layout)) ||
          o.members != e.members ||
          o.membersTransposed != e.membersTransposed ||
          o.interleave != e.interleave || o.parts != e.parts ||
          o.partAxis != e.partAxis || o.transposed != e.transposed ||
          o.views.size() != e.views.size())
        continue;
      std::vector<std::pair<const View *, const onnx::TensorProto *>> mine;
      for (size_t v = 0; v < e.views.size(); ++v) {
        const View &a = e.views[v], &b = o.views[v];
        if (a.name != b.name || a.dims != b.dims || a.onnxType != b.onnxType ||
            a.region != b.region || a.offset != b.offset || a.bytes != b.bytes)
          break;
        const onnx::TensorProto *t = nullptr;
        for (const onnx::TensorProto &init : w.graph->initializer())
          if (init.name() == b.name &&
              init.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
            t = &init;
        if (!t)
          break;
        mine.push_back({&a, t});
      }
      if (mine.size() != e.views.size())
        continue;
      refs.insert(refs.end(), mine.begin(), mine.end());
      found = true;
      break;
    }
    if (!found)
      return false;
  }
  for (const auto &[v, from] : refs) {
    onnx::TensorProto *t = graph.add_initializer();
    describe(t, v->name, v->dims, v->onnxType);
    t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    *t->mutable_external_data() = from->external_data();
  }
  return true;
}

// The embedded model is at most 2 GiB (one protobuf), and its initializers
// are built in memory: this path is bounded by that limit, not by tiles.
bool WeightPlan::embed(onnx::GraphProto &graph, DiagnosticEngine &diags,
                       WeightStats &stats, ProgressBar *progress) const {
  for (const Entry &e : entries) {
    std::string region[4];
    if (e.plain) {
      StringRegionSink sink(region[0], regionBytes(e, 0), progress);
      if (!producePlain(e, diags, stats, sink))
        return false;
    }
    if (e.quantized) {
      StringRegionSink codes(region[1], regionBytes(e, 1), progress),
          scales(region[2], regionBytes(e, 2), progress),
          zeroPoints(region[3], regionBytes(e, 3), progress);
      if (!produceQuantized(e, diags, stats, codes, scales, zeroPoints))
        return false;
    }
    for (const std::string &r : region)
      stats.bytesWritten += r.size();
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
