#!/usr/bin/env node
// Times archc models in ONNX Runtime (CPU), interleaved so that every model
// sees the same machine load: each round runs, for every model in turn, one
// prefill of P tokens, the same prefill again at once (a warm, repeated
// prefill: the first follows the other model's or its own decode steps, whose
// smaller shapes leave ONNX Runtime's buffers sized for them) and --decodes
// decode steps at past P (the prefill's cached state fed each time). Reports
// per model the minimum and median over rounds (the minimum is the least
// disturbed by other load). One JSON line per model.
// Usage: quant_bench.js MODEL.onnx [MODEL.onnx ...] --prefill P --rounds R
//        --decodes D --threads T
'use strict';
const path = require('path');
const ort = require(path.join(__dirname, '..', 'tests', 'ort', 'node_modules', 'onnxruntime-node'));

function arg(name, dflt) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const i64 = (rows) => new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);

async function load(model, threads) {
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', intraOpNumThreads: threads, interOpNumThreads: 1 });
  const m = { model, session, loadS: Number(process.hrtime.bigint() - t0) / 1e9, prefill: [], prefillRepeat: [], decode: [] };
  m.inputs = session.inputMetadata;
  m.empty = {};
  for (const x of m.inputs.filter((i) => i.name.startsWith('past_key_values.'))) {
    const shape = x.shape.map((d) => (typeof d === 'number' ? d : d === 'batch_size' ? 1 : 0));
    m.empty[x.name] = new ort.Tensor(x.type, new Float32Array(shape.reduce((a, b) => a * b, 1)), shape);
  }
  return m;
}

function feeds(m, ids, pos, total, state) {
  const f = { input_ids: i64([ids]), attention_mask: i64([new Array(total).fill(1)]) };
  if (m.inputs.some((i) => i.name === 'position_ids')) f.position_ids = i64([pos]);
  return Object.assign(f, state);
}

async function timed(f) {
  const s = process.hrtime.bigint();
  const r = await f();
  return [Number(process.hrtime.bigint() - s) / 1e6, r];
}

async function main() {
  const models = process.argv.slice(2).filter((a, i, all) => a.endsWith('.onnx') && !(all[i - 1] || '').startsWith('--'));
  const P = arg('prefill', 128), rounds = arg('rounds', 5), decodes = arg('decodes', 5), threads = arg('threads', 2);
  const ms = [];
  for (const model of models) ms.push(await load(model, threads));
  const ids = Array.from({ length: P }, (_, i) => (i * 7919) % 1000 + 10);
  const pos = Array.from({ length: P }, (_, i) => i);
  for (let r = 0; r <= rounds; r++) {
    for (const m of ms) {
      const [tp] = await timed(() => m.session.run(feeds(m, ids, pos, P, m.empty)));
      const [tr, out] = await timed(() => m.session.run(feeds(m, ids, pos, P, m.empty)));
      const state = {};
      for (const [name, t] of Object.entries(out))
        if (name.startsWith('present.')) state['past_key_values.' + name.slice(8)] = t;
      for (let d = 0; d < decodes; d++) {
        const [td] = await timed(() => m.session.run(feeds(m, [42], [P], P + 1, state)));
        if (r > 0) m.decode.push(td); // round 0 warms up
      }
      if (r > 0) m.prefill.push(tp);
      if (r > 0) m.prefillRepeat.push(tr);
    }
  }
  for (const m of ms)
    console.log(JSON.stringify({ model: m.model, load_s: m.loadS, prefill_tokens: P,
      prefill_ms: Math.min(...m.prefill), prefill_median_ms: median(m.prefill),
      prefill_repeat_median_ms: median(m.prefillRepeat),
      decode_past: P, decode_ms: Math.min(...m.decode), decode_median_ms: median(m.decode) }));
}

main().catch((e) => { console.error(e); process.exit(1); });
