#!/usr/bin/env node
// Loads archc's model folder of one vision-language fixture
// (../shared/hf-golden-vlm) with transformers.js 4.3.1 exactly as a user
// would - AutoModelForImageTextToText.from_pretrained(OUT), no options,
// right after `archc CASE -emit=onnx -o OUT/` wrote it - and checks:
//   (a) a forward of the batch-2 input (input_ids, attention_mask, the
//       fixture's pixel_values and image_grid_thw / pixel_attention_mask;
//       transformers.js runs vision_encoder, embed_tokens, merges the image
//       features and runs decoder_model_merged, with its own M-RoPE
//       positions for Qwen-VL) gives HF's logits within the fixture's
//       tolerance (1e-4 x max(1, max|logits|));
//   (g) generate() of row 0 with image 0 (greedy, the fixture's number of
//       new tokens) gives HF's greedy ids exactly.
// First the float32 files, then `--dtype=f16` into the same folder (the
// _fp16 files beside them); each time from_pretrained(OUT) with no options
// must load this run's files (config.json's transformers.js_config.dtype
// names fp32, then fp16, for every session). In float16 the logits are held
// to R x max(1, max|logits|), R the class's half-precision bound
// (tests/ort/f16_bounds.json, check_dtype.js's and tests/ort/check_vlm.js's
// rule), the first greedy id must be HF's and later ones up to the first
// step where HF's own top-1/top-2 gap is within 2 R x max(1, max|logits|).
//
// Usage: check_vlm.mjs --archc BIN --case DIR --work DIR [--skips FILE]
// Exit 0 = pass, 1 = fail, 77 = skipped. A case is skipped only when FILE
// (tests/skips.txt) lists its model type with a fact transformers.js
// itself confirms: `no-class` (AutoModelForImageTextToText has no class
// for it), or `unfed-inputs A,B` (its generate() refuses the folder
// because it feeds decoder_model_merged none of the inputs A, B: its own
// "Missing the following inputs" error names exactly those). archc must
// say the same in its note; a listed fact that no longer holds fails.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { AutoModelForImageTextToText, env, Tensor } from '@huggingface/transformers';

const require = createRequire(import.meta.url);
const { readSafetensors } = require('../ort/lib/safetensors.js');
const { parseArgs } = require('../ort/lib/args.js');

/// IEEE binary16 bits -> Float32Array.
function halfToFloat(bits) {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const h = bits[i];
    const sign = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f, frac = h & 0x3ff;
    if (e === 0) out[i] = sign * frac * 2 ** -24;
    else if (e === 31) out[i] = frac ? NaN : sign * Infinity;
    else out[i] = sign * (1 + frac / 1024) * 2 ** (e - 15);
  }
  return out;
}

/// The class's half-precision bound (portable graph), as check_dtype.js.
function f16Bound(cls) {
  const file = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'ort', 'f16_bounds.json');
  const b = JSON.parse(fs.readFileSync(file, 'utf8')).bounds[cls];
  if (!b) fail(`${file} has no half-precision bound for ${cls}`);
  return b.portable;
}

env.allowRemoteModels = false;
env.allowLocalModels = true;

function fail(why) {
  console.log(`FAIL: ${why}`);
  process.exit(1);
}
function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}

/// tests/skips.txt: `tjs-vlm MODEL_TYPE FACT [INPUTS] reason...` lines.
function listedSkips(file) {
  const out = new Map();
  if (!file) return out;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    let m = line.match(/^tjs-vlm\s+(\S+)\s+no-class\s+(.*)$/);
    if (m) { out.set(m[1], { fact: 'no-class', reason: m[2] }); continue; }
    m = line.match(/^tjs-vlm\s+(\S+)\s+unfed-inputs\s+(\S+)\s+(.*)$/);
    if (m) { out.set(m[1], { fact: 'unfed-inputs', inputs: m[2].split(',').sort(), reason: m[3] }); continue; }
    if (/^tjs-vlm\s/.test(line))
      fail(`${file}: '${line}' names no fact the checker confirms (no-class, unfed-inputs)`);
  }
  return out;
}

const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);

/// A transformers.js tensor of rows [lo, hi) of a safetensors tensor.
function tensorRows(t, lo, hi) {
  const per = t.shape.slice(1).reduce((a, b) => a * b, 1);
  const dims = [hi - lo, ...t.shape.slice(1)];
  const data = t.data.slice(lo * per, hi * per);
  return t.dtype === 'I64'
    ? new Tensor('int64', BigInt64Array.from(data, BigInt), dims)
    : new Tensor('float32', Float32Array.from(data), dims);
}

async function main() {
  const args = parseArgs(['archc', 'case', 'work']);
  const name = path.basename(args.case);
  if (!fs.existsSync(path.join(args.case, 'expected.safetensors')))
    fail(`fixture ${args.case} not found (../shared/hf-golden-vlm absent)`);
  const skips = listedSkips(args.skips);
  fs.rmSync(args.work, { recursive: true, force: true });
  fs.mkdirSync(args.work, { recursive: true });
  const out = path.join(args.work, 'model');
  const emit = (extra) => {
    const r = spawnSync(args.archc, [args.case, '-emit=onnx', '-o', out + '/', ...extra], { encoding: 'utf8' });
    if (r.status !== 0) {
      process.stderr.write(r.stderr);
      fail(`archc failed on ${args.case} (exit ${r.status})`);
    }
    return r;
  };
  const r = emit([]);
  const cannot = r.stderr.match(/transformers\.js cannot run this model \((.*)\)/);
  const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
  const type = cfg.model_type;
  const listed = skips.get(type);

  if (!AutoModelForImageTextToText.supports(type)) {
    if (!cannot) fail(`${name}: transformers.js has no image-text-to-text class for '${type}' but archc did not say so`);
    if (!listed || listed.fact !== 'no-class')
      fail(`${name}: transformers.js has no image-text-to-text class for '${type}'; list it in tests/skips.txt ` +
        '(tjs-vlm MODEL_TYPE no-class reason) if that is the fact');
    skip(`${name}: transformers.js has no image-text-to-text class for '${type}' (${listed.reason})`);
  }
  if (listed && listed.fact === 'no-class')
    fail(`${name}: tests/skips.txt says transformers.js has no class for '${type}', but it has one: remove the line`);

  // The user's default call: no dtype; config.json names this run's files.
  const defaultDtype = (want) => {
    const c = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
    const dtypes = c['transformers.js_config']?.dtype;
    for (const s of ['vision_encoder', 'embed_tokens', 'decoder_model_merged'])
      if (dtypes?.[s] !== want)
        fail(`${name}: config.json's transformers.js_config.dtype.${s} is ${JSON.stringify(dtypes?.[s])}, want "${want}"`);
  };
  defaultDtype('fp32');

  const expFile = readSafetensors(path.join(args.case, 'expected.safetensors'));
  const exp = expFile.tensors;
  const [B, S] = exp.input_ids.shape;
  const V = exp.logits.shape[2];
  const qwen = type === 'qwen2_5_vl' || type === 'qwen3_vl';
  // The processor's outputs of rows [lo, hi) (one image per row).
  const inputsOf = (lo, hi) => {
    const x = {
      input_ids: tensorRows(exp.input_ids, lo, hi),
      attention_mask: new Tensor('int64', new BigInt64Array((hi - lo) * S).fill(1n), [hi - lo, S]),
    };
    if (qwen) {
      const g = exp.image_grid_thw;
      const count = (i) => Number(g.data[3 * i]) * Number(g.data[3 * i + 1]) * Number(g.data[3 * i + 2]);
      const start = range(0, lo).reduce((a, i) => a + count(i), 0);
      const end = start + range(lo, hi).reduce((a, i) => a + count(i), 0);
      x.pixel_values = tensorRows(exp.pixel_values, start, end);
      x.image_grid_thw = tensorRows(g, lo, hi);
    } else {
      x.pixel_values = tensorRows(exp.pixel_values, lo, hi);
      if (exp.pixel_attention_mask) x.pixel_attention_mask = tensorRows(exp.pixel_attention_mask, lo, hi);
    }
    return x;
  };

  const model = await AutoModelForImageTextToText.from_pretrained(out);
  const steps = exp.greedy_logits.shape[1];
  const want = Array.from(exp.greedy_ids.data.slice(S, S + steps), Number);
  const generate = () => model.generate({ ...inputsOf(0, 1), max_new_tokens: steps, do_sample: false });

  if (listed && listed.fact === 'unfed-inputs') {
    // The fact: transformers.js itself refuses to run the decoder because
    // it feeds it none of the listed inputs.
    if (!cannot) fail(`${name}: tests/skips.txt lists '${type}' as unfed-inputs but archc did not say transformers.js cannot run it`);
    let error = null;
    try {
      await generate();
    } catch (e) {
      error = String(e);
    }
    const m = error && error.match(/Missing the following inputs: ([^."]*)/);
    const missing = m ? m[1].split(',').map((s) => s.trim()).sort() : [];
    if (missing.join() !== listed.inputs.join())
      fail(`${name}: tests/skips.txt says transformers.js feeds decoder_model_merged none of ${listed.inputs}, ` +
        `but its generate() ${error ? `failed with: ${error}` : 'ran'}: update or remove the line`);
    for (const n of listed.inputs)
      if (!cannot[1].includes(n)) fail(`${name}: archc's note does not name ${n}: ${cannot[1]}`);
    await model.dispose();
    skip(`${name}: transformers.js 4.3.1 feeds decoder_model_merged no ${listed.inputs.join(', ')} ` +
      `(its own error: Missing the following inputs: ${m[1]}; ${listed.reason})`);
  }
  if (cannot)
    fail(`${name}: archc says transformers.js cannot run this model (${cannot[1]}), but it is not a listed skip`);

  const failures = [];
  let maxRef = 0;
  for (const v of exp.logits.data) maxRef = Math.max(maxRef, Math.abs(v));
  const scale = Math.max(1, maxRef);
  // HF's top-1/top-2 gap at each greedy step.
  const gaps = range(0, steps).map((j) => {
    const row = Array.from(exp.greedy_logits.data.slice(j * V, (j + 1) * V)).sort((x, y) => y - x);
    return row[0] - row[1];
  });
  const check = async (m, dtype, relTol) => {
    const tol = relTol * scale;
    // (a) batch-2 forward.
    const logits = (await m(inputsOf(0, B))).logits;
    const got = logits.type === 'float16' ? halfToFloat(new Uint16Array(logits.data.buffer, logits.data.byteOffset,
      logits.data.length)) : logits.data;
    let diff = logits.dims.join() === [B, S, V].join() ? 0 : Infinity;
    if (diff === 0)
      for (let i = 0; i < B * S * V; i++) diff = Math.max(diff, Math.abs(got[i] - exp.logits.data[i]));
    const okA = diff <= tol;
    console.log(`${okA ? 'ok  ' : 'FAIL'} ${name} ${dtype} (a) batch-2 forward logits: max|diff| = ` +
      `${diff.toExponential(3)} (tol ${tol.toExponential(3)})`);
    if (!okA) failures.push(`${dtype} (a) logits`);
    // (g) greedy generate of row 0: every id in float32; in float16 up to
    // (and including) HF's first near tie.
    const seq = await m.generate({ ...inputsOf(0, 1), max_new_tokens: steps, do_sample: false });
    const ids = Array.from(seq.data.slice(S), Number);
    let n = steps;
    if (dtype === 'fp16')
      for (let j = 1; j < steps; j++) if (gaps[j] <= 2 * tol) { n = j + 1; break; }
    const okG = ids.length >= n && ids.slice(0, n).every((t, i) => t === want[i]);
    const note = n < steps ? ` (first ${n} required: near tie of HF's run at step ${n - 1})` : '';
    console.log(`${okG ? 'ok  ' : 'FAIL'} ${name} ${dtype} (g) generate() greedy ids [${ids}] (HF [${want}])${note}`);
    if (!okG) failures.push(`${dtype} (g) greedy ids`);
  };

  await check(model, 'fp32', 1e-4);
  await model.dispose();
  // The float16 files into the same folder, loaded with no options.
  emit(['--dtype=f16']);
  defaultDtype('fp16');
  const half = await AutoModelForImageTextToText.from_pretrained(out);
  await check(half, 'fp16', f16Bound(cfg.architectures?.[0]));
  await half.dispose();

  if (failures.length) fail(`${name}: ${failures.join(', ')}`);
  console.log(`PASS ${name}`);
}

main().catch((e) => { console.error(e); process.exit(1); });
