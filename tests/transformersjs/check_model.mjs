#!/usr/bin/env node
// Loads archc's model folder of one Hugging Face fixture (../shared/hf-golden)
// with transformers.js 4.3.1 exactly as a user would -
// AutoModelForCausalLM.from_pretrained(OUT, {local_files_only: true}) - and
// checks that generate() reproduces HF's greedy ids from input ids:
//   - batch 1: the fixture's prompt, 8 new tokens;
//   - batch 2, left-padded: [pad, pad, prompt] and [prompt, g0, g1], 6 new
//     tokens each (HF's greedy run determines both continuations);
// for the float32 folder (onnx/model.onnx, external data in chunks, so the
// chunk names and counts of config.json are exercised) and the float16 one
// (onnx/model_fp16.onnx in the same folder). In float16 a greedy token is
// compared only up to the first step where HF's own top-1/top-2 gap is within
// twice the half-precision tolerance (2e-2 x max|logit|, as tests/ort's
// check_dtype.js): past a legitimate near-tie the sequences may part.
//
// Usage: check_model.mjs --archc BIN --case DIR --work DIR
// Exit 0 = pass, 1 = fail, 77 = skipped (fixture absent, family not bundled,
// model type transformers.js has no class for, or a model archc reports that
// transformers.js cannot run; the reason is printed).
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { AutoModelForCausalLM, env, Tensor } from '@huggingface/transformers';

const require = createRequire(import.meta.url);
const { readSafetensors } = require('../ort/lib/safetensors.js');

env.allowRemoteModels = false;
env.allowLocalModels = true;

const REL_TOL_F16 = 2e-2;
const CHUNK_BYTES = 131072; // several external data files per model

function parseArgs() {
  const a = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of ['archc', 'case', 'work'])
    if (!a[k]) { console.error(`missing --${k}`); process.exit(2); }
  return a;
}

function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}

// Emits the fixture folder into the model folder `out`; returns archc's
// stderr (its notes).
function emitCapture(args, out, extra) {
  const r = spawnSync(args.archc, [args.case, '-emit=onnx', '-o', out + '/', ...extra],
    { encoding: 'utf8' });
  if (r.status !== 0) {
    process.stderr.write(r.stderr);
    throw new Error(`archc failed on ${args.case} (exit ${r.status})`);
  }
  return r.stderr;
}

// The fixture's architectures[0], read from the raw text (some fixture
// configs hold Python's Infinity, which JSON.parse rejects).
function architectureOf(caseDir) {
  const text = fs.readFileSync(path.join(caseDir, 'config.json'), 'utf8');
  const m = text.match(/"architectures"\s*:\s*\[\s*"([^"]+)"/);
  return m ? m[1] : '';
}

const ids = (rows) => new Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)),
  [rows.length, rows[0].length]);

async function generate(model, rows, mask, maxNew) {
  const out = await model.generate({
    input_ids: ids(rows), attention_mask: ids(mask),
    max_new_tokens: maxNew, do_sample: false,
  });
  // The new tokens of each row (fewer if generation stopped early, e.g. on a
  // wrong end-of-sequence token: then the comparison fails).
  const [B, T] = out.dims;
  const S = rows[0].length;
  const res = [];
  for (let b = 0; b < B; b++)
    res.push(Array.from(out.data.slice(b * T + S, (b + 1) * T), Number));
  return res;
}

async function main() {
  const args = parseArgs();
  const name = path.basename(args.case);
  if (!fs.existsSync(path.join(args.case, 'expected.safetensors')))
    skip(`fixture ${args.case} not found (../shared/hf-golden absent)`);
  fs.rmSync(args.work, { recursive: true, force: true });
  fs.mkdirSync(args.work, { recursive: true });
  const out = path.join(args.work, 'model');
  const arch = architectureOf(args.case);
  const bundled = spawnSync(args.archc, ['--list-archs'], { encoding: 'utf8' }).stdout;
  if (!new RegExp(`[ ,]${arch}(,|$)`, 'm').test(bundled))
    skip(`${name}: no bundled family matches ${arch} yet`);

  const notes = emitCapture(args, out, [`--data-chunk-size=${CHUNK_BYTES}`]);
  const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
  const cannot = notes.match(/transformers\.js cannot run this model \((.*)\)/);
  // transformers.js's own registry decides which model types it has a
  // class for; archc's note must agree with it.
  if (!AutoModelForCausalLM.supports(cfg.model_type)) {
    if (!cannot) {
      console.log(`FAIL ${name}: transformers.js has no class for '${cfg.model_type}' but archc did not say so`);
      process.exit(1);
    }
    skip(`${name}: transformers.js 4.3.1 has no causal-LM class for model_type '${cfg.model_type}'`);
  }
  if (cannot) skip(`${name}: archc reports that ${cannot[1]}`);
  emitCapture(args, out, ['--dtype=f16']);

  const chunks = cfg['transformers.js_config']?.use_external_data_format?.['model.onnx'] ?? 0;

  const exp = readSafetensors(path.join(args.case, 'expected.safetensors'));
  const g = exp.tensors.greedy_ids, gl = exp.tensors.greedy_logits;
  const steps = gl.shape[1], V = gl.shape[2];
  const s0 = g.shape[1] - steps;
  const seq = Array.from(g.data, Number);
  const prompt = seq.slice(0, s0), want = seq.slice(s0);
  let maxRef = 0;
  for (const v of exp.tensors.logits.data) maxRef = Math.max(maxRef, Math.abs(v));
  // HF's top-1/top-2 gap at each greedy step.
  const gaps = [];
  for (let j = 0; j < steps; j++) {
    const row = Array.from(gl.data.slice(j * V, (j + 1) * V)).sort((x, y) => y - x);
    gaps.push(row[0] - row[1]);
  }

  const failures = [];
  const compare = (label, got, expect, firstStep, dtype) => {
    // Tokens that must agree: all of them in f32; in f16 up to (and
    // including) the first near-tie of HF's own run.
    let n = expect.length;
    if (dtype === 'fp16') {
      const tieAt = (j) => gaps[firstStep + j] <= 2 * REL_TOL_F16 * Math.max(1, maxRef);
      for (let j = 0; j < expect.length; j++) if (tieAt(j)) { n = j + 1; break; }
    }
    const ok = got.length >= n && got.slice(0, n).every((t, i) => t === expect[i]);
    const all = got.length === expect.length && got.every((t, i) => t === expect[i]);
    const note = n < expect.length
      ? ` (${all ? 'all equal; ' : ''}first ${n} required: HF near-tie at step ${firstStep + n - 1})` : '';
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${dtype} ${label}: got [${got}] want [${expect}]${note}`);
    if (!ok) failures.push(`${dtype} ${label}`);
  };

  for (const dtype of ['fp32', 'fp16']) {
    const model = await AutoModelForCausalLM.from_pretrained(out, { local_files_only: true, dtype, device: 'cpu' });
    const [b1] = await generate(model, [prompt], [prompt.map(() => 1)], steps);
    compare('batch 1', b1, want, 0, dtype);
    const pad = cfg.pad_token_id ?? cfg.text_config?.pad_token_id ?? 0;
    const rowA = [pad, pad, ...prompt], maskA = [0, 0, ...prompt.map(() => 1)];
    const rowB = [...prompt, want[0], want[1]], maskB = rowB.map(() => 1);
    const [a, b] = await generate(model, [rowA, rowB], [maskA, maskB], steps - 2);
    compare('batch 2 left-padded row', a, want.slice(0, steps - 2), 0, dtype);
    compare('batch 2 unpadded row', b, want.slice(2), 2, dtype);
    await model.dispose();
  }
  console.log(`${name}: onnx/model.onnx with ${chunks} external data file(s), onnx/model_fp16.onnx`);
  if (failures.length) {
    console.log(`FAIL ${name}: ${failures.join('; ')}`);
    process.exit(1);
  }
  console.log(`PASS ${name}`);
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
