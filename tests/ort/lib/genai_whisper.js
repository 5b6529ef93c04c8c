// Drives a Whisper model folder the way onnxruntime-genai's Whisper model
// does (its WhisperState, read from the runtime's source): genai_config.json
// names the encoder and decoder files and the I/O name templates (%d = the
// layer). The encoder is fed the audio features alone and must output
// encoder_hidden_states [batch, frames / 2, encoder.hidden_size] in the
// features' element type (the runtime allocates that output itself) and,
// per decoder layer, the cross-attention keys and values
// [batch, decoder.num_attention_heads, frames / 2, decoder.head_size]. The
// decoder is fed input_ids, the self-attention past (empty at the first
// call: [batch, num_key_value_heads, 0, head_size]) and the encoder's cross
// entries, nothing else; its first call gets the whole prompt (Whisper's
// forced tokens), and its presents become the next call's past.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { session, toFloat } = require('./encdec');

const layerName = (template, i) => template.replace('%d', String(i));

/// Throws unless `cond`, with `what`.
function expect(cond, what) {
  if (!cond) throw new Error(what);
}

class GenaiWhisper {
  /// Loads DIR/genai_config.json and the two sessions it names.
  static async load(dir) {
    const m = new GenaiWhisper();
    m.config = JSON.parse(fs.readFileSync(path.join(dir, 'genai_config.json'), 'utf8'));
    const c = m.config.model;
    expect(c && c.type === 'whisper', `genai_config.json model.type is ${c && c.type}, not whisper`);
    for (const part of ['encoder', 'decoder'])
      expect(c[part] && fs.existsSync(path.join(dir, c[part].filename)),
        `genai_config.json model.${part}.filename ${c[part] && c[part].filename} does not exist`);
    m.encoder = await session(path.join(dir, c.encoder.filename));
    m.decoder = await session(path.join(dir, c.decoder.filename));
    m.layers = c.decoder.num_hidden_layers;
    // The decoder's inputs must be exactly what the runtime feeds.
    const d = c.decoder.inputs;
    const fed = new Set([d.input_ids]);
    for (let i = 0; i < m.layers; i++)
      for (const t of [d.past_key_names, d.past_value_names, d.cross_past_key_names, d.cross_past_value_names])
        fed.add(layerName(t, i));
    const names = m.decoder.inputMetadata.map((x) => x.name);
    for (const n of names) expect(fed.has(n), `decoder input ${n} is not one onnxruntime-genai feeds`);
    for (const n of fed) expect(names.includes(n), `decoder has no input ${n} (genai_config.json names it)`);
    const e = m.encoder.inputMetadata.map((x) => x.name);
    expect(e.length === 1 && e[0] === c.encoder.inputs.audio_features,
      `encoder inputs [${e}] are not [${c.encoder.inputs.audio_features}]`);
    return m;
  }

  /// Runs the encoder on features (an ort tensor [1, mels, frames]) and
  /// checks its outputs against the sizes the runtime allocates; returns
  /// {hidden (ort tensor), cross (name -> ort tensor, decoder input names)}.
  async encode(features) {
    const c = this.config.model;
    const o = c.encoder.outputs;
    const out = await this.encoder.run({ [c.encoder.inputs.audio_features]: features });
    const frames = features.dims[2];
    const hidden = out[o.encoder_hidden_states];
    expect(hidden, `encoder output ${o.encoder_hidden_states} missing`);
    expect(hidden.type === features.type,
      `encoder_hidden_states is ${hidden.type}, the audio features ${features.type}`);
    expect(hidden.dims.join() === [1, frames / 2, c.encoder.hidden_size].join(),
      `encoder_hidden_states [${hidden.dims}] is not [1, ${frames / 2}, ${c.encoder.hidden_size}]`);
    const want = [1, c.decoder.num_attention_heads, frames / 2, c.decoder.head_size].join();
    const cross = {};
    const d = c.decoder.inputs;
    for (let i = 0; i < this.layers; i++)
      for (const [outT, inT] of [[o.cross_present_key_names, d.cross_past_key_names],
        [o.cross_present_value_names, d.cross_past_value_names]]) {
        const t = out[layerName(outT, i)];
        expect(t, `encoder output ${layerName(outT, i)} missing`);
        expect(t.dims.join() === want, `${layerName(outT, i)} [${t.dims}] is not [${want}]`);
        cross[layerName(inT, i)] = t;
      }
    return { hidden, cross };
  }

  /// Empty self-attention past, as the runtime's key/value cache starts.
  emptyPast() {
    const c = this.config.model.decoder;
    const past = {};
    for (let i = 0; i < this.layers; i++)
      for (const t of [c.inputs.past_key_names, c.inputs.past_value_names]) {
        const n = layerName(t, i);
        const meta = this.decoder.inputMetadata.find((x) => x.name === n);
        const dims = [1, c.num_key_value_heads, 0, c.head_size];
        past[n] = new ort.Tensor(meta.type, meta.type === 'float16' ? new Uint16Array(0) : new Float32Array(0), dims);
      }
    return past;
  }

  /// One decoder call on `ids` (a row of tokens) with the self-attention
  /// past (null: the runtime's empty first past); returns {logits
  /// (Float32Array [ids.length, V]), past}.
  async step(encoded, ids, past) {
    const c = this.config.model.decoder;
    const feeds = {
      [c.inputs.input_ids]: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
    };
    Object.assign(feeds, past || this.emptyPast(), encoded.cross);
    const out = await this.decoder.run(feeds);
    const next = {};
    for (let i = 0; i < this.layers; i++) {
      next[layerName(c.inputs.past_key_names, i)] = out[layerName(c.outputs.present_key_names, i)];
      next[layerName(c.inputs.past_value_names, i)] = out[layerName(c.outputs.present_value_names, i)];
    }
    return { logits: Float32Array.from(toFloat(out[c.outputs.logits])), past: next };
  }

  /// Greedy decoding from `start` for `steps` tokens, one token per call;
  /// returns {tokens, logits: Float32Array per step}.
  async greedy(encoded, start, steps) {
    let past = null;
    let tok = start;
    const tokens = [], logits = [];
    for (let j = 0; j < steps; j++) {
      const r = await this.step(encoded, [tok], past);
      past = r.past;
      const l = r.logits;
      let best = 0;
      for (let i = 1; i < l.length; i++) if (l[i] > l[best]) best = i;
      logits.push(l);
      tokens.push(best);
      tok = best;
    }
    return { tokens, logits };
  }
}

module.exports = { GenaiWhisper };
