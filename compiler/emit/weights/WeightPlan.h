//===- WeightPlan.h - Initializers and their data ---------------*- C++ -*-===//
//
// This file declares WeightPlan, which collects the weight tensors an ONNX
// graph uses (named by the .arch weight patterns, i.e. the Hugging Face
// checkpoint names), checks them against a checkpoint (missing, unexpected,
// mis-shaped, unconvertible, quantized formats and their scales), and writes
// their data: streamed from the memory-mapped checkpoint with dtype
// conversion or dequantization, generated (random/zeros), or left as a
// sparse all-zero layout. Memory stays bounded by fixed-size buffers,
// whatever the size of the model or of its largest tensor: chunks of 1 Mi
// elements, and one tile of the transposes and gathers (`tileBytes`, 32 MiB
// by default) -- a matrix stored transposed (a dense Linear weight written
// [in, out], a transposed expert stack's member, an expert block read
// across a checkpoint stack) is written in bands of rows or columns, never
// held whole (WeightStreams.cpp).
//
// A weight may also be stored block-quantized (`--quant`): its codes,
// scales and zero points are regions of the external data named after it
// (`<name>.qweight`, `<name>.scales`, `<name>.zero_points`), each placed
// by the ExternalDataWriter on its own, so one weight's regions may lie in
// different chunk files; the three are written side by side, a row at a
// time. A stacked [E, N, K] expert tensor is quantized per expert along K into
// one region of [E, N, blocks, blob] codes; each expert's MatMulNBits reads its
// slice through its own initializer (`<name>.<e>.qweight`, an external-data
// view of the same bytes), and a stacked-expert dispatch can read the whole
// region as one [E, N, K / pack] tensor (QMoE's layout).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_WEIGHTPLAN_H
#define ARCHC_EMIT_WEIGHTPLAN_H

#include "checkpoint/QuantizedCheckpoint.h"
#include "checkpoint/Safetensors.h"
#include "emit/weights/ExternalData.h"
#include "ir/Types.h"
#include "ir/WeightQuant.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace archc {

enum class WeightSource { Checkpoint, Random, Zeros, Layout };

namespace weights {
class RegionSink;
class Scratch;
} // namespace weights

/// The default bytes of one transpose or gather tile.
constexpr uint64_t kDefaultTileBytes = uint64_t(32) << 20;

/// Where an emission's weight bytes come from: the checkpoint at `weights`
/// (opened into `ckpt`), generated data (`init`: "random" or "zeros"), or
/// none (the layout alone; always for ONNX text). False when the
/// checkpoint cannot be opened (reported).
bool chooseWeightSource(const std::string &weights, const std::string &init,
                        bool text, Checkpoint &ckpt, WeightSource &source,
                        DiagnosticEngine &diags);

/// Counters reported after writing (benchmarks, docs/performance.md).
struct WeightStats {
  uint64_t tensors = 0;
  uint64_t bytesWritten = 0;
  uint64_t bytesRead = 0;
};

/// The initializer names of a quantized weight as one consumer reads it.
struct QuantizedRef {
  std::string codes, scales, zeroPoints; ///< zeroPoints empty if symmetric
  ir::QuantLayout layout;
  int32_t scaleType = 0; ///< ONNX element type of the scales
};

class WeightStorage;

/// How a consumer reads a quantized weight's codes (the bytes are the same;
/// only the initializer's dims differ).
enum class QuantRead {
  /// MatMulNBits: [N, blocks, blob] per matrix; a whole stack [E, N, blocks,
  /// blob], so that a Scan hands each step one expert's matrix.
  Matrix,
  /// GatherBlockQuantized: [rows, blocks * blob].
  Gather,
  /// QMoE: a whole stack as [E, N, blocks * blob].
  Stack,
};

class WeightPlan {
public:
  /// `packed`: the catalog of the checkpoint's integer codes the storage
  /// decisions used (WeightStorage::packed()); a quantized entry whose
  /// weight (or every member of whose stack) it holds is written with the
  /// checkpoint's codes, scales and zero points instead of quantized.
  WeightPlan(WeightSource source, const Checkpoint *ckpt, uint64_t seed,
             const ir::CheckpointQuant &ckptQuant = {},
             const PackedWeights *packed = nullptr);
  ~WeightPlan();

  /// Registers a weight used by the graph as a float (or integer) tensor;
  /// returns the initializer name. With `transposed` the weight is a 2-D
  /// [out, in] matrix (its checkpoint shape, `type`) stored transposed as
  /// an [in, out] initializer of the same name: its data (from any source,
  /// converted or dequantized first) is transposed as it is written, in
  /// tiles of tileBytes(). Every reader of one weight must ask
  /// for the same orientation. With `storedDims` the initializer has those
  /// dims instead (the same elements in the same order: a reshaped view of
  /// the checkpoint tensor); every reader must ask for the same dims.
  const std::string &use(const std::string &name, const ir::TensorType &type,
                         bool transposed = false,
                         const std::vector<int64_t> *storedDims = nullptr);

  /// Registers a stacked [E, ...] float tensor `name` (not a checkpoint
  /// tensor) whose slice e is the checkpoint tensor `members[e]` of type
  /// `memberType`; the members are bound, validated and streamed one after
  /// the other into the stacked tensor's data. With `transposed` the
  /// members are matrices stored transposed ([E, in, out] from [out, in]
  /// tensors; each transposed in tiles, as by use()).
  /// Returns the initializer name.
  const std::string &useStacked(const std::string &name,
                                const std::vector<std::string> &members,
                                const ir::TensorType &memberType,
                                bool transposed = false);

  /// Registers a stacked [E, G * rows, cols] float tensor `name` whose slice
  /// e interleaves the rows of the G = `interleave` checkpoint matrices
  /// members[e * G .. e * G + G - 1] (each of type `memberType`, [rows,
  /// cols]): row r * G + j of the slice is row r of member j. ONNX
  /// Runtime's MoE reads SwiGLU experts so (gate and up rows alternating,
  /// swiglu_fusion = 1). The members are read a band of rows at a time.
  /// Returns the initializer name.
  ///
  /// With `parts` P > 1 each expert's (interleaved) matrix is cut into P
  /// equal blocks along `axis` (0: rows, 1: columns) and the stack holds
  /// the P * E blocks part-major, [P * E, ...]: entry p * E + e is block p
  /// of expert e. An expert's members are then read P times (once per
  /// block).
  const std::string &
  useInterleavedStack(const std::string &name,
                      const std::vector<std::string> &members,
                      int64_t interleave, const ir::TensorType &memberType,
                      int64_t parts = 1, int axis = 0);

  /// How useExpertBlocks makes its [P * E, ...] stack from checkpoint stacks.
  struct ExpertBlocks {
    /// Each expert's [R, C] matrix is written as its transpose, [C, R].
    bool transposed = false;
    /// The (transposed) matrix's two halves of rows [0, H) and [H, 2H) are
    /// interleaved: row 2r is row r, row 2r + 1 is row H + r ([gate | up]
    /// stored one after the other, read with gate and up rows alternating).
    bool interleaveHalves = false;
    /// Blocks each expert's (transposed, interleaved) matrix is cut into
    /// along `axis` (0 rows, 1 columns), stored part-major.
    int64_t parts = 1;
    int axis = 0;
    /// Not cut: block 0 is the whole matrix, the blocks after it zeros (a
    /// bias added once per expert).
    bool firstPartOnly = false;
    /// Only rows [firstRow, firstRow + rowCount) of each source slice (as
    /// the view has it, before transposing); 0 rows: all of them (MLA's
    /// U_K and U_V parts of one head's kv rows).
    int64_t firstRow = 0, rowCount = 0;
  };
  /// A checkpoint tensor useExpertBlocks reads: its name and type.
  struct StackSource {
    std::string name;
    ir::TensorType type;
  };

  /// Registers a float tensor `name` made from the checkpoint's own stacks
  /// `sources`, each read as `view` ([E, R, C], or [E, C] whose slices are
  /// columns [C, 1]; the same elements in the same order as the source),
  /// expert by expert as `layout` says: [P * E, rows, cols] (or [P * E,
  /// rows]) whose entry p * E + e is block p of expert e. With G > 1
  /// sources an expert's matrix alternates their (transposed) rows: row r *
  /// G + j is row r of source j (separate gate and up stacks). A block is
  /// made a tile of rows at a time (a transposed one from the columns of
  /// its source rows); the sources are read P times.
  /// Returns the initializer name.
  const std::string &useExpertBlocks(const std::string &name,
                                     const std::vector<StackSource> &sources,
                                     const ir::TensorType &view,
                                     const ExpertBlocks &layout);

  /// Registers the quantized form of a weight read as a matrix of
  /// `layout.rows` outputs by `layout.cols` inputs (per expert), `inOut`
  /// when the weight is stored [in, out]. `expert` >= 0 selects one
  /// expert's matrix of a stacked weight (`<name>.<e>.qweight` ...); -1 on a
  /// stacked layout the whole stack ([E, ...] codes, [E, N, blocks] scales,
  /// [E, N, zp bytes] zero points). `read` gives the codes' dims (see
  /// QuantRead). Views share the bytes.
  QuantizedRef useQuantized(const std::string &name, const ir::TensorType &type,
                            const ir::QuantLayout &layout, bool inOut,
                            int64_t expert, QuantRead read);

  /// Stores a stack registered by useInterleavedStack or useExpertBlocks
  /// block-quantized instead of as floats: each of its `layout.experts`
  /// [rows, cols] entries is quantized along cols, a row at a time as it
  /// is produced (as for the floats). Returns the views
  /// of the whole stack, its codes read as `read` says (QMoE's [E, N,
  /// blocks * blob] by default).
  QuantizedRef quantizeStack(const std::string &name,
                             const ir::QuantLayout &layout,
                             QuantRead read = QuantRead::Stack);

  /// --allow-overflow: a value that overflows the dtype it is stored in
  /// (1e6 as f16) is written as inf; by default it is an error naming the
  /// weight and the element.
  void setAllowOverflow(bool allow) { allowOverflow = allow; }

  /// Names of stacked weights the model reads as [in, out] matrices (the
  /// orientation of gpt-oss's MXFP4 blocks).
  void setInOutWeights(std::set<std::string> names) {
    inOutNames = std::move(names);
  }

  /// Checks the registered weights against the checkpoint. Missing,
  /// mis-shaped, unconvertible and badly quantized tensors are errors;
  /// checkpoint tensors the model does not use are reported as a warning.
  /// No-op without a checkpoint.
  /// Without `reportUnused`, checkpoint tensors the plan does not use are
  /// not reported (a package reports them once, over all its graphs);
  /// names in `declared` (tensors the arch's other graphs read) are not
  /// reported either.
  bool validate(DiagnosticEngine &diags, const std::string &ckptPath,
                bool reportUnused = true,
                const std::set<std::string> *declared = nullptr);

  /// The checkpoint tensors binding read (weights and their scale
  /// sidecars); null without a checkpoint.
  const std::set<std::string> *consumedTensors() const;

  /// Adds the initializers to `graph` with their data in external data
  /// files, placed and written by `out` (which it finishes).
  bool writeExternal(onnx::GraphProto &graph, ExternalDataWriter &out,
                     DiagnosticEngine &diags, WeightStats &stats) const;
  /// A plan whose writeExternal filled `graph`: bytes another plan may
  /// share (shareExternal).
  struct Written {
    const WeightPlan *plan;
    const onnx::GraphProto *graph;
  };
  /// Adds to `graph` the initializers of every entry as references to bytes
  /// one of `written` already wrote: an entry of the same name stored the
  /// same way (shape, transpose, stacking, quantization) whose views are
  /// external data. Returns false, leaving `graph` unchanged, unless every
  /// entry has one. The files referenced lie in the other graph's folder.
  bool shareExternal(onnx::GraphProto &graph,
                     const std::vector<Written> &written) const;
  /// Adds the initializers with their data inside the model proto;
  /// `progress` (optional) counts the bytes.
  bool embed(onnx::GraphProto &graph, DiagnosticEngine &diags,
             WeightStats &stats, ProgressBar *progress = nullptr) const;

  /// Total bytes of weight data (without alignment padding).
  uint64_t totalBytes() const;

  /// The bytes of one transpose or gather tile: kDefaultTileBytes, or the
  /// environment's ARCHC_WEIGHT_TILE_BYTES (tests make tiles of a few
  /// elements; the bytes written are the same for any size).
  uint64_t tileBytes() const { return tile; }
  void setTileBytes(uint64_t bytes) { tile = bytes ? bytes : 1; }

private:
  struct View {
    std::string name;
    int region;      ///< 0 float, 1 codes, 2 scales, 3 zero points
    uint64_t offset; ///< bytes into the region
    uint64_t bytes;
    std::vector<int64_t> dims;
    int32_t onnxType;
  };
  struct Entry {
    std::string name;
    ir::TensorType type;
    std::vector<int64_t> shape;
    bool plain = false; ///< the float/int tensor itself is an initializer
    bool quantized = false;
    ir::QuantLayout layout;
    bool inOut = false;
    std::vector<View> views;
    std::set<std::string> viewNames;
    /// A stacked tensor's checkpoint tensors (slice e is members[e]).
    std::vector<std::string> members;
    ir::TensorType memberType;
    bool membersTransposed = false; ///< [E, in, out] of [out, in] members
    /// Members per slice whose rows alternate (1: one member per slice).
    int64_t interleave = 1;
    /// Blocks per expert matrix, stored part-major (useInterleavedStack).
    int64_t parts = 1;
    int partAxis = 0; ///< the axis the blocks cut
    /// A stack made from the checkpoint stacks `members` of types
    /// `sourceTypes`, read as `view` (useExpertBlocks).
    bool blocks = false;
    ExpertBlocks blockLayout;
    std::vector<ir::TensorType> sourceTypes;
    ir::TensorType view;
    /// A 2-D [out, in] tensor (`shape`, as the checkpoint holds it) whose
    /// initializer is its transpose, [in, out].
    bool transposed = false;
  };
  WeightSource source;
  const Checkpoint *ckpt;
  uint64_t seed;
  ir::CheckpointQuant ckptQuant;
  const PackedWeights *packed = nullptr;
  std::unique_ptr<CheckpointBinder> binder;
  std::set<std::string> inOutNames;
  bool allowOverflow = false;
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;
  uint64_t tile;
  /// The producers' buffers, reused from tensor to tensor.
  std::unique_ptr<weights::Scratch> scratch;

  Entry &entryFor(const std::string &name, const ir::TensorType &type);
  /// Stores `n` floats of weight `name` (elements from `first`) as `dtype`;
  /// reports an overflow unless allowed.
  bool storeChecked(uint8_t *out, const float *in, uint64_t n, ir::DType dtype,
                    const std::string &name, uint64_t first,
                    DiagnosticEngine &diags) const;
  std::unique_ptr<FloatSource> valuesOf(const Entry &e) const;
  uint64_t regionBytes(const Entry &e, int region) const;

  /// One tensor's elements in its stored dtype, read by ranges
  /// (WeightStreams.cpp).
  struct Elements;
  /// The entry of one member of a stacked entry.
  Entry memberEntry(const Entry &stacked, size_t i) const;
  /// Checkpoint stack i of a useExpertBlocks entry.
  Entry blockSource(const Entry &e, size_t i) const;

  // The producers append an entry's bytes to a sink (WeightStreams.cpp:
  // float data; WeightWriter.cpp: the dispatch and quantized data).
  /// One tensor's bytes (not stacked), in chunks.
  bool produceTensor(const Entry &e, DiagnosticEngine &diags,
                     WeightStats &stats, weights::RegionSink &sink) const;
  /// One 2-D tensor's bytes written transposed ([cols, rows] of its
  /// [rows, cols]): tiles of output rows gathered from the columns of bands
  /// of source rows, or, into a sink that writes at offsets, bands of
  /// source rows whose columns are written at their places.
  bool produceTransposed(const Entry &e, DiagnosticEngine &diags,
                         WeightStats &stats, weights::RegionSink &sink) const;
  /// A useExpertBlocks stack, block by block, in bands of rows.
  bool produceExpertBlocks(const Entry &e, DiagnosticEngine &diags,
                           WeightStats &stats, weights::RegionSink &sink) const;
  /// An interleaved or part-major stack, in bands of its rows.
  bool produceInterleaved(const Entry &stacked, DiagnosticEngine &diags,
                          WeightStats &stats, weights::RegionSink &sink) const;
  bool producePlain(const Entry &e, DiagnosticEngine &diags, WeightStats &stats,
                    weights::RegionSink &sink) const;
  /// Quantizes the rows of a stack made of other tensors (quantizeStack)
  /// as producePlain produces them, row-major [E, N, K] in `e.type.dtype`.
  bool quantizeProducedRows(const Entry &e, DiagnosticEngine &diags,
                            WeightStats &stats, weights::RegionSink &codes,
                            weights::RegionSink &scales,
                            weights::RegionSink &zeroPoints) const;
  /// The checkpoint's packed weights an entry's codes are copied from (the
  /// weight, or its stack's members in order); empty when it is quantized.
  std::vector<const PackedWeight *> packedSources(const Entry &e) const;
  /// Appends the codes of `members` (`e.interleave` per expert, their rows
  /// alternating) in the entry's layout, with their scales and zero points.
  bool producePacked(const Entry &e,
                     const std::vector<const PackedWeight *> &members,
                     DiagnosticEngine &diags, WeightStats &stats,
                     weights::RegionSink &codes, weights::RegionSink &scales,
                     weights::RegionSink &zeroPoints) const;
  bool produceQuantized(const Entry &e, DiagnosticEngine &diags,
                        WeightStats &stats, weights::RegionSink &codes,
                        weights::RegionSink &scales,
                        weights::RegionSink &zeroPoints) const;
};

/// The weight plan of module `m`'s emission: bytes from `source` (`ckpt`
/// when it is the checkpoint), stored as `storage` decided, and the stacked
/// expert weights the module reads as [in, out] matrices (how MXFP4 blocks,
/// stored [out, in], map onto them) registered as such.
std::unique_ptr<WeightPlan>
makeWeightPlan(const ir::Module &m, WeightSource source, const Checkpoint *ckpt,
               uint64_t seed, const WeightStorage &storage);

} // namespace archc

#endif // ARCHC_EMIT_WEIGHTPLAN_H
