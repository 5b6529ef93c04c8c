#!/usr/bin/env node
// ONNX Runtime checks of a quantized model (tests/quant/README.md):
// archc compiles --weights WEIGHTS (a shared fixture, or a quantized
// checkpoint built by tests/quant/make_quantized_checkpoint.py) with the
// given extra options (e.g. --quant=int4) and the model is checked
//   against --expected (an hf-golden-format file computed by the numpy
//   reference over the weights as the model stores them): (a) prefill
//   logits, (b) greedy ids exactly and step logits through the KV cache,
//   (c) prefill N + decode M (one by one and as a chunk) equals one pass,
//   (d) a left-padded batch equals its unpadded rows, (e) the single-pass
//   model equals (a); all within 1e-4 x max(1, max|expected logits|);
//   with --model FILE the model is that file (e.g. the onnxruntime-genai
//   graph of a model folder) instead of one archc emits here, and (e),
//   which needs a second emission, is not run;
//   and, with --hf EXPECTED --min-corr C, against Hugging Face's own logits:
//   the median over positions of the Pearson correlation of the prefill
//   logits is at least C.
// Usage: check_quant.js --archc BIN --arch FILE.arch --config CONFIG.json
//        --weights PATH --work DIR [--expected FILE] [--hf FILE --min-corr C]
//        [--opts "--quant=int4 ..."] [--corr-opts "..."] [--rel-tol T (default 1e-4)] [--name N]
//        [--model FILE]
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { readSafetensors } = require('./lib/safetensors');
const { Decoder } = require('./lib/decoder');
const { parseArgs } = require('./lib/args.js');

const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);
const ones = (n) => new Array(n).fill(1);

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

function pearson(x, xOff, y, yOff, n) {
  let mx = 0, my = 0;
  for (let i = 0; i < n; i++) { mx += x[xOff + i]; my += y[yOff + i]; }
  mx /= n; my /= n;
  let sxy = 0, sxx = 0, syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = x[xOff + i] - mx, dy = y[yOff + i] - my;
    sxy += dx * dy; sxx += dx * dx; syy += dy * dy;
  }
  return sxy / Math.sqrt(sxx * syy);
}

async function main() {
  const args = parseArgs(['archc', 'arch', 'config', 'weights', 'work']);
  fs.mkdirSync(path.join(args.work, 'single'), { recursive: true });
  const extra = args.opts ? args.opts.split(' ').filter((s) => s) : [];
  const emit = (out, more) => execFileSync(args.archc, [...(args.arch && args.arch !== 'auto' ? [args.arch] : []), '--config', args.config,
    '-emit=onnx', '--weights', args.weights, '-o', out, ...extra, ...more],
  { stdio: ['ignore', 'inherit', 'inherit'] });
  const kvModel = args.model || path.join(args.work, 'model.onnx');
  const flatModel = path.join(args.work, 'single', 'model.onnx');
  if (!args.model)
    emit(kvModel, []);
  const failures = [];
  const name = args.name || path.basename(args.work);
  const dec = await Decoder.load(kvModel);

  if (args.hf) {
    // Pearson correlation of each prefill position's logits with HF's, of
    // the model compiled with --corr-opts (default: --opts).
    let corrDec = dec;
    if (args['corr-opts'] !== undefined) {
      const corrModel = path.join(args.work, 'corr', 'model.onnx');
      fs.mkdirSync(path.dirname(corrModel), { recursive: true });
      execFileSync(args.archc, [...(args.arch && args.arch !== 'auto' ? [args.arch] : []), '--config', args.config, '-emit=onnx', '--weights', args.weights,
        '-o', corrModel, ...args['corr-opts'].split(' ').filter((x) => x)], { stdio: ['ignore', 'inherit', 'inherit'] });
      corrDec = await Decoder.load(corrModel);
    }
    const hf = readSafetensors(args.hf);
    const ids = hf.tensors.input_ids, ref = hf.tensors.logits;
    const [B, S] = ids.shape, V = ref.shape[2];
    const rows = range(0, B).map((b) => range(0, S).map((s) => Number(ids.data[b * S + s])));
    const r = await corrDec.step(rows, rows.map(() => ones(S)), rows.map(() => range(0, S)), corrDec.emptyState(B));
    const corr = range(0, B * S).map((p) => pearson(r.logits, p * V, ref.data, p * V, V)).sort((x, y) => x - y);
    const median = corr[Math.floor(corr.length / 2)];
    // The fraction of prefill positions whose top-1 token is the one HF's
    // float model gives.
    let agree = 0;
    const counted = B * S;
    for (let p = 0; p < B * S; p++) {
      let best = 0, hfBest = 0;
      for (let v = 1; v < V; v++) {
        if (ref.data[p * V + v] > ref.data[p * V + hfBest]) hfBest = v;
        if (r.logits[p * V + v] > r.logits[p * V + best]) best = v;
      }
      if (best === hfBest) agree++;
    }
    const top1 = agree / counted;
    const what = `logits vs Hugging Face's float model${args['corr-opts'] !== undefined ? ` (${args['corr-opts']})` : ''}: ` +
      `median per-position correlation ${median.toFixed(6)} (min ${corr[0].toFixed(6)}), top-1 equal at ` +
      `${agree} of ${counted} positions`;
    if (args['min-corr'] !== undefined || args['min-top1'] !== undefined) {
      const minCorr = Number(args['min-corr'] ?? -1), minTop1 = Number(args['min-top1'] ?? 0);
      const ok = median >= minCorr && top1 >= minTop1;
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${what} (need median >= ${minCorr}, top-1 >= ${minTop1})`);
      if (!ok) failures.push('agreement with HF');
    } else {
      console.log(`     ${name} ${what} (not checked)`);
    }
    if (args['measure-out'])
      fs.writeFileSync(args['measure-out'], JSON.stringify({ median_corr: median, min_corr: corr[0], top1, counted }));
  }

  if (args.expected) {
    if (!args.model)
      emit(flatModel, ['--no-kv-cache']);
    const exp = readSafetensors(args.expected);
    const ids = exp.tensors.input_ids, ref = exp.tensors.logits;
    const [B, S] = ids.shape, V = ref.shape[2];
    let maxRef = 0;
    for (const v of ref.data) maxRef = Math.max(maxRef, Math.abs(v));
    const relTol = Number(args['rel-tol'] || 1e-4);
    const tol = relTol * Math.max(1, maxRef);
    const rows = range(0, B).map((b) => range(0, S).map((s) => Number(ids.data[b * S + s])));
    const check = (label, diff) => {
      const ok = diff <= tol;
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${label}: max|diff| = ${diff.toExponential(3)} (tol ${tol.toExponential(3)})`);
      if (!ok) failures.push(label);
    };
    const full = await dec.step(rows, rows.map(() => ones(S)), rows.map(() => range(0, S)), dec.emptyState(B));
    check('(a) prefill logits vs reference', maxAbsDiff(full.logits, 0, ref.data, 0, B * S * V));

    const gIds = exp.tensors.greedy_ids, gLogits = exp.tensors.greedy_logits;
    const steps = gLogits.shape[1], s0 = gIds.shape[1] - steps;
    let r = await dec.step([range(0, s0).map((i) => Number(gIds.data[i]))], [ones(s0)], [range(0, s0)], dec.emptyState(1));
    const tokens = [];
    let stepDiff = 0, last = (s0 - 1) * V;
    for (let j = 0; j < steps; j++) {
      stepDiff = Math.max(stepDiff, maxAbsDiff(r.logits, last, gLogits.data, j * V, V));
      const t = argmax(r.logits, last, V);
      tokens.push(t);
      if (j + 1 === steps) break;
      r = await dec.step([[t]], [ones(s0 + j + 1)], [[s0 + j]], r.state);
      last = 0;
    }
    const want = range(s0, s0 + steps).map((i) => Number(gIds.data[i]));
    // Where the expected top-1/top-2 gap is within twice the tolerance (half
    // precision), a greedy token may flip; such steps end the comparison.
    let same = true, compared = 0;
    for (let j = 0; j < steps; j++) {
      let top1 = -Infinity, top2 = -Infinity;
      for (let v = 0; v < V; v++) {
        const x = gLogits.data[j * V + v];
        if (x > top1) { top2 = top1; top1 = x; } else if (x > top2) top2 = x;
      }
      if (relTol > 1e-4 && top1 - top2 <= 2 * tol) break;
      compared++;
      if (tokens[j] !== want[j]) { same = false; break; }
    }
    console.log(`${same ? 'ok  ' : 'FAIL'} ${name} (b) greedy ids: got [${tokens}] want [${want}]` +
                (compared < steps ? ` (first ${compared} compared: later expected gaps <= 2 tol)` : ''));
    if (!same) failures.push('(b) greedy ids');
    check('(b) greedy step logits', stepDiff);

    const n = Math.max(1, S - 3);
    const p = await dec.step([rows[0].slice(0, n)], [ones(n)], [range(0, n)], dec.emptyState(1));
    let diffC = maxAbsDiff(p.logits, 0, full.logits, 0, n * V);
    let st = p.state;
    for (let t = n; t < S; t++) {
      const q = await dec.step([[rows[0][t]]], [ones(t + 1)], [[t]], st);
      diffC = Math.max(diffC, maxAbsDiff(q.logits, 0, full.logits, t * V, V));
      st = q.state;
    }
    const chunk = await dec.step([rows[0].slice(n)], [ones(S)], [range(n, S)], p.state);
    diffC = Math.max(diffC, maxAbsDiff(chunk.logits, 0, full.logits, n * V, (S - n) * V));
    check(`(c) prefill ${n} + decode ${S - n} (one by one, chunk)`, diffC);

    const pad = 2, real = S - pad;
    const pb = await dec.step([rows[0], [0, 0, ...rows[1].slice(0, real)]], [ones(S), [0, 0, ...ones(real)]],
      [range(0, S), [1, 1, ...range(0, real)]], dec.emptyState(2));
    const alone = await dec.step([rows[1].slice(0, real)], [ones(real)], [range(0, real)], dec.emptyState(1));
    check('(d) left-padded batch matches unpadded rows',
      Math.max(maxAbsDiff(pb.logits, 0, full.logits, 0, S * V),
        maxAbsDiff(pb.logits, (S + pad) * V, alone.logits, 0, real * V)));

    if (!args.model) {
      const flat = await Decoder.load(flatModel);
      const f = await flat.step(rows, rows.map(() => ones(S)), rows.map(() => range(0, S)), {});
      check('(e) single-pass model logits vs reference', maxAbsDiff(f.logits, 0, ref.data, 0, B * S * V));
    }
  }

  if (failures.length) {
    console.log(`${name}: ${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log(`${name}: all checks passed`);
}

main().catch((e) => { console.error(e); process.exit(1); });
