// Drives archc's encoder and encoder-decoder model folders in ONNX Runtime
// the way transformers.js and Optimum's runners do: the encoder
// (onnx/model.onnx of an encoder-only model, onnx/encoder_model.onnx of an
// encoder-decoder) once, then decoder_model_merged.onnx per step with
// use_cache_branch false and empty past tensors at the first step (symbolic
// dims other than batch_size as 0), then true with the presents fed back
// (the first step's encoder.* presents kept, as transformers.js keeps them).
'use strict';
const ort = require('onnxruntime-node');

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

/// Float32Array -> IEEE binary16 bits (round to nearest even).
function floatToHalf(values) {
  const out = new Uint16Array(values.length);
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  for (let i = 0; i < values.length; i++) {
    f[0] = values[i];
    const x = u[0];
    const sign = (x >>> 16) & 0x8000;
    let exp = ((x >>> 23) & 0xff) - 127 + 15;
    let mant = x & 0x7fffff;
    if (((x >>> 23) & 0xff) === 0xff) { out[i] = sign | 0x7c00 | (mant ? 0x200 : 0); continue; }
    if (exp >= 31) { out[i] = sign | 0x7c00; continue; }
    if (exp <= 0) {
      if (exp < -10) { out[i] = sign; continue; }
      mant |= 0x800000;
      const shift = 14 - exp;
      let h = mant >>> shift;
      const rem = mant & ((1 << shift) - 1), half = 1 << (shift - 1);
      if (rem > half || (rem === half && (h & 1))) h++;
      out[i] = sign | h;
      continue;
    }
    let h = (exp << 10) | (mant >>> 13);
    const rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
    out[i] = sign | h;
  }
  return out;
}

const toFloat = (t) => (t.type === 'float16' ? halfToFloat(t.data) : t.data);

const i64 = (rows) => new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)),
  [rows.length, rows[0].length]);

async function session(file) {
  return ort.InferenceSession.create(file, {
    graphOptimizationLevel: process.env.ARCHC_ORT_OPT || 'all',
    intraOpNumThreads: 1,
  });
}

/// A float input of the session's element type from float32 data.
function floatInput(sess, name, data, dims) {
  const meta = sess.inputMetadata.find((m) => m.name === name);
  if (meta && meta.type === 'float16') return new ort.Tensor('float16', floatToHalf(data), dims);
  return new ort.Tensor('float32', Float32Array.from(data), dims);
}

class Seq2Seq {
  static async load(encoderFile, decoderFile) {
    const m = new Seq2Seq();
    m.encoder = await session(encoderFile);
    m.decoder = await session(decoderFile);
    m.decoderInputs = m.decoder.inputMetadata;
    return m;
  }

  /// Runs the encoder on `feeds` (name -> ort.Tensor); returns
  /// last_hidden_state (the ort tensor).
  async encode(feeds) {
    const out = await this.encoder.run(feeds);
    return out.last_hidden_state;
  }

  /// Zero-length past tensors for `batch` rows, shaped from the decoder's
  /// input metadata as transformers.js shapes them.
  emptyPast(batch) {
    const past = {};
    for (const m of this.decoderInputs) {
      if (!m.name.startsWith('past_key_values.')) continue;
      const shape = m.shape.map((d) => (typeof d === 'number' ? d : d === 'batch_size' ? batch : 0));
      const n = shape.reduce((a, b) => a * b, 1);
      past[m.name] = new ort.Tensor(m.type, m.type === 'float16' ? new Uint16Array(n) : new Float32Array(n), shape);
    }
    return past;
  }

  /// One decoder call: ids (rows), the encoder output (ort tensor), the
  /// encoder's mask (rows; omitted when the graph takes none), the past
  /// (null at the first step). Returns {logits (Float32Array), dims, past}.
  async step(ids, encoderStates, encoderMask, past) {
    const names = this.decoderInputs.map((m) => m.name);
    const feeds = { input_ids: i64(ids), encoder_hidden_states: encoderStates };
    if (names.includes('encoder_attention_mask')) feeds.encoder_attention_mask = i64(encoderMask);
    const first = !past;
    Object.assign(feeds, first ? this.emptyPast(ids.length) : past);
    if (names.includes('use_cache_branch'))
      feeds.use_cache_branch = new ort.Tensor('bool', [!first], [1]);
    const out = await this.decoder.run(feeds);
    const next = {};
    for (const [name, t] of Object.entries(out)) {
      if (!name.startsWith('present.')) continue;
      const pastName = 'past_key_values.' + name.slice('present.'.length);
      // The encoder entries are computed at the first step and kept.
      next[pastName] = name.includes('.encoder.') && !first ? past[pastName] : t;
    }
    return { logits: toFloat(out.logits), dims: out.logits.dims, past: next };
  }
}

module.exports = { Seq2Seq, session, i64, toFloat, floatInput, halfToFloat, floatToHalf };
