#!/usr/bin/env node
// The browser client test: archc's model folders loaded by transformers.js'
// browser bundle in headless Chromium (onnxruntime-web, WASM), the way a web
// page does - from_pretrained(NAME) with no options, the folder fetched over
// HTTP - and generate()'s greedy ids compared with the fixture's. Nothing
// leaves 127.0.0.1: the harness server (harness.mjs) serves the page, the
// bundle, onnxruntime-web's WASM files and the folders; transformers.js'
// remote models are off.
//
// Cases (CASES below; each one list entry): float32 (qwen3), float16
// (--dtype=f16, qwen3), int4 (--quant=int4, llama: a folder of the int4
// model alone, and one with the float model beside it, which the browser's
// default device loads instead: config.json's
// transformers.js_config.device_config.wasm.dtype), a mixture of experts
// (qwen3_moe), a hybrid (lfm2: short convolutions and attention) and a
// vision-language model (llava). What
// each must reproduce:
//   - float32: Hugging Face's greedy ids (the fixture's expected.safetensors);
//   - float16: those of the numpy reference over the float16-rounded
//     checkpoint (tests/reference/rounded_expected.py), up to the first step
//     where that run's top-1/top-2 gap is within twice the family's
//     half-precision bound (tests/ort/f16_bounds.json), as check_model.mjs;
//   - int4: those of the numpy reference over the weights as the folder
//     stores them (tests/quant/run_quant_case.py --folder, which also checks
//     the folder in ONNX Runtime), up to its first end-of-sequence token.
// A vision-language model (llava, ../shared/hf-golden-vlm): cls
// AutoModelForImageTextToText, row 0's pixel values among the inputs
// (page.mjs passes any inputs through), Hugging Face's greedy ids.
//
// Usage: check_browser.mjs --archc BIN --python PY --node NODE --shared DIR --work DIR
//                          [--chromium /usr/bin/chromium] [--timeout S] [--only NAME,...]
// Exit 0 = pass, 1 = fail (Chromium or puppeteer-core missing included: the
// suite does not pass without a browser).
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { clientFiles, harnessRoutes, launchBrowser, openPage, startServer, within } from './harness.mjs';

const require = createRequire(import.meta.url);
const { readSafetensors } = require('../ort/lib/safetensors.js');
const { parseArgs: parseCliArgs } = require('../ort/lib/args.js');
const here = path.dirname(new URL(import.meta.url).pathname);

// name, fixture, archc's options, what it must reproduce, config.json's
// transformers.js_config.dtype and device_config.wasm.dtype (the model the
// browser loads). `beside: 'f32'`: the quantized model is emitted into a
// folder that already holds the float one (run_quant_case.py's folder).
const CASES = [
  { name: 'qwen3-f32', fixture: 'qwen3-base', opts: [], expect: 'hf', dtype: 'fp32' },
  { name: 'qwen3-f16', fixture: 'qwen3-base', opts: ['--dtype=f16'], expect: 'f16', dtype: 'fp16' },
  { name: 'llama-q4', fixture: 'llama-base', opts: ['--quant=int4'], expect: 'quant', dtype: 'q4' },
  { name: 'llama-q4-beside-f32', fixture: 'llama-base', opts: ['--quant=int4'], beside: 'f32', expect: 'hf',
    dtype: 'q4', wasm: 'fp32' },
  { name: 'qwen3_moe-f32', fixture: 'qwen3_moe-base', opts: [], expect: 'hf', dtype: 'fp32' },
  { name: 'lfm2-f32', fixture: 'lfm2-base', opts: [], expect: 'hf', dtype: 'fp32' },
  // A vision-language model from ../shared/hf-golden-vlm: row 0's image
  // tokens and pixel values through AutoModelForImageTextToText.
  { name: 'llava-f32', fixture: 'llava-base', set: 'hf-golden-vlm', cls: 'AutoModelForImageTextToText',
    opts: [], expect: 'hf', dtype: 'fp32' },
];

const parseArgs = () => parseCliArgs(['archc', 'python', 'node', 'shared', 'work'], { chromium: '/usr/bin/chromium', timeout: '300' });

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) {
    process.stdout.write(r.stdout || '');
    process.stdout.write(r.stderr || '');
    throw new Error(`${path.basename(cmd)} ${args.slice(0, 3).join(' ')} ... failed (exit ${r.status})`);
  }
  return r;
}

// The greedy run of an expected.safetensors: prompt, new tokens, the
// top-1/top-2 gap of each step and max|logit|.
function greedyRun(file) {
  const t = readSafetensors(file).tensors;
  const g = t.greedy_ids, gl = t.greedy_logits;
  const steps = gl.shape[1], V = gl.shape[2];
  const seq = Array.from(g.data, Number);
  const s0 = seq.length - steps;
  let maxRef = 0;
  for (const v of t.logits.data) maxRef = Math.max(maxRef, Math.abs(v));
  const gaps = [];
  for (let j = 0; j < steps; j++) {
    const row = Array.from(gl.data.slice(j * V, (j + 1) * V)).sort((x, y) => y - x);
    gaps.push(row[0] - row[1]);
  }
  return { prompt: seq.slice(0, s0), want: seq.slice(s0), gaps, maxRef };
}

const quantRuns = new Set();

function architectureOf(dir) {
  const m = fs.readFileSync(path.join(dir, 'config.json'), 'utf8').match(/"architectures"\s*:\s*\[\s*"([^"]+)"/);
  return m ? m[1] : '';
}

// Builds the folder of one case under WORK/models/NAME and returns what the
// page must reproduce: { prompt, want, required (tokens compared), note }.
function prepare(a, c) {
  const caseDir = c.set ? path.join(a.shared, '..', c.set, c.fixture) : path.join(a.shared, c.fixture);
  if (!fs.existsSync(path.join(caseDir, 'expected.safetensors')))
    throw new Error(`fixture ${caseDir} not found (../shared/hf-golden absent)`);
  const folder = path.join(a.work, 'models', c.name);
  let expected = path.join(caseDir, 'expected.safetensors');
  fs.rmSync(folder, { recursive: true, force: true });
  fs.mkdirSync(path.dirname(folder), { recursive: true });
  if (c.expect === 'quant' || c.beside) {
    // run_quant_case.py emits a folder (the float model, then the quantized
    // one beside it), checks it in ONNX Runtime and writes the reference
    // over the weights as that model stores them (archc's quantization is
    // deterministic: a folder of the quantized model alone stores the same).
    const qwork = path.join(a.work, 'quant', `${c.fixture}${c.opts.join('')}`);
    if (!quantRuns.has(qwork)) {
      fs.rmSync(qwork, { recursive: true, force: true });
      run(a.python, [path.join(here, '..', 'quant', 'run_quant_case.py'), '--archc', a.archc, '--arch', 'auto',
        '--family', 'auto', '--node', a.node, '--case', caseDir, '--work', qwork,
        `--opts=${c.opts.join(' ')}`, '--l2', '0.05,0.15', '--folder', `model_${c.dtype}.onnx`]);
      quantRuns.add(qwork);
    }
    if (c.beside) fs.cpSync(path.join(qwork, 'folder'), folder, { recursive: true });
    if (c.expect === 'quant') expected = path.join(qwork, 'reference', 'expected.safetensors');
  }
  if (!c.beside) run(a.archc, [caseDir, '-emit=onnx', '-o', folder + '/', ...c.opts]);
  if (c.expect === 'f16') {
    expected = path.join(a.work, `${c.name}.rounded-expected.safetensors`);
    run(a.python, [path.join(here, '..', 'reference', 'rounded_expected.py'), '--archc', a.archc,
      '--case', caseDir, '--out', expected, '--dtype', 'f16']);
  }
  const cfg = JSON.parse(fs.readFileSync(path.join(folder, 'config.json'), 'utf8'));
  // A VLM folder gives a dtype per session; each must be the case's.
  const given = cfg['transformers.js_config']?.dtype;
  const dtype = given && typeof given === 'object' && new Set(Object.values(given)).size === 1
    ? Object.values(given)[0] : given;
  if (dtype !== c.dtype)
    throw new Error(`${c.name}: config.json's transformers.js_config.dtype is ${JSON.stringify(dtype)}, want "${c.dtype}"`);
  const wasm = cfg['transformers.js_config']?.device_config?.wasm?.dtype;
  if (wasm !== c.wasm)
    throw new Error(`${c.name}: config.json's transformers.js_config.device_config.wasm.dtype is ` +
      `${JSON.stringify(wasm)}, want ${JSON.stringify(c.wasm)}`);
  const r = greedyRun(expected);
  if (c.cls === 'AutoModelForImageTextToText') {
    // Row 0 of the batch-2 fixture: its image's pixel values.
    const t = readSafetensors(expected).tensors;
    const pv = t.pixel_values;
    const per = pv.shape.slice(1).reduce((x, y) => x * y, 1);
    r.pixel_values = { type: 'float32', data: Array.from(pv.data.slice(0, per)), dims: [1, ...pv.shape.slice(1)] };
  }
  let required = r.want.length, note = '';
  if (c.expect === 'f16') {
    const bounds = JSON.parse(fs.readFileSync(path.join(here, '..', 'ort', 'f16_bounds.json'), 'utf8')).bounds;
    const b = bounds[architectureOf(caseDir)];
    if (!b) throw new Error(`tests/ort/f16_bounds.json has no bound for ${architectureOf(caseDir)}`);
    const tie = r.gaps.findIndex((g) => g <= 2 * b.portable * Math.max(1, r.maxRef));
    if (tie >= 0) { required = tie + 1; note = ` (first ${required} required: near tie of the reference at step ${tie})`; }
  } else if (c.expect === 'quant') {
    const gen = JSON.parse(fs.readFileSync(path.join(folder, 'generation_config.json'), 'utf8'));
    const eos = [gen.eos_token_id ?? cfg.eos_token_id ?? []].flat();
    const end = r.want.findIndex((t) => eos.includes(t));
    if (end >= 0) { required = end + 1; note = ` (first ${required} required: end of sequence)`; }
  }
  return { ...r, required, note };
}

async function main() {
  const a = parseArgs();
  const started = Date.now();
  const deadline = started + Number(a.timeout) * 1000;
  const left = () => deadline - Date.now();
  const only = a.only ? a.only.split(',') : null;
  const cases = CASES.filter((c) => !only || only.includes(c.name));
  fs.mkdirSync(a.work, { recursive: true });

  let server = null, browser = null;
  const failures = [];
  try {
    const files = clientFiles();
    const plans = cases.map((c) => ({ c, exp: prepare(a, c) }));
    console.log(`     folders and references ready (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    const models = Object.fromEntries(cases.map((c) => [c.name, path.join(a.work, 'models', c.name)]));
    server = await startServer(harnessRoutes(files, models));
    browser = await within(Math.min(60000, left()), 'launching Chromium', launchBrowser(a.chromium));
    const version = await browser.version();
    const page = await within(Math.min(60000, left()), 'opening the harness page',
      openPage(browser, server.origin, {}, Math.min(60000, left())));
    const info = await page.evaluate(() => window.archc.info());
    console.log(`     ${version}, transformers.js ${info.transformers}, onnxruntime-web ${info.ort} (${info.wasm} WASM, ` +
      `crossOriginIsolated ${info.crossOriginIsolated}) at ${server.origin}`);
    if (info.ort !== files.ortVersion)
      throw new Error(`the page runs onnxruntime-web ${info.ort}, the WASM files served are ${files.ortVersion}`);
    for (const { c, exp } of plans) {
      const entry = {
        model: c.name, steps: exp.want.length, cls: c.cls,
        inputs: {
          input_ids: { type: 'int64', data: exp.prompt, dims: [1, exp.prompt.length] },
          attention_mask: { type: 'int64', data: exp.prompt.map(() => 1), dims: [1, exp.prompt.length] },
          ...(exp.pixel_values ? { pixel_values: exp.pixel_values } : {}),
        },
      };
      const t = Date.now();
      const res = await within(Math.min(120000, left()), `${c.name} in the browser`,
        page.evaluate((e) => window.archc.run(e), entry));
      const got = res.ids;
      const n = exp.required;
      const ok = got.length >= n && got.slice(0, n).every((v, i) => v === exp.want[i]);
      const loads = c.wasm ? `${c.dtype}, the browser loading ${c.wasm}` : c.dtype;
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${c.name} ${loads} (${c.fixture} ${c.opts.join(' ') || 'float32'}): ` +
        `got [${got}] want [${exp.want}]${exp.note} ${((Date.now() - t) / 1000).toFixed(1)} s`);
      if (!ok) failures.push(c.name);
    }
  } catch (e) {
    failures.push(String(e && e.message || e));
    console.log(`FAIL: ${e && e.stack || e}`);
  } finally {
    if (browser) await within(10000, 'closing Chromium', browser.close()).catch(() => browser.process()?.kill('SIGKILL'));
    if (server) await server.close();
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  if (failures.length) {
    console.log(`FAIL browser (${secs} s): ${failures.join('; ')}`);
    process.exit(1);
  }
  console.log(`PASS browser: ${cases.length} folders (${secs} s)`);
  process.exit(0);
}

// The whole run is bounded: past --timeout + 30 s (cleanup) the process ends itself.
setTimeout(() => { console.log('FAIL: the run did not finish in time'); process.exit(1); },
  (Number(parseArgs().timeout) + 30) * 1000).unref();
main();
