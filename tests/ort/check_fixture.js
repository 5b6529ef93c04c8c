#!/usr/bin/env node
// Checks archc's ONNX for one Hugging Face fixture (../shared/hf-golden):
//   (a) prefill logits of the batch-2 input match HF's within tolerance;
//   (b) greedy decoding through the KV cache reproduces HF's greedy ids
//       exactly and its step logits within tolerance;
//   (c) prefill of N tokens then decode of M (one by one, and as one chunk)
//       gives the logits of one pass over N + M;
//   (d) batch 2 with left padding matches the unpadded rows;
//   (e) the single-pass model (--no-kv-cache) gives the same logits as (a);
//   (w) -emit=weights lists exactly the checkpoint's tensors (names, shapes).
// Usage: check_fixture.js --archc BIN [--arch FILE.arch] --case DIR --work DIR
//                         [--target portable|ort]
// Without --arch archc compiles the bundled family matching the fixture's
// architectures[0], as for a user who gives it only the config.
// Exit 0 = pass, 1 = fail (a missing fixture too: the suite never skips).
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { readSafetensors } = require('./lib/safetensors');
const { Decoder } = require('./lib/decoder');
const { parseArgs } = require('./lib/args.js');

function emit(args, out, extra) {
  execFileSync(args.archc, [...(args.arch ? [args.arch] : []),
    '--config', path.join(args.case, 'config.json'), '-emit=onnx', '--weights', path.join(args.case, 'model.safetensors'), '-o', out,
    ...(args.target ? ['--target=' + args.target] : []), ...extra],
    { stdio: ['ignore', 'inherit', 'inherit'] });
}

// (w): archc's weight list against the checkpoint's safetensors header.
function checkWeights(args, failures, name) {
  const out = execFileSync(args.archc, [...(args.arch ? [args.arch] : []),
    '--config', path.join(args.case, 'config.json'),
    '-emit=weights'], { encoding: 'utf8' });
  const got = new Map();
  for (const line of out.split('\n')) {
    const m = line.match(/^(\S+) \[([0-9, ]*)\] \S+$/);
    if (m) got.set(m[1], m[2].split(',').filter((d) => d.trim() !== '').map(Number).join(','));
  }
  const want = readSafetensors(path.join(args.case, 'model.safetensors')).tensors;
  const problems = [];
  for (const [n, t] of Object.entries(want)) {
    if (!got.has(n)) problems.push(`missing ${n}`);
    else if (got.get(n) !== t.shape.join(',')) problems.push(`${n} [${got.get(n)}] vs [${t.shape}]`);
  }
  for (const n of got.keys()) if (!(n in want)) problems.push(`unexpected ${n}`);
  const ok = problems.length === 0;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} (w) -emit=weights equals model.safetensors: ` +
    `${got.size} tensors${ok ? '' : '; ' + problems.slice(0, 5).join('; ')}`);
  if (!ok) failures.push('(w) weights');
}

const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);

function maxAbsDiff(actual, aOff, expected, eOff, n) {
  let m = 0;
  for (let i = 0; i < n; i++) m = Math.max(m, Math.abs(actual[aOff + i] - expected[eOff + i]));
  return m;
}

function argmax(data, off, n) {
  let best = 0;
  for (let i = 1; i < n; i++) if (data[off + i] > data[off + best]) best = i;
  return best;
}

async function main() {
  const args = parseArgs(['archc', 'case', 'work']);
  if (!fs.existsSync(path.join(args.case, 'expected.safetensors'))) {
    console.log(`FAIL: fixture ${args.case} not found (../shared/hf-golden absent)`);
    process.exit(1);
  }
  fs.mkdirSync(args.work, { recursive: true });
  const name = path.basename(args.case);
  const kvModel = path.join(args.work, 'model.onnx');
  const flatModel = path.join(args.work, 'single', 'model.onnx');
  fs.mkdirSync(path.dirname(flatModel), { recursive: true });
  emit(args, kvModel, []);
  emit(args, flatModel, ['--no-kv-cache']);

  const exp = readSafetensors(path.join(args.case, 'expected.safetensors'));
  const ids = exp.tensors.input_ids, ref = exp.tensors.logits;
  const [B, S] = ids.shape, V = ref.shape[2];
  let maxRef = 0;
  for (const v of ref.data) maxRef = Math.max(maxRef, Math.abs(v));
  const tol = 1e-4 * Math.max(1, maxRef);
  const rows = range(0, B).map((b) => range(0, S).map((s) => Number(ids.data[b * S + s])));
  const failures = [];
  const check = (label, diff) => {
    const ok = diff <= tol;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${label}: max|diff| = ${diff.toExponential(3)} (tol ${tol.toExponential(3)})`);
    if (!ok) failures.push(label);
  };

  checkWeights(args, failures, name);
  const dec = await Decoder.load(kvModel);
  // (a) full prefill, batch 2.
  const ones = (n) => new Array(n).fill(1);
  const full = await dec.step(rows, rows.map(() => ones(S)), rows.map(() => range(0, S)), dec.emptyState(B));
  check('(a) prefill logits', maxAbsDiff(full.logits, 0, ref.data, 0, B * S * V));

  // (b) greedy decoding through the cache.
  const gIds = exp.tensors.greedy_ids, gLogits = exp.tensors.greedy_logits;
  const steps = gLogits.shape[1];
  const s0 = gIds.shape[1] - steps;
  const prompt = range(0, s0).map((i) => Number(gIds.data[i]));
  let r = await dec.step([prompt], [ones(s0)], [range(0, s0)], dec.emptyState(1));
  const tokens = [];
  let stepDiff = 0;
  let last = (s0 - 1) * r.vocab;
  for (let j = 0; j < steps; j++) {
    stepDiff = Math.max(stepDiff, maxAbsDiff(r.logits, last, gLogits.data, j * V, V));
    const t = argmax(r.logits, last, V);
    tokens.push(t);
    if (j + 1 === steps) break;
    const pos = s0 + j;
    r = await dec.step([[t]], [ones(pos + 1)], [[pos]], r.state);
    last = 0;
  }
  const want = range(s0, s0 + steps).map((i) => Number(gIds.data[i]));
  const same = tokens.every((t, i) => t === want[i]);
  console.log(`${same ? 'ok  ' : 'FAIL'} ${name} (b) greedy ids: got [${tokens}] want [${want}]`);
  if (!same) failures.push('(b) greedy ids');
  check('(b) greedy step logits', stepDiff);

  // (c) prefill N then decode M equals one pass over N + M (row 0).
  const n = Math.max(1, S - 3);
  let p = await dec.step([rows[0].slice(0, n)], [ones(n)], [range(0, n)], dec.emptyState(1));
  let diffC = maxAbsDiff(p.logits, 0, full.logits, 0, n * V);
  let st = p.state;
  for (let t = n; t < S; t++) {
    const q = await dec.step([[rows[0][t]]], [ones(t + 1)], [[t]], st);
    diffC = Math.max(diffC, maxAbsDiff(q.logits, 0, full.logits, t * V, V));
    st = q.state;
  }
  check(`(c) prefill ${n} + decode ${S - n} one by one`, diffC);
  const chunk = await dec.step([rows[0].slice(n)], [ones(S)], [range(n, S)], p.state);
  check(`(c) prefill ${n} + decode ${S - n} as one chunk`, maxAbsDiff(chunk.logits, 0, full.logits, n * V, (S - n) * V));

  // (d) batch 2, row 1 left-padded by 2 (real tokens rows[1][0..S-2)).
  const pad = 2, real = S - pad;
  const padded = [rows[0], [0, 0, ...rows[1].slice(0, real)]];
  const mask = [ones(S), [0, 0, ...ones(real)]];
  const positions = [range(0, S), [1, 1, ...range(0, real)]];
  const pb = await dec.step(padded, mask, positions, dec.emptyState(2));
  const alone = await dec.step([rows[1].slice(0, real)], [ones(real)], [range(0, real)], dec.emptyState(1));
  let diffD = maxAbsDiff(pb.logits, 0, full.logits, 0, S * V);
  diffD = Math.max(diffD, maxAbsDiff(pb.logits, (S + pad) * V, alone.logits, 0, real * V));
  // One decode step on top of the padded batch.
  const nextTok = [[rows[0][0]], [rows[0][0]]];
  const pd = await dec.step(nextTok, [ones(S + 1), [0, 0, ...ones(real + 1)]], [[S], [real]], pb.state);
  const ad = await dec.step([[rows[0][0]]], [ones(real + 1)], [[real]], alone.state);
  diffD = Math.max(diffD, maxAbsDiff(pd.logits, V, ad.logits, 0, V));
  check('(d) left-padded batch matches unpadded rows', diffD);

  // (e) the single-pass model.
  const flat = await Decoder.load(flatModel);
  const f = await flat.step(rows, rows.map(() => ones(S)), rows.map(() => range(0, S)), {});
  check('(e) single-pass model logits', maxAbsDiff(f.logits, 0, ref.data, 0, B * S * V));

  if (failures.length) {
    console.log(`${name}: ${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log(`${name}: all checks passed`);
}

main().catch((e) => { console.error(e); process.exit(1); });
