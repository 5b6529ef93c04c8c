#!/usr/bin/env node
// Decode speed of archc model folders in the browser (transformers.js'
// browser bundle, onnxruntime-web's WASM build, headless Chromium through
// tests/browser/harness.mjs) and in Node (transformers.js on
// onnxruntime-node, CPU), per weight format and archc option.
//
// The model: Qwen3-0.6B's config (../shared/model-facts/configs), random
// weights (archc --init=random: speed does not depend on the values). Each
// variant is one folder (archc CONFIG_DIR/ --init=random -emit=onnx -o
// DIR/ OPTIONS), loaded with from_pretrained(NAME) and no options, as a user
// would (config.json's transformers.js_config.dtype picks the file). Per
// client and variant: the load time, then --rounds rounds of generate() of
// --tokens new tokens and of 1 new token from an 8-token prompt (min_new_tokens
// forces the count); decode = (T(tokens) - T(1)) / (tokens - 1), the minimum
// over rounds. The machine's limits in the same run: the memory-read
// bandwidth with 1 and 2 threads (bench/bandwidth_probe.c, native) and the
// bytes a decode step must read (every initializer but an embedding table
// only gathered from, of which a step reads one row): their quotient, at the
// better of the two 1-thread probes, is the memory-bound floor of a step.
//
// Usage: bench/browser_decode.mjs --archc BIN [--work DIR] [--variants f32,q4,...]
//          [--clients web,web-isolated,node,...] [--tokens 16] [--rounds 2]
//          [--config FILE] [--chromium /usr/bin/chromium]
// Clients: node; web (asyncify WASM, transformers.js' default, not
// crossOriginIsolated: one thread); web-plain (the non-asyncify WASM
// build); web-isolated (COOP/COEP headers: onnxruntime-web's default thread
// count); web-isolated-tN (numThreads N).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { clientFiles, harnessRoutes, launchBrowser, openPage, startServer, within } from '../tests/browser/harness.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.join(here, '..');

// name -> archc options.
const VARIANTS = {
  f32: [],
  f16: ['--dtype=f16'],
  q4: ['--quant=int4'],
  'q4-acc4': ['--quant=int4', '--quant-accuracy=4'],
  'q4-b128': ['--quant=int4', '--quant-block=128'],
  'q4-b128-acc4': ['--quant=int4', '--quant-block=128', '--quant-accuracy=4'],
  'q4-emb': ['--quant=int4', '--quant-embeddings'],
  'q4-asym': ['--quant=int4', '--quant-asymmetric'],
  q4f16: ['--quant=int4', '--dtype=f16'],
  int8: ['--quant=int8'],
  'int8-acc4': ['--quant=int8', '--quant-accuracy=4'],
};

function parseArgs() {
  const a = {
    work: path.join(os.tmpdir(), 'archc-browser-bench'), variants: 'f32,q4,int8', clients: 'web,node',
    tokens: '16', rounds: '2', chromium: '/usr/bin/chromium',
    config: path.join(root, '..', 'shared', 'model-facts', 'configs', 'Qwen3-0.6B.json'),
  };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  if (!a.archc) { console.error('missing --archc'); process.exit(2); }
  return a;
}

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

// Emits the variant's folder once (kept across runs: a stamp holds the options).
function folder(a, name) {
  const opts = VARIANTS[name];
  if (!opts) throw new Error(`unknown variant ${name} (${Object.keys(VARIANTS).join(', ')})`);
  const cfgDir = path.join(a.work, 'config');
  fs.mkdirSync(cfgDir, { recursive: true });
  fs.copyFileSync(a.config, path.join(cfgDir, 'config.json'));
  const dir = path.join(a.work, 'models', name);
  const stamp = path.join(dir, '.archc-options');
  const want = JSON.stringify([fs.readFileSync(a.config, 'utf8'), opts]);
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  sh(a.archc, [cfgDir + '/', '--init=random', '-emit=onnx', '-o', dir + '/', ...opts]);
  fs.writeFileSync(stamp, want);
  return dir;
}

// Bytes of the initializers a decode step reads (all but the gathered
// embedding table) and the embedding table's, from the ONNX file's
// external-data records.
function stepBytes(dir) {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const dtype = cfg['transformers.js_config'].dtype;
  const file = path.join(dir, 'onnx', dtype === 'fp32' ? 'model.onnx' : `model_${dtype}.onnx`);
  const py = `
import onnx, sys
m = onnx.load(sys.argv[1], load_external_data=False)
# A table only gathered from (its data input, or GatherBlockQuantized's
# scales) is read one row per token; one a matmul also reads (a tied head)
# is read whole.
uses = {}
for n in m.graph.node:
    for i, x in enumerate(n.input):
        gathered = n.op_type == "Gather" and i == 0 or n.op_type == "GatherBlockQuantized" and i in (0, 2, 3)
        uses.setdefault(x, set()).add(gathered)
step = table = 0
for t in m.graph.initializer:
    n = dict((e.key, e.value) for e in t.external_data).get("length")
    n = int(n) if n is not None else len(t.raw_data)
    if uses.get(t.name) == {True}: table += n
    else: step += n
print(step, table)`;
  const [step, table] = sh('/usr/bin/python3', ['-c', py, file]).trim().split(' ').map(Number);
  return { file: path.relative(dir, file), step, table };
}

function bandwidth(a) {
  const probe = path.join(a.work, 'bandwidth_probe');
  if (!fs.existsSync(probe))
    sh('cc', ['-O3', '-march=native', '-pthread', path.join(here, 'bandwidth_probe.c'), '-o', probe]);
  const gbps = (t) => Number(sh(probe, ['1024', String(t), '5']).trim().split(/\s+/)[0]);
  return { t1: gbps(1), t2: gbps(2) };
}

const PROMPT = [9707, 11, 1246, 525, 498, 30, 358, 1079];

function entry(name, tokens) {
  return {
    model: name, steps: tokens, force: true,
    inputs: {
      input_ids: { type: 'int64', data: PROMPT, dims: [1, PROMPT.length] },
      attention_mask: { type: 'int64', data: PROMPT.map(() => 1), dims: [1, PROMPT.length] },
    },
  };
}

// One timing series: { load_ms, prefill_ms (1 token), decode_ms (per token) }.
function summarize(res, tokens) {
  const g = Math.min(...res.timings.generate_ms), p = Math.min(...res.timings.prefill_ms);
  return { load_ms: res.timings.load_ms, prefill_ms: p, decode_ms: (g - p) / (tokens - 1) };
}

async function runNode(a, dirs, tokens, rounds) {
  const tjs = await import(path.join(root, 'tests', 'transformersjs', 'node_modules', '@huggingface', 'transformers',
    'dist', 'transformers.node.mjs'));
  tjs.env.allowRemoteModels = false;
  tjs.env.allowLocalModels = true;
  tjs.env.localModelPath = path.join(a.work, 'models') + '/';
  const out = {};
  for (const name of Object.keys(dirs)) {
    const e = entry(name, tokens);
    const t0 = performance.now();
    const model = await tjs.AutoModelForCausalLM.from_pretrained(name);
    const load = performance.now() - t0;
    const ids = new tjs.Tensor('int64', BigInt64Array.from(PROMPT.map(BigInt)), [1, PROMPT.length]);
    const mask = new tjs.Tensor('int64', BigInt64Array.from(PROMPT.map(() => 1n)), [1, PROMPT.length]);
    const gen = async (n) => {
      const s = performance.now();
      await model.generate({ input_ids: ids, attention_mask: mask, max_new_tokens: n, min_new_tokens: n, do_sample: false });
      return performance.now() - s;
    };
    await gen(e.steps);
    const timings = { load_ms: load, generate_ms: [], prefill_ms: [] };
    for (let r = 0; r < rounds; r++) { timings.generate_ms.push(await gen(tokens)); timings.prefill_ms.push(await gen(1)); }
    await model.dispose();
    out[name] = summarize({ timings }, tokens);
    console.log(`  node ${name}: ${JSON.stringify(out[name])}`);
  }
  return out;
}

async function runWeb(a, client, dirs, tokens, rounds) {
  const isolated = client.startsWith('web-isolated');
  const threads = client.match(/-t(\d+)$/)?.[1];
  const query = { wasm: client === 'web-plain' ? 'plain' : 'asyncify', ...(threads ? { threads } : {}) };
  const server = await startServer(harnessRoutes(clientFiles(), dirs), { isolated });
  let browser = null;
  const out = {};
  try {
    browser = await launchBrowser(a.chromium);
    for (const name of Object.keys(dirs)) {
      // A fresh page per model: WASM memory is not shared between them.
      const page = await openPage(browser, server.origin, query);
      const info = await page.evaluate(() => window.archc.info());
      const e = { ...entry(name, tokens), repeat: rounds };
      const res = await within(600000, `${client} ${name}`, page.evaluate((x) => window.archc.run(x), e));
      out[name] = { ...summarize(res, tokens), crossOriginIsolated: info.crossOriginIsolated, numThreads: info.numThreads };
      console.log(`  ${client} ${name}: ${JSON.stringify(out[name])}`);
      await page.close();
    }
  } finally {
    if (browser) await browser.close().catch(() => browser.process()?.kill('SIGKILL'));
    await server.close();
  }
  return out;
}

async function main() {
  const a = parseArgs();
  const tokens = Number(a.tokens), rounds = Number(a.rounds);
  fs.mkdirSync(a.work, { recursive: true });
  const names = a.variants.split(',');
  const dirs = {};
  for (const n of names) dirs[n] = folder(a, n);
  const bytes = Object.fromEntries(names.map((n) => [n, stepBytes(dirs[n])]));
  const bw = bandwidth(a);
  console.log(`read bandwidth (native): ${bw.t1} GB/s 1 thread, ${bw.t2} GB/s 2 threads; ` +
    `load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  const results = {};
  for (const client of a.clients.split(','))
    results[client] = client === 'node' ? await runNode(a, dirs, tokens, rounds) : await runWeb(a, client, dirs, tokens, rounds);
  const bw2 = bandwidth(a);
  console.log(`\nread bandwidth after: ${bw2.t1} / ${bw2.t2} GB/s; load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  console.log(`\n| client | variant | file | step reads | decode ms/token | floor ms (1 thread, best probe) | x floor | prefill ms (${PROMPT.length} tokens + 1) | load s |`);
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const [client, r] of Object.entries(results)) {
    for (const n of names) {
      const x = r[n], b = bytes[n];
      // The least disturbed probe: the machine's limit, other load aside.
      const floor = b.step / (Math.max(bw.t1, bw2.t1) * 1e6);
      console.log(`| ${client} | ${n} | ${b.file} | ${(b.step / 2 ** 20).toFixed(0)} MiB | ${x.decode_ms.toFixed(0)} | ` +
        `${floor.toFixed(0)} | ${(x.decode_ms / floor).toFixed(2)} | ${x.prefill_ms.toFixed(0)} | ${(x.load_ms / 1000).toFixed(1)} |`);
    }
  }
  fs.writeFileSync(path.join(a.work, 'results.json'), JSON.stringify({ bandwidth: [bw, bw2], bytes, results }, null, 1));
}

main().then(() => process.exit(0), (e) => { console.error(e.stack || String(e)); process.exit(1); });
