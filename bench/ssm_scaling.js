#!/usr/bin/env node
// Prefill scaling of one Mamba-2 layer in ONNX Runtime (CPU): the chunked
// SSD lowering is linear in the prompt, so the time per prompt token stays
// flat from 256 to 4,096 tokens; a decode step after a 4,096-token prompt
// costs what one after 256 does (one state update per token). A Mamba-1
// layer (a token-by-token Scan, also linear) and one attention layer of the
// same width (its prefill grows with S^2) are the contrast.
//   node bench/ssm_scaling.js [--archc BIN] [--runs N] [--threads T (default 1)]
// Times are CPU time of the process (user + system, ORT's threads included).
// Results go to docs/performance.md.
'use strict';
const path = require('path');
const os = require('os');
const fs = require('fs');
const { execFileSync } = require('child_process');
const ROOT = path.dirname(__dirname);
const ort = require(path.join(ROOT, 'tests/ort/node_modules/onnxruntime-node'));

const argv = process.argv.slice(2);
const opt = (k, d) => { const i = argv.indexOf(k); return i >= 0 ? argv[i + 1] : d; };
const archc = opt('--archc', path.join(ROOT, 'build/bin/archc'));
const runs = Number(opt('--runs', '5'));
const threads = Number(opt('--threads', '1'));
const LENGTHS = [256, 512, 1024, 2048, 4096];

function emit(config, out) {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  execFileSync(archc, ['--config', path.join(ROOT, 'archs/configs/bench', config), '-emit=onnx',
    '--init=random', '--seed=1', '-o', out], { stdio: 'inherit' });
}

function zeros(meta, batch, past) {
  const shape = meta.shape.map((d) => (typeof d === 'number' ? d : d === 'batch_size' ? batch : past));
  return new ort.Tensor('float32', new Float32Array(shape.reduce((a, b) => a * b, 1)), shape);
}

function feeds(session, s, past, state) {
  const f = {};
  const ids = BigInt64Array.from({ length: s }, (_, i) => BigInt((i * 7919) % 1000));
  f.input_ids = new ort.Tensor('int64', ids, [1, s]);
  for (const m of session.inputMetadata) {
    if (m.name === 'attention_mask')
      f.attention_mask = new ort.Tensor('int64', new BigInt64Array(past + s).fill(1n), [1, past + s]);
    else if (m.name === 'position_ids')
      f.position_ids = new ort.Tensor('int64', BigInt64Array.from({ length: s }, (_, i) => BigInt(past + i)), [1, s]);
    else if (m.name.startsWith('past_key_values.'))
      f[m.name] = state ? state[m.name] : zeros(m, 1, past);
  }
  return f;
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// CPU time of this process (ONNX Runtime's threads included), in ms: on a
// shared machine it is steadier than wall time.
async function timed(session, f) {
  const c0 = process.cpuUsage();
  const out = await session.run(f);
  const c = process.cpuUsage(c0);
  return [(c.user + c.system) / 1000, out];
}

async function bench(label, config) {
  const model = path.join(os.tmpdir(), 'archc-ssm-bench', label, 'model.onnx');
  emit(config, model);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  console.log(`== ${label} (${config}), ${threads} threads, median of ${runs}`);
  console.log('prompt  prefill CPU ms  CPU us/token   decode CPU ms (one token after the prompt)');
  for (const s of LENGTHS) {
    const f = feeds(session, s, 0, null);
    await session.run(f); // warm-up
    const times = [];
    let out;
    for (let r = 0; r < runs; r++) {
      const [ms, o] = await timed(session, f);
      times.push(ms);
      out = o;
    }
    const state = {};
    for (const [n, t] of Object.entries(out))
      if (n.startsWith('present.')) state['past_key_values.' + n.slice('present.'.length)] = t;
    const d = feeds(session, 1, s, state);
    await session.run(d);
    const dt = [];
    for (let r = 0; r < runs; r++) dt.push((await timed(session, d))[0]);
    const p = median(times);
    console.log(`${String(s).padStart(6)}  ${p.toFixed(1).padStart(14)}  ${(1000 * p / s).toFixed(1).padStart(12)}` +
      `   ${median(dt).toFixed(2).padStart(13)}`);
  }
}

(async () => {
  await bench('mamba2-layer', 'mamba2-bench-1l.json');
  await bench('mamba1-layer', 'mamba-bench-1l.json');
  await bench('attention-layer', 'llama-bench-1l.json');
})().catch((e) => { console.error(e); process.exit(1); });
