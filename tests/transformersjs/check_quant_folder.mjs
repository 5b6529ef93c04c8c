#!/usr/bin/env node
// transformers.js check of a quantized model folder (tests/quant/README.md):
// loads archc's model folder OUT with transformers.js 4.3.1 as a user would -
// AutoModelForCausalLM.from_pretrained(OUT), no options: config.json's
// transformers.js_config.dtype must be the quantized dtype (q4 ->
// onnx/model_q4.onnx, q4f16, int8) - and checks
// that generate() reproduces the greedy ids of --expected, the numpy
// reference over the weights as the model stores them (run_quant_case.py:
// read back from the ONNX file, dequantized per ONNX Runtime's operator
// specification, and checked against the checkpoint's own weights):
//   - batch 1: the prompt, every reference step;
//   - batch 2, left-padded: [pad, pad, prompt] and [prompt, g0, g1].
// With f16 activations (q4f16) a token is compared only up to the first step
// where the reference's own top-1/top-2 gap is within twice the
// half-precision tolerance (2e-2 x max|logit|, as check_model.mjs).
//
// Usage: check_quant_folder.mjs --folder OUT --dtype D --expected FILE [--name N]
// Exit 0 = pass, 1 = fail.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { AutoModelForCausalLM, env, Tensor } from '@huggingface/transformers';

const require = createRequire(import.meta.url);
const { readSafetensors } = require('../ort/lib/safetensors.js');
const { parseArgs } = require('../ort/lib/args.js');

env.allowRemoteModels = false;
env.allowLocalModels = true;

const REL_TOL_F16 = 2e-2;

const ids = (rows) => new Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)),
  [rows.length, rows[0].length]);

async function generate(model, rows, mask, maxNew) {
  const out = await model.generate({
    input_ids: ids(rows), attention_mask: ids(mask),
    max_new_tokens: maxNew, do_sample: false,
  });
  // The new tokens of each row (fewer if generation stopped early: then the
  // comparison fails).
  const [B, T] = out.dims;
  const S = rows[0].length;
  const res = [];
  for (let b = 0; b < B; b++)
    res.push(Array.from(out.data.slice(b * T + S, (b + 1) * T), Number));
  return res;
}

async function main() {
  const args = parseArgs(['folder', 'dtype', 'expected']);
  const name = args.name || path.basename(args.folder);
  const half = args.dtype.endsWith('f16');
  const cfg = JSON.parse(fs.readFileSync(path.join(args.folder, 'config.json'), 'utf8'));

  const exp = readSafetensors(args.expected);
  const g = exp.tensors.greedy_ids, gl = exp.tensors.greedy_logits;
  const steps = gl.shape[1], V = gl.shape[2];
  const s0 = g.shape[1] - steps;
  const seq = Array.from(g.data, Number);
  const prompt = seq.slice(0, s0), want = seq.slice(s0);
  let maxRef = 0;
  for (const v of exp.tensors.logits.data) maxRef = Math.max(maxRef, Math.abs(v));
  const gaps = [];
  for (let j = 0; j < steps; j++) {
    const row = Array.from(gl.data.slice(j * V, (j + 1) * V)).sort((x, y) => y - x);
    gaps.push(row[0] - row[1]);
  }

  // generate() ends a row at an end-of-sequence token: the reference's
  // sequence is compared up to (and including) its first one.
  let gen = {};
  const genPath = path.join(args.folder, 'generation_config.json');
  if (fs.existsSync(genPath)) gen = JSON.parse(fs.readFileSync(genPath, 'utf8'));
  const eos = [gen.eos_token_id ?? cfg.eos_token_id ?? cfg.text_config?.eos_token_id ?? []].flat();

  const failures = [];
  const compare = (label, got, expect, firstStep) => {
    let n = expect.length;
    const end = expect.findIndex((t) => eos.includes(t));
    if (end >= 0) n = end + 1;
    if (half) {
      const tieAt = (j) => gaps[firstStep + j] <= 2 * REL_TOL_F16 * Math.max(1, maxRef);
      for (let j = 0; j < n; j++) if (tieAt(j)) { n = j + 1; break; }
    }
    const ok = got.length >= n && got.slice(0, n).every((t, i) => t === expect[i]);
    const note = n < expect.length ? ` (first ${n} required: ${end === n - 1 ? 'end of sequence' : 'reference near-tie'} at step ${firstStep + n - 1})` : '';
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} transformers.js ${args.dtype} ${label}: got [${got}] want [${expect}]${note}`);
    if (!ok) failures.push(label);
  };

  // The user's default call: no dtype, no device. config.json's
  // transformers.js_config.dtype must name this folder's quantized file
  // (without it, transformers.js picks fp32 in node and q8 in a browser).
  const configDtype = cfg['transformers.js_config']?.dtype;
  if (configDtype !== args.dtype) {
    console.log(`FAIL ${name}: config.json's transformers.js_config.dtype is ${JSON.stringify(configDtype)}, want "${args.dtype}"`);
    process.exit(1);
  }
  const model = await AutoModelForCausalLM.from_pretrained(args.folder);
  const [b1] = await generate(model, [prompt], [prompt.map(() => 1)], steps);
  compare('batch 1', b1, want, 0);
  const pad = cfg.pad_token_id ?? cfg.text_config?.pad_token_id ?? 0;
  const rowA = [pad, pad, ...prompt], maskA = [0, 0, ...prompt.map(() => 1)];
  const rowB = [...prompt, want[0], want[1]], maskB = rowB.map(() => 1);
  const [a, b] = await generate(model, [rowA, rowB], [maskA, maskB], steps - 2);
  compare('batch 2 left-padded row', a, want.slice(0, steps - 2), 0);
  compare('batch 2 unpadded row', b, want.slice(2), 2);
  await model.dispose();
  if (failures.length) {
    console.log(`FAIL ${name}: ${failures.join('; ')}`);
    process.exit(1);
  }
  console.log(`${name}: transformers.js ${args.dtype} reproduces the reference`);
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
