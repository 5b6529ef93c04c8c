#!/usr/bin/env node
// The timing half of bench/run_ort_benchmarks.py: runs one plan (JSON file,
// written by the driver) in ONNX Runtime (CPU), round by round, so that
// every measurement of a round sees the same machine load. Each round:
//   - the C bandwidth probe (a process: median pass over its buffer);
//   - ORT's large GEMV ([1, K] x [K, N], ~1 GB of f32 weights): median run;
//   - ORT's sgemm ([M, K] x [K, N]): median run;
//   - per model: decode steps at each past length (a synthetic cache of that
//     length, the same step repeated: median step), in two ways: `decode`
//     returns every output to JavaScript, as transformers.js does (the
//     binding copies each `present.*` into a new ArrayBuffer, the whole
//     cache on every step); `decode_graph` fetches only the logits, so the
//     step is the graph's own work (the presents are still computed, they
//     feed the attention), as for a client that binds its outputs in place
//     (onnxruntime-genai). Steps of both ways at every length interleave
//     one by one, so that a step at the last past has one at the first past
//     beside it under the same load (`last_vs_first`, `graph_last_vs_first`:
//     medians of those pairs' ratios); and one prefill.
// Prints one JSON object: {rounds: [{probe_gbs, gemv_ms, sgemm_ms,
// models: {label: {decode: {past: ms}, decode_graph: {past: ms},
// last_vs_first, graph_last_vs_first, prefill_ms}}}], load_s: {label: s}}.
// Usage: ort_bench.js PLAN.json
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const ort = require(path.join(__dirname, '..', 'tests', 'ort', 'node_modules', 'onnxruntime-node'));

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const i64 = (rows) => new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)),
  [rows.length, rows[0].length]);
const now = () => Number(process.hrtime.bigint()) / 1e6;

async function session(model, threads) {
  return ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential' });
}

function randomTensor(type, shape) {
  const n = shape.reduce((a, b) => a * b, 1);
  if (type === 'float16') {
    // 0x3000-ish halves: small positive values, no NaN/Inf patterns.
    const a = new Uint16Array(n);
    for (let i = 0; i < n; i++) a[i] = 0x2000 + (i * 2654435761 >>> 22);
    return new ort.Tensor('float16', a, shape);
  }
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = ((i * 2654435761 >>> 8) % 2001 - 1000) * 1e-4;
  return new ort.Tensor('float32', a, shape);
}

// Feeds of one call: `s` new tokens after `past` cached ones (batch 1).
function feeds(m, past, s) {
  const f = {
    input_ids: i64([Array.from({ length: s }, (_, i) => ((i * 7919) % 1000 + 10) % m.spec.vocab)]),
    attention_mask: i64([new Array(past + s).fill(1)]),
  };
  if (m.inputs.some((i) => i.name === 'position_ids'))
    f.position_ids = i64([Array.from({ length: s }, (_, i) => past + i)]);
  for (const x of m.inputs.filter((i) => i.name.startsWith('past_key_values.'))) {
    const shape = x.shape.map((d) => (typeof d === 'number' ? d : d === 'batch_size' ? 1 : past));
    const key = x.name + ':' + shape.join('x');
    if (!m.pastCache[key]) m.pastCache[key] = randomTensor(x.type, shape);
    f[x.name] = m.pastCache[key];
  }
  return f;
}

// Milliseconds of one call; `fetches` undefined returns every output.
async function timeRun(sess, f, fetches) {
  const s = now();
  await sess.run(f, fetches);
  return now() - s;
}

async function timeRuns(sess, f, runs) {
  const t = [];
  for (let i = 0; i < runs; i++) t.push(await timeRun(sess, f));
  return median(t);
}

// The two fetch ways of a decode step and the result keys of each.
const DECODE_WAYS = [
  { fetches: undefined, steps: 'decode', pair: 'last_vs_first' },
  { fetches: ['logits'], steps: 'decode_graph', pair: 'graph_last_vs_first' },
];

// Decode steps of one model at each of its past lengths and in both fetch
// ways, interleaved.
async function timeDecodes(m) {
  const pasts = m.spec.pasts;
  const fs = pasts.map((p) => feeds(m, p, 1));
  const t = DECODE_WAYS.map(() => pasts.map(() => []));
  for (let i = 0; i < m.spec.decodes; i++)
    for (const [w, way] of DECODE_WAYS.entries())
      for (const [j, f] of fs.entries()) t[w][j].push(await timeRun(m.sess, f, way.fetches));
  const res = {};
  for (const [w, way] of DECODE_WAYS.entries()) {
    res[way.steps] = Object.fromEntries(pasts.map((p, j) => [p, median(t[w][j])]));
    const [first, last] = [t[w][0], t[w][pasts.length - 1]];
    res[way.pair] = median(first.map((ms, i) => last[i] / ms));
  }
  return res;
}

async function main() {
  const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const threads = plan.threads;
  const loadS = {};
  const gemv = await session(plan.gemv.model, threads);
  const gemvFeed = { x: randomTensor('float32', [1, plan.gemv.k]) };
  const sgemm = await session(plan.sgemm.model, threads);
  const sgemmFeed = { x: randomTensor('float32', [plan.sgemm.m, plan.sgemm.k]) };
  const models = [];
  for (const spec of plan.models) {
    const t0 = now();
    const sess = await session(spec.path, threads);
    loadS[spec.label] = (now() - t0) / 1e3;
    models.push({ spec, sess, inputs: sess.inputMetadata, pastCache: {} });
  }
  const rounds = [];
  for (let r = 0; r <= plan.rounds; r++) { // round 0 warms up, not reported
    const round = { models: {} };
    const probe = execFileSync(plan.probe.bin,
      [String(plan.probe.mib), String(threads), String(plan.probe.passes)], { encoding: 'utf8' });
    round.probe_gbs = Number(probe.trim().split(/\s+/)[0]);
    round.gemv_ms = await timeRuns(gemv, gemvFeed, plan.gemv.runs);
    round.sgemm_ms = await timeRuns(sgemm, sgemmFeed, plan.sgemm.runs);
    for (const m of models) {
      const res = await timeDecodes(m);
      if (m.spec.prefill > 0)
        res.prefill_ms = await timeRuns(m.sess, feeds(m, 0, m.spec.prefill), 1);
      round.models[m.spec.label] = res;
    }
    if (r > 0) rounds.push(round);
    process.stderr.write(`round ${r}/${plan.rounds} done\n`);
  }
  process.stdout.write(JSON.stringify({ rounds, load_s: loadS }) + '\n');
}

main().catch((e) => { console.error(e); process.exit(1); });
