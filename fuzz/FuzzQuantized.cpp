//===- FuzzQuantized.cpp - Fuzz target: the quantized checkpoint readers --===//
//
// The input is a safetensors file whose tensors are bound in the quantized
// formats their dtypes suggest, with shapes taken from the file itself (so
// that the scale sidecars, not the model, decide what is checked): F8_E4M3
// matrices as fine-grained FP8 (F32/BF16/F16 or ue8m0 scales, blocks of 1 to
// 4 rows and columns from the first byte), I8/U8 matrices as packed FP4 with
// `.scale` sidecars, `_blocks` stacks as MXFP4 (either orientation). Every
// bound tensor is streamed as the weight writer streams it. Binding errors
// and non-finite values must be reported, never read out of bounds.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "checkpoint/QuantizedCheckpoint.h"

#include <algorithm>
#include <vector>

namespace {
bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t elements(const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace archc;
  static const std::string path = fuzz::scratchPath("quantized.safetensors");
  if (size < 1 || !fuzz::writeBytes(path, data, size))
    return 0;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  diags.setCapture(true);
  diags.setErrorLimit(0);
  Checkpoint ckpt;
  if (!ckpt.open(path, diags))
    return 0;
  const uint8_t mode = data[0];
  ir::CheckpointQuant fp8;
  fp8.method = ir::CheckpointQuant::Method::FP8;
  fp8.blockRows = 1 + (mode & 3);
  fp8.blockCols = 1 + ((mode >> 2) & 3);
  fp8.fp4Experts = true;
  ir::CheckpointQuant mx;
  mx.method = ir::CheckpointQuant::Method::MXFP4;
  CheckpointBinder fp8Binder(ckpt, fp8), mxBinder(ckpt, mx);
  std::vector<std::pair<CheckpointBinder *, const StoredTensor *>> bound;
  for (const auto &[name, t] : ckpt.tensors()) {
    if (t.shape.size() == 2 && t.shape[0] <= 4096 && t.shape[1] <= 4096) {
      if (t.dtype == StDType::F8E4M3)
        bound.push_back(
            {&fp8Binder, fp8Binder.bind(name, t.shape, true, false)});
      else if (t.dtype == StDType::I8 || t.dtype == StDType::U8)
        bound.push_back(
            {&fp8Binder,
             fp8Binder.bind(name, {t.shape[0], t.shape[1] * 2}, true, false)});
    }
    if (t.shape.size() == 4 && endsWith(name, "_blocks") && t.shape[0] <= 64 &&
        t.shape[1] <= 1024 && t.shape[2] <= 64) {
      std::string logical = name.substr(0, name.size() - 7);
      bool inOut = mode & 0x10;
      int64_t cols = t.shape[2] * 32;
      std::vector<int64_t> shape =
          inOut ? std::vector<int64_t>{t.shape[0], cols, t.shape[1]}
                : std::vector<int64_t>{t.shape[0], t.shape[1], cols};
      bound.push_back({&mxBinder, mxBinder.bind(logical, shape, true, inOut)});
    }
  }
  std::vector<float> buffer(4096);
  for (const auto &[binder, t] : bound) {
    if (!t)
      continue;
    std::unique_ptr<FloatSource> src = binder->source(*t);
    uint64_t n = std::min<uint64_t>(elements(t->shape), 1 << 18);
    for (uint64_t at = 0; at < n && src->error.empty(); at += buffer.size()) {
      uint64_t count = std::min<uint64_t>(buffer.size(), n - at);
      src->read(at, count, buffer.data());
      src->release(at, count);
      // Whatever read() returns without an error is finite.
      if (src->error.empty())
        for (uint64_t i = 0; i < count; ++i)
          if (!std::isfinite(buffer[i]))
            __builtin_trap();
    }
  }
  fp8Binder.report(diags, path);
  mxBinder.report(diags, path);
  return 0;
}
