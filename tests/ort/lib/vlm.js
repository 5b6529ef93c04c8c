// Drives an archc-emitted vision-language package (OUT/onnx/vision_encoder,
// embed_tokens, decoder_model_merged) in ONNX Runtime as onnxruntime-genai
// would: the vision encoder turns pixel values into image features (with
// the family's side channels: Gemma 3's image marker, Qwen3-VL's deepstack
// features), the embedding merges them into the token embeddings, the
// decoder runs on those with its KV cache (past_key_values.* fed from
// present.*).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

/// Float32 values -> IEEE binary16 bits (round to nearest even).
function floatToHalf(values) {
  const out = new Uint16Array(values.length);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < values.length; i++) {
    f[0] = values[i];
    const x = u[0];
    const sign = (x >>> 16) & 0x8000;
    const exp = (x >>> 23) & 0xff;
    let mant = x & 0x7fffff;
    if (exp === 0xff) { out[i] = sign | 0x7c00 | (mant ? 0x200 : 0); continue; }
    let e = exp - 127 + 15;
    if (e >= 0x1f) { out[i] = sign | 0x7c00; continue; }
    if (e <= 0) {
      if (e < -10) { out[i] = sign; continue; }
      mant |= 0x800000;
      const shift = 14 - e;
      let h = mant >>> shift;
      const rem = mant & ((1 << shift) - 1), half = 1 << (shift - 1);
      if (rem > half || (rem === half && (h & 1))) h++;
      out[i] = sign | h;
      continue;
    }
    let h = (e << 10) | (mant >>> 13);
    const rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
    out[i] = sign | h;
  }
  return out;
}

/// IEEE binary16 bits -> Float32Array.
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

/// A tensor's values as numbers (float16 decoded).
function values(t) {
  return t.type === 'float16' ? halfToFloat(t.data) : t.data;
}

const i64 = (arr, dims) => new ort.Tensor('int64', BigInt64Array.from(arr.map(BigInt)), dims);
const bool = (arr, dims) => new ort.Tensor('bool', Uint8Array.from(arr.map((v) => (v ? 1 : 0))), dims);

/// Reads a protobuf varint at `pos`: [value, next position].
function varint(buf, pos) {
  let v = 0, shift = 0, b;
  do {
    b = buf[pos++];
    v += (b & 0x7f) * 2 ** shift;
    shift += 7;
  } while (b & 0x80);
  return [v, pos];
}
function encodeVarint(v) {
  const out = [];
  do {
    let b = v % 128;
    v = Math.floor(v / 128);
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return Buffer.from(out);
}
/// The fields of a protobuf message: {field, wire, start, end, body}.
function fields(buf) {
  const out = [];
  for (let pos = 0; pos < buf.length;) {
    const start = pos;
    let key;
    [key, pos] = varint(buf, pos);
    const field = Math.floor(key / 8), wire = key & 7;
    let body = null;
    if (wire === 0) [, pos] = varint(buf, pos);
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      let n;
      [n, pos] = varint(buf, pos);
      body = buf.subarray(pos, pos + n);
      pos += n;
    } else throw new Error(`protobuf wire type ${wire}`);
    out.push({ field, wire, start, end: pos, body });
  }
  return out;
}
/// The model without the initializer `name` (ModelProto.graph = 7,
/// GraphProto.initializer = 5, TensorProto.name = 8): a graph input with a
/// default becomes a plain input.
function withoutInitializer(model, name) {
  const parts = [];
  for (const f of fields(model)) {
    if (f.field !== 7 || f.wire !== 2) { parts.push(model.subarray(f.start, f.end)); continue; }
    const graph = [];
    for (const g of fields(f.body)) {
      const named = g.field === 5 && g.wire === 2 && fields(g.body).some((t) =>
        t.field === 8 && t.wire === 2 && t.body.toString('utf8') === name);
      if (!named) graph.push(f.body.subarray(g.start, g.end));
    }
    const body = Buffer.concat(graph);
    parts.push(encodeVarint(7 * 8 + 2), encodeVarint(body.length), body);
  }
  return Buffer.concat(parts);
}

class VlmPackage {
  /// The package of a model folder: OUT/onnx/vision_encoder*.onnx,
  /// embed_tokens*.onnx and decoder_model_merged*.onnx (the files
  /// genai_config.json names; `suffix` '' or '_fp16').
  static async load(dir, suffix = '') {
    const p = new VlmPackage();
    const opts = { graphOptimizationLevel: process.env.ARCHC_ORT_OPT || 'all', intraOpNumThreads: 1 };
    p.genai = JSON.parse(fs.readFileSync(path.join(dir, 'genai_config.json'), 'utf8'));
    const file = (session) => path.join(dir, 'onnx', `${session}${suffix}.onnx`);
    const genaiFile = (section) => path.join(dir, p.genai.model[section].filename);
    // genai_config.json names the same files.
    for (const [section, session] of [['vision', 'vision_encoder'], ['embedding', 'embed_tokens'],
      ['decoder', 'decoder_model_merged']])
      if (path.resolve(genaiFile(section)) !== path.resolve(file(session)))
        throw new Error(`genai_config.json's ${section} is ${genaiFile(section)}, not ${file(session)}`);
    p.vision = await ort.InferenceSession.create(file('vision_encoder'), opts);
    // onnxruntime-genai feeds the embedding's image_features by name (the
    // C API accepts an input that has a default); onnxruntime-node passes
    // only the inputs a session lists, so the default is removed here and
    // the features fed as genai feeds them. The model's external data is
    // resolved from its folder.
    const embedBytes = withoutInitializer(fs.readFileSync(file('embed_tokens')), 'image_features');
    const cwd = process.cwd();
    process.chdir(path.join(dir, 'onnx'));
    try {
      p.embedding = await ort.InferenceSession.create(embedBytes, opts);
    } finally {
      process.chdir(cwd);
    }
    p.decoder = await ort.InferenceSession.create(file('decoder_model_merged'), opts);
    const dec = p.decoder.inputMetadata;
    p.stateInputs = dec.filter((m) => m.name.startsWith('past_key_values.'));
    p.decoderInputs = new Map(dec.map((m) => [m.name, m]));
    p.floatType = p.decoderInputs.get('inputs_embeds').type;
    // onnxruntime-genai allocates the image features and the embedding
    // output [batch, seq, decoder.hidden_size]: the width the three graphs
    // pass on (side channels included).
    const width = p.decoderInputs.get('inputs_embeds').shape.at(-1);
    const widths = {
      'genai_config.json decoder.hidden_size': p.genai.model.decoder.hidden_size,
      'embedding image_features': p.embedding.inputMetadata.find((m) => m.name === 'image_features').shape.at(-1),
      'vision_encoder image_features': p.vision.outputMetadata.find((m) => m.name === 'image_features').shape.at(-1),
    };
    for (const [what, w] of Object.entries(widths))
      if (w !== width) throw new Error(`${what} is ${w}, the decoder's inputs_embeds width ${width}`);
    return p;
  }

  /// A float tensor in the package's activation type.
  floatTensor(data, dims) {
    return this.floatType === 'float16'
      ? new ort.Tensor('float16', floatToHalf(data), dims)
      : new ort.Tensor('float32', Float32Array.from(data), dims);
  }

  /// Runs the vision encoder: `inputs` maps its input names to
  /// {dtype, shape, data} (safetensors tensors). Returns its outputs.
  async encode(inputs) {
    const feeds = {};
    for (const m of this.vision.inputMetadata) {
      const t = inputs[m.name];
      if (!t) throw new Error(`vision encoder input ${m.name} not given`);
      // Pixel values in the input's own type (float32 also in a float16
      // package: the vision encoder takes what image processors give).
      feeds[m.name] = m.type === 'int64' ? new ort.Tensor('int64', t.data, t.shape)
        : m.type === 'float16' ? new ort.Tensor('float16', floatToHalf(t.data), t.shape)
          : new ort.Tensor(m.type, Float32Array.from(t.data), t.shape);
    }
    return this.vision.run(feeds);
  }

  /// Zero-row features for text-only steps ([0, width]).
  emptyLike(name) {
    const m = this.embedding.inputMetadata.find((x) => x.name === name);
    const shape = m.shape.map((d) => (typeof d === 'number' ? d : 0));
    return new ort.Tensor(m.type, m.type === 'float16' ? new Uint16Array(0) : new Float32Array(0), shape);
  }

  emptyState(batch) {
    const state = {};
    for (const m of this.stateInputs) {
      const shape = m.shape.map((d) => (typeof d === 'number' ? d : d === 'batch_size' ? batch : 0));
      const n = shape.reduce((a, b) => a * b, 1);
      state[m.name] = new ort.Tensor(m.type, m.type === 'float16' ? new Uint16Array(n) : new Float32Array(n), shape);
    }
    return state;
  }

  /// The embedding graph over token rows with `features` (an ort tensor,
  /// or null for a text-only step): its outputs by name (inputs_embeds).
  async embed(rows, features) {
    const b = rows.length, s = rows[0].length;
    return this.embedding.run({
      input_ids: i64(rows.flat(), [b, s]),
      image_features: features || this.emptyLike('image_features'),
    });
  }

  /// One decoder call on the embedding graph's outputs `embedded`. The
  /// decoder is fed what transformers.js's image-text-to-text forward feeds
  /// it: inputs_embeds (with whatever side channels the graphs carry), the
  /// mask, positions and the cache; any other decoder input is an error.
  async decode(embedded, mask, positions, state) {
    const embeds = embedded.inputs_embeds;
    const [b, s] = embeds.dims;
    const feeds = { inputs_embeds: embeds, ...state };
    feeds.attention_mask = i64(mask.flat(), [b, mask[0].length]);
    const pos = this.decoderInputs.get('position_ids');
    feeds.position_ids = i64(positions.flat(2), pos.shape.length === 3 ? [3, b, s] : [b, s]);
    for (const [name, m] of this.decoderInputs)
      if (!(name in feeds))
        throw new Error(`decoder input ${name} (${m.type}) is none of inputs_embeds, attention_mask, ` +
          'position_ids and the cache, which is all transformers.js feeds');
    const out = await this.decoder.run(feeds);
    const next = {};
    for (const [name, t] of Object.entries(out))
      if (name.startsWith('present.')) next['past_key_values.' + name.slice('present.'.length)] = t;
    return { logits: values(out.logits), dims: out.logits.dims, state: next };
  }
}

module.exports = { VlmPackage, values, i64, bool, floatToHalf, halfToFloat };
