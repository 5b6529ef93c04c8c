#!/usr/bin/env node
// Checks a reduced-precision emission (--dtype=f16) of one Hugging Face
// fixture in ONNX Runtime the way check_fixture.js checks float32: the model
// loads and runs with float16 weights, activations and KV cache, and
//   (a) its prefill logits stay within the family's half-precision bound of
//       the expected logits;
//   (b) greedy decoding through the float16 cache gives the expected 8
//       tokens, and
//   (b') each cached step's logits stay within the same bound.
// The expected run is the fixture's (HF's float32), or with --expected FILE
// another in its format: tests/reference/rounded_expected.py's, the numpy
// reference over the checkpoint rounded as the model stores it, which the
// ctests use (docs/testing.md, "Half precision").
// The bound is measured, per family (tests/ort/f16_bounds.json: the largest
// error over the family's fixtures, with headroom), times max(1, max|logit|)
// of the fixture. The first greedy token must be the expected one whatever
// the gaps; a later token may differ only at a step whose own top-1/top-2
// gap the expected run gives within twice the bound (a tie the bound says
// half precision cannot resolve), and comparing stops there.
// Usage: check_dtype.js --archc BIN [--arch FILE.arch] --case DIR --work DIR
//                       --dtype f16 [--target portable|ort] [--bounds FILE]
//                       [--expected FILE] [--rel-tol R] [--measure]
//                       [--round-weights]
// --rel-tol overrides the family's bound; --measure prints the measured
// relative error as JSON for scripts/measure_f16_bounds.py and checks
// nothing. --round-weights runs the float32 graph instead, over the
// checkpoint with every tensor the --dtype model stores in that dtype
// rounded to it (round to nearest even) and back: the error half-precision
// weights cost on their own, whatever the graph computes in. Exit 0 = pass,
// 1 = fail.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { readSafetensors, writeSafetensors } = require('./lib/safetensors');
const { Decoder } = require('./lib/decoder');

function parseArgs() {
  const a = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (k === 'measure' || k === 'round-weights') a[k] = true;
    else a[k] = argv[++i];
  }
  for (const k of ['archc', 'case', 'work', 'dtype'])
    if (!a[k]) { console.error(`missing --${k}`); process.exit(2); }
  return a;
}

/// The family's bound: the fixture's architectures[0] in the bounds file.
function familyBound(a, cls) {
  if (a['rel-tol']) return Number(a['rel-tol']);
  const file = a.bounds || path.join(__dirname, 'f16_bounds.json');
  const bounds = JSON.parse(fs.readFileSync(file, 'utf8')).bounds;
  const b = bounds[cls];
  if (b === undefined) {
    console.log(`FAIL: ${file} has no half-precision bound for ${cls}: measure one ` +
      '(scripts/measure_f16_bounds.py)');
    process.exit(1);
  }
  return b[a.target === 'ort' ? 'ort' : 'portable'] ?? b.portable;
}

/// Rounds float32 values in place to the nearest (ties to even) float16 or
/// bfloat16 value, kept as float32.
function roundTo(data, dtype) {
  const u = new Uint32Array(data.buffer, data.byteOffset, data.length);
  for (let i = 0; i < data.length; i++) {
    const x = data[i];
    if (!Number.isFinite(x)) continue;
    if (dtype === 'bf16') {
      u[i] = (u[i] + 0x7fff + ((u[i] >>> 16) & 1)) & 0xffff0000;
      continue;
    }
    // float16: 11 significant bits, quantum 2^-24 below the normal range.
    const e = Math.max(((u[i] >>> 23) & 0xff) - 127, -14);
    const q = 2 ** (e - 10);
    const v = Math.abs(x) / q; // exact
    let r = Math.floor(v);
    if (v - r > 0.5 || (v - r === 0.5 && r % 2 === 1)) r += 1;
    const y = r * q;
    data[i] = y > 65504 ? Math.sign(x) * Infinity : Math.sign(x) * y;
  }
}

/// The fixture's checkpoint with the tensors the `dtype` model stores in
/// that dtype (archc -emit=weights) rounded to it; returns its path.
function roundedWeights(a) {
  const listed = execFileSync(a.archc, [...(a.arch ? [a.arch] : []), '--config',
    path.join(a.case, 'config.json'), '-emit=weights', `--dtype=${a.dtype}`],
  { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const narrow = new Set();
  for (const line of listed.split('\n')) {
    const m = /^(\S+) \[[^\]]*\] (\S+)$/.exec(line);
    if (m && m[2] === a.dtype) narrow.add(m[1]);
  }
  const ckpt = readSafetensors(path.join(a.case, 'model.safetensors'));
  for (const [name, t] of Object.entries(ckpt.tensors))
    if (t.dtype === 'F32' && narrow.has(name)) roundTo(t.data, a.dtype);
  const out = path.join(a.work, 'rounded.safetensors');
  writeSafetensors(out, ckpt.tensors, ckpt.metadata);
  return out;
}

function top2Gap(data, off, n) {
  let x = -Infinity, y = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = data[off + i];
    if (v > x) { y = x; x = v; } else if (v > y) y = v;
  }
  return x - y;
}

function argmax(data, off, n) {
  let best = 0;
  for (let i = 1; i < n; i++) if (data[off + i] > data[off + best]) best = i;
  return best;
}

async function main() {
  const a = parseArgs();
  const name = path.basename(a.case);
  if (!fs.existsSync(path.join(a.case, 'expected.safetensors'))) {
    console.log(`FAIL: fixture ${a.case} not found`);
    process.exit(1);
  }
  // Python's json writes Infinity and NaN (Mamba-2's time_step_limit).
  const cfgText = fs.readFileSync(path.join(a.case, 'config.json'), 'utf8');
  const cfg = JSON.parse(cfgText.replace(/-?\bInfinity\b|\bNaN\b/g, 'null'));
  const cls = (cfg.architectures || [])[0];
  fs.mkdirSync(a.work, { recursive: true });
  const model = path.join(a.work, 'model.onnx');
  const weights = a['round-weights'] ? roundedWeights(a) : path.join(a.case, 'model.safetensors');
  execFileSync(a.archc, [...(a.arch ? [a.arch] : []), '--config', path.join(a.case, 'config.json'),
    '-emit=onnx', '--weights', weights, `--dtype=${a['round-weights'] ? 'f32' : a.dtype}`,
    `--target=${a.target || 'portable'}`, '-o', model],
  { stdio: ['ignore', 'inherit', 'inherit'] });
  const exp = readSafetensors(a.expected || path.join(a.case, 'expected.safetensors')).tensors;
  const ids = exp.input_ids, ref = exp.logits;
  const [B, S] = ids.shape, V = ref.shape[2];
  let maxRef = 0;
  for (const v of ref.data) maxRef = Math.max(maxRef, Math.abs(v));
  const scale = Math.max(1, maxRef);
  const rows = [];
  for (let b = 0; b < B; b++) rows.push(Array.from({ length: S }, (_, s) => Number(ids.data[b * S + s])));
  const dec = await Decoder.load(model);
  const ones = (n) => new Array(n).fill(1);
  const range = (n, o = 0) => Array.from({ length: n }, (_, i) => i + o);
  const full = await dec.step(rows, rows.map(() => ones(S)), rows.map(() => range(S)), dec.emptyState(B));
  let prefill = 0;
  for (let i = 0; i < B * S * V; i++) prefill = Math.max(prefill, Math.abs(full.logits[i] - ref.data[i]));

  // Greedy through the reduced-precision cache, step logits against the
  // expected ones.
  const g = exp.greedy_ids, gl = exp.greedy_logits, steps = gl.shape[1];
  const s0 = g.shape[1] - steps;
  const prompt = range(s0).map((i) => Number(g.data[i]));
  const want = range(steps, s0).map((i) => Number(g.data[i]));
  const gaps = range(steps).map((j) => top2Gap(gl.data, j * V, V));
  let r = await dec.step([prompt], [ones(s0)], [range(s0)], dec.emptyState(1));
  let last = (s0 - 1) * V;
  const got = [];
  const stepDiffs = [];
  for (let j = 0; j < steps; j++) {
    let d = 0;
    for (let v = 0; v < V; v++) d = Math.max(d, Math.abs(r.logits[last + v] - gl.data[j * V + v]));
    stepDiffs.push(d);
    const best = argmax(r.logits, last, V);
    got.push(best);
    if (best !== want[j] || j + 1 === steps) break;
    // Teacher forcing is not needed: the token is the expected one.
    r = await dec.step([[best]], [ones(s0 + j + 1)], [[s0 + j]], r.state);
    last = 0;
  }
  const measured = Math.max(prefill, ...stepDiffs) / scale;
  if (a.measure) {
    console.log(JSON.stringify({ case: name, class: cls, target: a.target || 'portable',
      ...(a['round-weights'] ? { weights_rounded_to: a.dtype } : {}),
      relative_error: measured, first_gap: gaps[0] / scale,
      tokens_equal: got.length === steps && got.every((t, j) => t === want[j]) }));
    return;
  }

  const rel = familyBound(a, cls);
  const tol = rel * scale;
  const failures = [];
  const report = (ok, what) => {
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${a.dtype} ${what}`);
    if (!ok) failures.push(what);
  };
  report(prefill <= tol, `(a) prefill logits: max|diff| = ${prefill.toExponential(3)} (tol ${tol.toExponential(3)})`);
  // Tokens: the first always, the others up to the first step where the
  // expected gap is within 2 x tol.
  let n = steps;
  for (let j = 0; j < steps; j++) if (gaps[j] <= 2 * tol) { n = j + 1; break; }
  let tokensOk = true, note = '';
  for (let j = 0; j < n; j++) {
    if (j >= got.length) { tokensOk = false; note = ` (stopped at step ${got.length - 1})`; break; }
    if (got[j] !== want[j]) {
      if (j > 0 && gaps[j] <= 2 * tol) note = ` (step ${j}: a near tie, the expected gap ${gaps[j].toExponential(3)} <= 2 x tol)`;
      else { tokensOk = false; note = ` (step ${j}: the expected gap ${gaps[j].toExponential(3)} > 2 x tol)`; }
      break;
    }
  }
  if (n < steps && !note) note = ` (compared up to step ${n - 1}: the expected gap there is within 2 x tol)`;
  report(tokensOk, `(b) greedy ids: got [${got}] want [${want}]${note}`);
  const compared = stepDiffs.slice(0, Math.min(n, stepDiffs.length));
  const stepMax = Math.max(0, ...compared);
  report(stepMax <= tol, `(b') cached step logits: max|diff| = ${stepMax.toExponential(3)} over ` +
    `${compared.length} steps (tol ${tol.toExponential(3)})`);
  console.log(`${name} ${a.dtype}: measured relative error ${measured.toExponential(3)}, ` +
    `bound ${rel.toExponential(2)} (${cls})`);
  if (failures.length) process.exit(1);
  console.log(`${name} ${a.dtype}: all checks passed`);
}

main().catch((e) => { console.error(e); process.exit(1); });
