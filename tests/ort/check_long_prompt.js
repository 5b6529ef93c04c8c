#!/usr/bin/env node
// Long-prompt consistency of a stateful model in ONNX Runtime: one prefill of
// N tokens equals a prefill of M tokens followed by N - M single-token decode
// steps, and a prefill of M followed by the rest as one chunk. With N well
// beyond the SSD lowering's chunk length this crosses many chunk boundaries
// (and a padded last chunk) in the chunked prefill while the decode steps are
// the plain recurrence, so it checks the chunked form against the recurrence
// on a long sequence.
// The weights are a fixture's (its model.safetensors beside the config):
// trained-like decays (HF's A_log and dt_bias initialisation) keep a long
// memory, so early chunks matter for late logits.
// Usage: check_long_prompt.js --archc BIN --case DIR --work DIR [--len N] [--split M]
// Exit 0 = pass, 1 = fail, 77 = fixture folder absent (skipped).
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { Decoder } = require('./lib/decoder');

const argv = process.argv.slice(2);
const a = {};
for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
for (const k of ['archc', 'case', 'work'])
  if (!a[k]) { console.error(`missing --${k}`); process.exit(2); }
const N = Number(a.len || 300), M = Number(a.split || 229);

const range = (x, y) => Array.from({ length: y - x }, (_, i) => x + i);
const ones = (n) => new Array(n).fill(1);

async function main() {
  if (!fs.existsSync(path.join(a.case, 'model.safetensors'))) {
    console.log(`FAIL: fixture ${a.case} not found (../shared/hf-golden absent)`);
    process.exit(1);
  }
  fs.mkdirSync(a.work, { recursive: true });
  const model = path.join(a.work, 'model.onnx');
  execFileSync(a.archc, ['--config', path.join(a.case, 'config.json'), '-emit=onnx', '--weights',
    path.join(a.case, 'model.safetensors'), '-o', model], { stdio: ['ignore', 'inherit', 'inherit'] });
  const dec = await Decoder.load(model);
  const ids = range(0, N).map((i) => (i * 37 + 11) % 200);
  const full = await dec.step([ids], [ones(N)], [range(0, N)], dec.emptyState(1));
  const V = full.vocab;
  let maxRef = 0;
  for (const v of full.logits) maxRef = Math.max(maxRef, Math.abs(v));
  const tol = 1e-4 * Math.max(1, maxRef);
  const diff = (x, xo, y, yo, n) => {
    let m = 0;
    for (let i = 0; i < n; i++) m = Math.max(m, Math.abs(x[xo + i] - y[yo + i]));
    return m;
  };
  const p = await dec.step([ids.slice(0, M)], [ones(M)], [range(0, M)], dec.emptyState(1));
  let d1 = diff(p.logits, 0, full.logits, 0, M * V);
  let st = p.state;
  for (let t = M; t < N; t++) {
    const q = await dec.step([[ids[t]]], [ones(t + 1)], [[t]], st);
    d1 = Math.max(d1, diff(q.logits, 0, full.logits, t * V, V));
    st = q.state;
  }
  const c = await dec.step([ids.slice(M)], [ones(N)], [range(M, N)], p.state);
  const d2 = diff(c.logits, 0, full.logits, M * V, (N - M) * V);
  const name = path.basename(a.case);
  let ok = true;
  for (const [label, d] of [[`prefill ${M} + ${N - M} decode steps`, d1], [`prefill ${M} + one chunk of ${N - M}`, d2]]) {
    const pass = d <= tol;
    ok &&= pass;
    console.log(`${pass ? 'ok  ' : 'FAIL'} ${name} ${label} vs prefill ${N}: max|diff| = ${d.toExponential(3)} (tol ${tol.toExponential(3)})`);
  }
  process.exit(ok ? 0 : 1);
}

main().catch((e) => { console.error(e); process.exit(1); });
