#!/usr/bin/env node
// Loads archc's model folder of one Hugging Face fixture (../shared/hf-golden)
// with transformers.js 4.3.1 exactly as a user would -
// AutoModelForCausalLM.from_pretrained(OUT) - and
// checks that generate() reproduces HF's greedy ids from input ids, each
// folder loaded as from_pretrained(OUT) with no options at all right after
// archc wrote it (config.json's transformers.js_config.dtype names the model
// file of the last run: fp32, then fp16), the float32 one also with an
// explicit dtype once the float16 one is beside it:
//   - batch 1: the fixture's prompt, 8 new tokens;
//   - batch 2, left-padded: [pad, pad, prompt] and [prompt, g0, g1], 6 new
//     tokens each (HF's greedy run determines both continuations);
// for the float32 folder (onnx/model.onnx, external data in chunks, so the
// chunk names and counts of config.json are exercised) and the float16 one
// (onnx/model_fp16.onnx in the same folder). The float16 folder reproduces
// the greedy ids of --expected-f16 (tests/reference/rounded_expected.py: the
// numpy reference over the checkpoint rounded as the float16 model stores
// it), HF's without it; a token is compared only up to the first step where
// that run's own top-1/top-2 gap is within twice the family's
// half-precision bound (tests/ort/f16_bounds.json, the rule of
// tests/ort/check_dtype.js): past a legitimate near-tie the sequences may
// part.
//
// A fixture tests/exclusions.txt excludes from the f16 tests (--exclusions)
// still loads and generates in float16, its tokens not compared.
//
// Usage: check_model.mjs --archc BIN --case DIR --work DIR [--skips FILE] [--expected-f16 FILE]
//                        [--exclusions FILE]
// Exit 0 = pass, 1 = fail, 77 = skipped. A case is skipped only when FILE
// (tests/skips.txt) lists its model type AND transformers.js itself confirms
// the listed fact: `no-class` (AutoModelForCausalLM has no class for the
// model type). A listed fact that no longer holds fails, as does a model
// type transformers.js has no class for that is not listed, or any other
// line.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { AutoModelForCausalLM, env, Tensor } from '@huggingface/transformers';

const require = createRequire(import.meta.url);
const { readSafetensors } = require('../ort/lib/safetensors.js');
const { parseArgs } = require('../ort/lib/args.js');

env.allowRemoteModels = false;
env.allowLocalModels = true;

const CHUNK_BYTES = 131072; // several external data files per model

/// The family's half-precision bound (portable graph), as check_dtype.js.
function f16Bound(cls) {
  const file = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'ort', 'f16_bounds.json');
  const b = JSON.parse(fs.readFileSync(file, 'utf8')).bounds[cls];
  if (!b) {
    console.log(`FAIL: ${file} has no half-precision bound for ${cls}`);
    process.exit(1);
  }
  return b.portable;
}

/// tests/exclusions.txt's `f16 CASE reason` line for the case, or null: a
/// fixture whose float16 tokens no float16 model can be held to.
function f16Exclusion(file, name) {
  if (!file) return null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = line.match(/^f16\s+(\S+)\s+(.*)$/);
    if (m && m[1] === name) return m[2];
  }
  return null;
}

/// tests/skips.txt: `tjs MODEL_TYPE FACT reason...` lines.
function listedSkips(file) {
  const out = new Map();
  if (!file) return out;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = line.match(/^tjs\s+(\S+)\s+(no-class)\s+(.*)$/);
    if (m) out.set(m[1], { fact: m[2], reason: m[3] });
    else if (/^tjs\s/.test(line)) fail(`${file}: '${line}' names no fact the checker confirms (only no-class)`);
  }
  return out;
}

function fail(why) {
  console.log(`FAIL: ${why}`);
  process.exit(1);
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
  const args = parseArgs(['archc', 'case', 'work']);
  const name = path.basename(args.case);
  if (!fs.existsSync(path.join(args.case, 'expected.safetensors')))
    fail(`fixture ${args.case} not found (../shared/hf-golden absent)`);
  const skips = listedSkips(args.skips);
  fs.rmSync(args.work, { recursive: true, force: true });
  fs.mkdirSync(args.work, { recursive: true });
  const out = path.join(args.work, 'model');
  const arch = architectureOf(args.case);
  const bundled = spawnSync(args.archc, ['--list-archs'], { encoding: 'utf8' }).stdout;
  if (!new RegExp(`[ ,]${arch}(,|$)`, 'm').test(bundled))
    fail(`${name}: no bundled family matches ${arch}`);

  const notes = emitCapture(args, out, [`--data-chunk-size=${CHUNK_BYTES}`]);
  const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
  const cannot = notes.match(/transformers\.js cannot run this model \((.*)\)/);
  const listed = skips.get(cfg.model_type);
  // transformers.js's own registry decides which model types it has a
  // class for; archc's note must agree with it, and the skip list too.
  if (!AutoModelForCausalLM.supports(cfg.model_type)) {
    if (!cannot)
      fail(`${name}: transformers.js has no class for '${cfg.model_type}' but archc did not say so`);
    if (!listed || listed.fact !== 'no-class')
      fail(`${name}: transformers.js has no causal-LM class for model_type '${cfg.model_type}'; ` +
        'list it in tests/skips.txt (tjs MODEL_TYPE no-class reason) if that is the fact');
    skip(`${name}: transformers.js has no causal-LM class for model_type '${cfg.model_type}' (${listed.reason})`);
  }
  if (listed && listed.fact === 'no-class')
    fail(`${name}: tests/skips.txt says transformers.js has no class for '${cfg.model_type}', but it has one: ` +
      'remove the line');
  const REL_TOL_F16 = f16Bound(arch);

  const chunks = cfg['transformers.js_config']?.use_external_data_format?.['model.onnx'] ?? 0;

  // The greedy run each dtype must reproduce: HF's for float32; for float16
  // --expected-f16's (tests/reference/rounded_expected.py: the numpy
  // reference over the checkpoint rounded as the float16 model stores it)
  // when given, else HF's.
  const runOf = (file) => {
    const exp = readSafetensors(file);
    const g = exp.tensors.greedy_ids, gl = exp.tensors.greedy_logits;
    const steps = gl.shape[1], V = gl.shape[2];
    const s0 = g.shape[1] - steps;
    const seq = Array.from(g.data, Number);
    let maxRef = 0;
    for (const v of exp.tensors.logits.data) maxRef = Math.max(maxRef, Math.abs(v));
    // The run's top-1/top-2 gap at each greedy step.
    const gaps = [];
    for (let j = 0; j < steps; j++) {
      const row = Array.from(gl.data.slice(j * V, (j + 1) * V)).sort((x, y) => y - x);
      gaps.push(row[0] - row[1]);
    }
    return { steps, prompt: seq.slice(0, s0), want: seq.slice(s0), maxRef, gaps };
  };
  const runs = {
    fp32: runOf(path.join(args.case, 'expected.safetensors')),
    fp16: runOf(args['expected-f16'] || path.join(args.case, 'expected.safetensors')),
  };
  const { steps, prompt } = runs.fp32;
  if (runs.fp16.prompt.join() !== prompt.join())
    fail(`${name}: --expected-f16 ${args['expected-f16']} has another prompt than the fixture`);

  const failures = [];
  const compare = (label, got, expect, firstStep, dtype) => {
    // Tokens that must agree: all of them in f32; in f16 up to (and
    // including) the first near-tie of the expected run.
    let n = expect.length;
    if (dtype === 'fp16') {
      const { gaps, maxRef } = runs.fp16;
      const tieAt = (j) => gaps[firstStep + j] <= 2 * REL_TOL_F16 * Math.max(1, maxRef);
      for (let j = 0; j < expect.length; j++) if (tieAt(j)) { n = j + 1; break; }
    }
    const ok = got.length >= n && got.slice(0, n).every((t, i) => t === expect[i]);
    const all = got.length === expect.length && got.every((t, i) => t === expect[i]);
    const note = n < expect.length
      ? ` (${all ? 'all equal; ' : ''}first ${n} required: near tie of the expected run at step ${firstStep + n - 1})` : '';
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${dtype} ${label}: got [${got}] want [${expect}]${note}`);
    if (!ok) failures.push(`${dtype} ${label}`);
  };

  if (cannot)
    fail(`${name}: archc says transformers.js cannot run this model (${cannot[1]}), but it is not a listed skip`);

  // The user's default call: from_pretrained(OUT), no dtype, no device;
  // config.json must name the dtype of the file archc just wrote.
  const defaultDtype = (want) => {
    const c = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
    const got = c['transformers.js_config']?.dtype;
    if (got !== want)
      fail(`${name}: config.json's transformers.js_config.dtype is ${JSON.stringify(got)} after archc wrote the ${want} model, want "${want}"`);
  };
  const noF16Tokens = f16Exclusion(args.exclusions, name);
  for (const dtype of ['fp32', 'fp16']) {
    const { want } = runs[dtype];
    if (dtype === 'fp16')
      emitCapture(args, out, ['--dtype=f16']);
    defaultDtype(dtype);
    if (dtype === 'fp16' && noF16Tokens) {
      // The folder still loads and generates; its tokens are not compared.
      const model = await AutoModelForCausalLM.from_pretrained(out);
      const [b1] = await generate(model, [prompt], [prompt.map(() => 1)], steps);
      console.log(`ok   ${name} fp16 batch 1 generated [${b1}]; tokens not compared (tests/exclusions.txt: ${noF16Tokens})`);
      await model.dispose();
      continue;
    }
    const model = await AutoModelForCausalLM.from_pretrained(out);
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
  // The float32 model still loads beside the float16 one (its external
  // data chunk count kept in config.json across the second run).
  {
    const model = await AutoModelForCausalLM.from_pretrained(out, { dtype: 'fp32' });
    const [b1] = await generate(model, [prompt], [prompt.map(() => 1)], 1);
    compare('batch 1 (dtype fp32 beside fp16, first token)', b1, runs.fp32.want.slice(0, 1), 0, 'fp32');
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
