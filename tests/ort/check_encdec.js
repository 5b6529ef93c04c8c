#!/usr/bin/env node
// Checks archc's model folder of one encoder, encoder-decoder or speech
// fixture (../shared/hf-golden-encdec) in ONNX Runtime, compiled as a user
// compiles it: `archc CASE/ -emit=onnx -o OUT/`.
//   (w) -emit=weights lists exactly the checkpoint's tensors;
// encoder-only (OUT/onnx/model.onnx):
//   (a) each output the fixture has (last_hidden_state, logits,
//       pooler_output) on the real positions (a sequence classifier's
//       logits [batch, labels] whole), and mean_pooled from
//       last_hidden_state and the mask, within tolerance;
//   (p) the padded row's real positions equal a run of its real tokens
//       alone;
// encoder-decoder and Whisper (OUT/onnx/encoder_model.onnx,
// decoder_model_merged.onnx):
//   (e) encoder_last_hidden_state on the real positions;
//   (t) teacher-forced logits of both rows (one decoder call, empty past);
//   (g) greedy decoding of row 0 through the cache (decoder start token,
//       then one token per step, the cross-attention state computed at the
//       first step and carried): HF's ids exactly, its step logits within
//       tolerance;
//   (c) the teacher-forced logits again, half in one call and the rest one
//       token per cached step;
// Whisper, onnxruntime-genai's graphs named by genai_config.json:
//   (n) fed as the runtime feeds them (tests/ort/lib/genai_whisper.js):
//       encoder_hidden_states within tolerance, the greedy ids of the
//       transformers.js graphs above and HF's step logits within tolerance,
//       and row 0's teacher-forced logits from a prompt in one call.
// Tolerance: 1e-4 x max(1, max|expected|) per tensor (the fixtures' rule).
// With --dtype f16 the folder's *_fp16.onnx graphs run against --expected
// (tests/reference/rounded_expected.py: the reference over the checkpoint
// rounded to float16) with --bound (relative to max(1, max|expected|)); a
// greedy token may part only where the expected run's own top-1/top-2 gap
// is within twice the bound (tests/ort/check_dtype.js's rule).
// With --folder DIR --dtype q4|int8|q4f16 --expected FILE (a folder archc
// compiled with --quant, tests/quant/run_quant_encdec_case.py) the folder's
// *_<dtype>.onnx graphs run against FILE (the reference over their
// dequantized weights) at the fixtures' tolerance (or --bound), greedy ids
// exactly.
// Usage: check_encdec.js --archc BIN --case DIR --work DIR
//                        [--dtype f16 --expected FILE --bound X]
//                        [--folder DIR --dtype q4|int8|q4f16 --expected FILE]
// Exit 0 = pass, 1 = fail.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { readSafetensors } = require('./lib/safetensors');
const { Seq2Seq, session, i64, toFloat, floatInput } = require('./lib/encdec');
const { parseArgs } = require('./lib/args.js');
const { GenaiWhisper } = require('./lib/genai_whisper');

const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);

function checkWeights(args, failures, name) {
  const out = execFileSync(args.archc, ['--config', path.join(args.case, 'config.json'),
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

function maxAbs(data) {
  let m = 0;
  for (const v of data) m = Math.max(m, Math.abs(v));
  return m;
}

function argmax(data, off, n) {
  let best = 0;
  for (let i = 1; i < n; i++) if (data[off + i] > data[off + best]) best = i;
  return best;
}

function topGap(data, off, n) {
  let a = -Infinity, b = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = data[off + i];
    if (v > a) { b = a; a = v; } else if (v > b) b = v;
  }
  return a - b;
}

/// max |got - want| over rows b and positions s where keep(b, s), for
/// [B, S, W] tensors (W the trailing width).
function diffPositions(got, want, B, S, W, keep) {
  let m = 0;
  for (let b = 0; b < B; b++)
    for (let s = 0; s < S; s++) {
      if (!keep(b, s)) continue;
      const o = (b * S + s) * W;
      for (let i = 0; i < W; i++) m = Math.max(m, Math.abs(got[o + i] - want[o + i]));
    }
  return m;
}

function rowsOf(t) {
  const [B, S] = t.shape;
  return range(0, B).map((b) => range(0, S).map((s) => Number(t.data[b * S + s])));
}

async function main() {
  const args = parseArgs(['archc', 'case', 'work']);
  const name = path.basename(args.case);
  if (!fs.existsSync(path.join(args.case, 'expected.safetensors'))) {
    console.log(`FAIL: fixture ${args.case} not found (../shared/hf-golden-encdec absent)`);
    process.exit(1);
  }
  const f16 = args.dtype === 'f16';
  // A quantized folder's graphs (transformers.js' dtype names) against the
  // reference over their dequantized weights, at the fixtures' tolerance.
  const quant = ['q4', 'int8', 'q4f16'].includes(args.dtype);
  if (args.dtype && !f16 && !quant) { console.error(`unknown --dtype ${args.dtype}`); process.exit(2); }
  if ((f16 || quant) && !args.expected) { console.error(`--dtype ${args.dtype} needs --expected`); process.exit(2); }
  fs.rmSync(args.work, { recursive: true, force: true });
  fs.mkdirSync(args.work, { recursive: true });
  let out = path.join(args.work, 'model');
  if (args.folder) out = args.folder;
  else if (quant) { console.error('--dtype ' + args.dtype + ' needs --folder'); process.exit(2); }
  else {
    execFileSync(args.archc, [args.case, '-emit=onnx', '-o', out + '/', ...(f16 ? ['--dtype=f16'] : [])],
      { stdio: ['ignore', 'inherit', 'inherit'] });
  }
  const exp = readSafetensors(args.expected || path.join(args.case, 'expected.safetensors'));
  const hf = readSafetensors(path.join(args.case, 'expected.safetensors'));
  const E = exp.tensors;
  const bound = f16 ? Number(args.bound) : args.bound ? Number(args.bound) : 1e-4;
  const failures = [];
  const check = (label, diff, ref) => {
    const tol = bound * Math.max(1, maxAbs(ref));
    const ok = diff <= tol;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${label}: max|diff| = ${diff.toExponential(3)} (tol ${tol.toExponential(3)})`);
    if (!ok) failures.push(label);
  };
  if (!f16 && !quant) checkWeights(args, failures, name);
  const suffix = f16 ? '_fp16' : quant ? `_${args.dtype}` : '';
  const onnxDir = path.join(out, 'onnx');
  const mask = E.attention_mask ? rowsOf(E.attention_mask) : null;

  if (fs.existsSync(path.join(onnxDir, `model${suffix}.onnx`))) {
    // Encoder-only.
    const sess = await session(path.join(onnxDir, `model${suffix}.onnx`));
    const ids = rowsOf(E.input_ids);
    const [B, S] = E.input_ids.shape;
    const feedsFor = (idRows, maskRows, typeRows) => {
      const feeds = { input_ids: i64(idRows), attention_mask: i64(maskRows) };
      if (sess.inputNames.includes('token_type_ids'))
        feeds.token_type_ids = i64(typeRows || idRows.map((r) => r.map(() => 0)));
      return feeds;
    };
    const types = E.token_type_ids ? rowsOf(E.token_type_ids) : null;
    const res = await sess.run(feedsFor(ids, mask, types));
    const real = (b, s) => mask[b][s] === 1;
    let compared = 0;
    for (const key of ['last_hidden_state', 'logits']) {
      if (!E[key]) continue;
      if (!res[key]) { console.log(`FAIL ${name}: the graph has no output ${key}`); failures.push(key); continue; }
      if (res[key].dims.join(',') !== E[key].shape.join(',')) {
        console.log(`FAIL ${name}: ${key} [${res[key].dims}] vs [${E[key].shape}]`);
        failures.push(key);
        continue;
      }
      if (E[key].shape.length === 2) {
        // A sequence classifier's logits [batch, labels]: the whole tensor.
        check(`(a) ${key}`, diffPositions(toFloat(res[key]), E[key].data, B, 1, E[key].shape[1], () => true),
          E[key].data);
        compared++;
        continue;
      }
      const W = E[key].shape[2];
      check(`(a) ${key} on real positions`, diffPositions(toFloat(res[key]), E[key].data, B, S, W, real), E[key].data);
      compared++;
    }
    if (E.pooler_output) {
      const got = toFloat(res.pooler_output);
      check('(a) pooler_output', diffPositions(got, E.pooler_output.data, B, 1, E.pooler_output.shape[1], () => true),
        E.pooler_output.data);
      compared++;
    }
    if (E.mean_pooled) {
      const H = E.mean_pooled.shape[1];
      const h = toFloat(res.last_hidden_state);
      const pooled = new Float32Array(B * H);
      for (let b = 0; b < B; b++) {
        let n = 0;
        for (let s = 0; s < S; s++) {
          if (!mask[b][s]) continue;
          n++;
          for (let i = 0; i < H; i++) pooled[b * H + i] += h[(b * S + s) * H + i];
        }
        for (let i = 0; i < H; i++) pooled[b * H + i] /= n;
      }
      check('(a) mean_pooled from last_hidden_state', diffPositions(pooled, E.mean_pooled.data, B, 1, H, () => true),
        E.mean_pooled.data);
      compared++;
    }
    if (!compared) failures.push('nothing compared');
    // (p) the padded row's real tokens alone.
    const b = B - 1;
    const n = mask[b].reduce((x, y) => x + y, 0);
    const alone = await sess.run(feedsFor([ids[b].slice(0, n)], [mask[b].slice(0, n)],
      types ? [types[b].slice(0, n)] : null));
    for (const key of ['last_hidden_state', 'logits']) {
      if (!res[key]) continue;
      if (res[key].dims.length === 2) {
        const W = res[key].dims[1];
        const full = toFloat(res[key]), one = toFloat(alone[key]);
        let d = 0;
        for (let i = 0; i < W; i++) d = Math.max(d, Math.abs(full[b * W + i] - one[i]));
        check(`(p) ${key}: padded row = its real tokens alone`, d, E[key] ? E[key].data : full);
        continue;
      }
      const W = res[key].dims[2];
      const full = toFloat(res[key]), one = toFloat(alone[key]);
      let d = 0;
      for (let s = 0; s < n; s++)
        for (let i = 0; i < W; i++) d = Math.max(d, Math.abs(full[((b * S) + s) * W + i] - one[s * W + i]));
      check(`(p) ${key}: padded row = its real tokens alone`, d, E[key] ? E[key].data : full);
    }
  } else {
    // Encoder-decoder.
    const model = await Seq2Seq.load(path.join(onnxDir, `encoder_model${suffix}.onnx`),
      path.join(onnxDir, `decoder_model_merged${suffix}.onnx`));
    const encFeeds = {};
    let B, S;
    if (E.input_features) {
      [B] = E.input_features.shape;
      encFeeds.input_features = floatInput(model.encoder, 'input_features', E.input_features.data,
        E.input_features.shape);
    } else {
      [B, S] = E.input_ids.shape;
      encFeeds.input_ids = i64(rowsOf(E.input_ids));
      encFeeds.attention_mask = i64(mask);
    }
    const enc = await model.encode(encFeeds);
    const ref = E.encoder_last_hidden_state;
    S = ref.shape[1];
    const real = (b, s) => !mask || mask[b][s] === 1;
    check('(e) encoder_last_hidden_state on real positions',
      diffPositions(toFloat(enc), ref.data, B, S, ref.shape[2], real), ref.data);
    // (t) teacher forcing, one call.
    const dec = rowsOf(E.decoder_input_ids);
    const T = dec[0].length, V = E.logits.shape[2];
    const full = await model.step(dec, enc, mask, null);
    check('(t) teacher-forced logits', diffPositions(full.logits, E.logits.data, B, T, V, () => true), E.logits.data);
    // (c) half in one call, then one token per cached step.
    const h = Math.max(1, Math.floor(T / 2));
    let r = await model.step(dec.map((row) => row.slice(0, h)), enc, mask, null);
    let diffC = diffPositions(r.logits, full.logits.subarray(0), B, h, V, () => true) * 0;
    for (let b = 0; b < B; b++)
      for (let s = 0; s < h; s++)
        for (let i = 0; i < V; i++)
          diffC = Math.max(diffC, Math.abs(r.logits[(b * h + s) * V + i] - full.logits[(b * T + s) * V + i]));
    for (let t = h; t < T; t++) {
      r = await model.step(dec.map((row) => [row[t]]), enc, mask, r.past);
      for (let b = 0; b < B; b++)
        for (let i = 0; i < V; i++)
          diffC = Math.max(diffC, Math.abs(r.logits[b * V + i] - full.logits[(b * T + t) * V + i]));
    }
    check(`(c) ${h} tokens in one call, then ${T - h} cached steps`, diffC, E.logits.data);
    // (g) greedy decoding of row 0.
    const gIds = E.greedy_ids, gLogits = E.greedy_logits;
    const steps = gLogits.shape[1];
    const want = range(1, 1 + steps).map((i) => Number(gIds.data[i]));
    const enc0Feeds = {};
    if (E.input_features) {
      const n = E.input_features.data.length / B;
      enc0Feeds.input_features = floatInput(model.encoder, 'input_features', E.input_features.data.subarray(0, n),
        [1, ...E.input_features.shape.slice(1)]);
    } else {
      enc0Feeds.input_ids = i64([rowsOf(E.input_ids)[0]]);
      enc0Feeds.attention_mask = i64([mask[0]]);
    }
    const enc0 = await model.encode(enc0Feeds);
    let tok = Number(gIds.data[0]);
    let past = null;
    const tokens = [];
    let stepDiff = 0;
    let parted = false;
    const hfGaps = [];
    for (let j = 0; j < steps; j++) {
      const s = await model.step([[tok]], enc0, mask ? [mask[0]] : null, past);
      past = s.past;
      for (let i = 0; i < V; i++) stepDiff = Math.max(stepDiff, Math.abs(s.logits[i] - gLogits.data[j * V + i]));
      hfGaps.push(topGap(gLogits.data, j * V, V));
      tok = argmax(s.logits, 0, V);
      tokens.push(tok);
    }
    let same = tokens.every((t, i) => t === want[i]);
    if (!same && (f16 || args.dtype === 'q4f16')) {
      // A token may part only after a step whose own gap is within twice
      // the bound (check_dtype.js's rule); the steps before must agree.
      const tol = bound * Math.max(1, maxAbs(gLogits.data));
      const first = tokens.findIndex((t, i) => t !== want[i]);
      parted = first > 0 && hfGaps.slice(0, first + 1).some((g) => g <= 2 * tol) &&
        tokens.slice(0, first).every((t, i) => t === want[i]);
      same = parted;
    }
    console.log(`${same ? 'ok  ' : 'FAIL'} ${name} (g) greedy ids: got [${tokens}] want [${want}]` +
      (parted ? ' (parted after a near-tie)' : ''));
    if (!same) failures.push('(g) greedy ids');
    if (!parted) check('(g) greedy step logits', stepDiff, gLogits.data);
    // (n) Whisper: onnxruntime-genai's pair of graphs, fed as the runtime
    // feeds them (tests/ort/lib/genai_whisper.js).
    if (E.input_features) {
      const genaiConfig = path.join(out, 'genai_config.json');
      if (!fs.existsSync(genaiConfig)) {
        console.log(`FAIL ${name} (n) no genai_config.json for onnxruntime-genai's Whisper`);
        failures.push('(n) genai_config.json');
      } else {
        try {
          const g = await GenaiWhisper.load(out);
          const encoded = await g.encode(enc0Feeds.input_features);
          const H = ref.shape[2];
          check('(n) onnxruntime-genai encoder_hidden_states',
            diffPositions(toFloat(encoded.hidden), ref.data.subarray(0, S * H), 1, S, H, () => true), ref.data);
          const run = await g.greedy(encoded, Number(gIds.data[0]), steps);
          let gd = 0;
          run.logits.forEach((l, j) => { for (let i = 0; i < V; i++) gd = Math.max(gd, Math.abs(l[i] - gLogits.data[j * V + i])); });
          const ok = run.tokens.every((t, i) => t === tokens[i]);
          console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} (n) onnxruntime-genai greedy ids: got [${run.tokens}] ` +
            `want [${tokens}] (the transformers.js graphs' above)`);
          if (!ok) failures.push('(n) genai greedy ids');
          if (!parted) check('(n) onnxruntime-genai greedy step logits', gd, gLogits.data);
          // The runtime's first call takes the whole prompt: row 0's
          // teacher-forced tokens, half in one call, then cached steps.
          let r = await g.step(encoded, dec[0].slice(0, h), null);
          let pd = 0;
          for (let s = 0; s < h; s++)
            for (let i = 0; i < V; i++) pd = Math.max(pd, Math.abs(r.logits[s * V + i] - E.logits.data[s * V + i]));
          for (let t = h; t < T; t++) {
            r = await g.step(encoded, [dec[0][t]], r.past);
            for (let i = 0; i < V; i++) pd = Math.max(pd, Math.abs(r.logits[i] - E.logits.data[t * V + i]));
          }
          check(`(n) onnxruntime-genai: a ${h}-token prompt, then ${T - h} cached steps`, pd, E.logits.data);
        } catch (e) {
          console.log(`FAIL ${name} (n) onnxruntime-genai's Whisper contract: ${e.message}`);
          failures.push('(n) genai contract');
        }
      }
    }
  }
  if (hf && (f16 || quant)) console.log(`${name}: ${f16 ? 'float16' : args.dtype} checked against ${args.expected}`);
  if (failures.length) {
    console.log(`${name}: ${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log(`${name}: all checks passed`);
}

main().catch((e) => { console.error(e); process.exit(1); });
