// Drives an archc-emitted decoder in ONNX Runtime: builds inputs, carries
// the decode-time state (every past_key_values.* input is fed from the
// matching present.* output of the previous call).
'use strict';
const ort = require('onnxruntime-node');

const STATE_IN = 'past_key_values.';
const STATE_OUT = 'present.';

/// IEEE binary16 bits (Uint16Array) -> Float32Array.
function halfToFloat(bits) {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const h = bits[i];
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
    if (exp === 0) out[i] = sign * frac * 2 ** -24;
    else if (exp === 31) out[i] = frac ? NaN : sign * Infinity;
    else out[i] = sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  return out;
}

class Decoder {
  static async load(modelPath) {
    const d = new Decoder();
    d.session = await ort.InferenceSession.create(modelPath, {
      graphOptimizationLevel: process.env.ARCHC_ORT_OPT || 'all',
      intraOpNumThreads: 1,
    });
    d.inputs = d.session.inputMetadata;
    d.stateInputs = d.inputs.filter((m) => m.name.startsWith(STATE_IN));
    d.hasPositions = d.inputs.some((m) => m.name === 'position_ids');
    d.hasMask = d.inputs.some((m) => m.name === 'attention_mask');
    return d;
  }

  /// Empty state for `batch` sequences: symbolic length dims are 0.
  emptyState(batch) {
    const state = {};
    for (const m of this.stateInputs) {
      const shape = m.shape.map((d) =>
        typeof d === 'number' ? d : d === 'batch_size' ? batch : 0);
      const n = shape.reduce((a, b) => a * b, 1);
      // float16 tensors carry raw IEEE half bits; zero is 0x0000 either way.
      const data = m.type === 'float16' ? new Uint16Array(n) : new Float32Array(n);
      state[m.name] = new ort.Tensor(m.type, data, shape);
    }
    return state;
  }

  /// ids, positions: arrays of rows of numbers; mask: rows of 0/1 over all
  /// (past + new) tokens. Returns {logits, vocab, state}.
  async step(ids, mask, positions, state) {
    const b = ids.length, s = ids[0].length;
    const feeds = {};
    feeds.input_ids = new ort.Tensor('int64', BigInt64Array.from(ids.flat().map(BigInt)), [b, s]);
    if (this.hasMask)
      feeds.attention_mask = new ort.Tensor('int64', BigInt64Array.from(mask.flat().map(BigInt)), [b, mask[0].length]);
    if (this.hasPositions)
      feeds.position_ids = new ort.Tensor('int64', BigInt64Array.from(positions.flat().map(BigInt)), [b, s]);
    Object.assign(feeds, state || {});
    const out = await this.session.run(feeds);
    const next = {};
    for (const [name, t] of Object.entries(out))
      if (name.startsWith(STATE_OUT)) next[STATE_IN + name.slice(STATE_OUT.length)] = t;
    const logits = out.logits;
    const data = logits.type === 'float16' ? halfToFloat(logits.data) : logits.data;
    return { logits: data, vocab: logits.dims[2], dims: logits.dims, state: next };
  }
}

module.exports = { Decoder };
