#!/usr/bin/env node
// Checks archc's vision-language package for one Hugging Face fixture
// (../shared/hf-golden-vlm), emitted as `archc CASE -emit=onnx -o OUT/`:
//   (w) -emit=weights lists the checkpoint's tensors, names and shapes;
//   (v) the vision encoder reproduces HF's image_features from pixel_values
//       (and image_grid_thw / pixel_attention_mask) in its first hidden
//       channels; its side channels after them are Gemma 3's image marker
//       (all 1) or Qwen3-VL's deepstack features (checked through (a));
//   (e) the embedding graph's inputs_embeds carry zeros in the side
//       channels at text tokens and the features' at image tokens, so
//       Gemma 3's marker channel is HF's token_type_ids (the processor's);
//   (a) vision, embedding and decoder chained reproduce the full-forward
//       logits of the batch-2 input (Gemma 3's bidirectional image blocks,
//       Qwen with HF's M-RoPE position_ids, Qwen3-VL with deepstack); the
//       decoder is fed only what transformers.js feeds it (inputs_embeds,
//       attention_mask, position_ids, the cache): any other input fails;
//   (g) row 0 with image 0: prefill then 6 single-token steps through the
//       KV cache (text-only embedding calls, zero-row image features) give
//       HF's greedy tokens exactly and its step logits;
//   (t) a text-only prompt through the package (zero-row image features)
//       gives the logits of the text model (the arch's main graph, emitted
//       as one file), prefill and two cached steps.
// With --dtype f16: the f16 package, features and logits within R x
// max|.| of HF's float32 values, the first greedy token HF's and the later
// ones wherever HF's top-1/top-2 gap exceeds twice that tolerance; R is
// --rel-tol, else the class's bound in tests/ort/f16_bounds.json
// (check_dtype.js's rule).
// --measure (with --dtype f16) prints the largest relative error of the
// checked values (features, prefill and step logits, each over
// max(1, max|HF value|)) as JSON for scripts/measure_f16_bounds.py.
// Usage: check_vlm.js --archc BIN --case DIR --work DIR [--dtype f16 [--rel-tol R] [--bounds FILE] [--measure]]
// Exit 0 = pass, 1 = fail, 77 = fixture folder absent (skipped).
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { readSafetensors } = require('./lib/safetensors');
const { Decoder } = require('./lib/decoder');
const { VlmPackage, values, i64 } = require('./lib/vlm');

function parseArgs() {
  const a = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (k === 'measure') a[k] = true;
    else a[k] = argv[++i];
  }
  for (const k of ['archc', 'case', 'work'])
    if (!a[k]) { console.error(`missing --${k}`); process.exit(2); }
  return a;
}

const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);
const maxAbs = (d) => d.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
function maxAbsDiff(a, aOff, e, eOff, n) {
  let m = 0;
  for (let i = 0; i < n; i++) m = Math.max(m, Math.abs(a[aOff + i] - e[eOff + i]));
  return m;
}
function argmax(d, off, n) {
  let best = 0;
  for (let i = 1; i < n; i++) if (d[off + i] > d[off + best]) best = i;
  return best;
}
/// HF's top-1 minus top-2 logit.
function margin(d, off, n) {
  let a = -Infinity, b = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = d[off + i];
    if (v > a) { b = a; a = v; } else if (v > b) b = v;
  }
  return a - b;
}
/// Rows [lo, hi) of a safetensors tensor along its first axis.
function rowsOf(t, lo, hi) {
  const per = t.shape.slice(1).reduce((a, b) => a * b, 1);
  return { dtype: t.dtype, shape: [hi - lo, ...t.shape.slice(1)], data: t.data.slice(lo * per, hi * per) };
}

/// The half-precision bound, as check_dtype.js takes it: --rel-tol, else
/// the class's portable bound in tests/ort/f16_bounds.json (or --bounds).
function halfBound(a, cls) {
  if (a['rel-tol']) return Number(a['rel-tol']);
  const file = a.bounds || path.join(__dirname, 'f16_bounds.json');
  const bounds = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')).bounds : {};
  const b = bounds[cls];
  if (b === undefined) {
    console.log(`FAIL: ${file} has no half-precision bound for ${cls}: give --rel-tol`);
    process.exit(1);
  }
  return b.portable;
}

async function main() {
  const args = parseArgs();
  if (!fs.existsSync(path.join(args.case, 'expected.safetensors'))) {
    console.log(`FAIL: fixture ${args.case} not found (../shared/hf-golden-vlm absent)`);
    process.exit(1);
  }
  const half = args.dtype === 'f16';
  fs.mkdirSync(args.work, { recursive: true });
  const name = path.basename(args.case);
  const config = JSON.parse(fs.readFileSync(path.join(args.case, 'config.json'), 'utf8'));
  const cls = (config.architectures || [])[0];
  const relTol = args.measure ? 1 : half ? halfBound(args, cls) : 1e-4;
  let measured = 0;
  const type = config.model_type;
  const pkgDir = path.join(args.work, half ? 'pkg-f16' : 'pkg') + '/';
  fs.rmSync(pkgDir, { recursive: true, force: true });
  execFileSync(args.archc, [args.case, '-emit=onnx', '-o', pkgDir, ...(half ? ['--dtype=f16'] : [])],
    { stdio: ['ignore', 'inherit', 'inherit'] });

  const expFile = readSafetensors(path.join(args.case, 'expected.safetensors'));
  const exp = expFile.tensors;
  const ids = exp.input_ids, ref = exp.logits;
  const [B, S] = ids.shape, V = ref.shape[2];
  const tol = relTol * Math.max(1, maxAbs(ref.data));
  const rows = range(0, B).map((b) => range(0, S).map((s) => Number(ids.data[b * S + s])));
  const imageToken = config.image_token_id ?? config.image_token_index;
  const failures = [];
  const check = (label, diff, t) => {
    measured = Math.max(measured, diff / (t / relTol));
    const ok = diff <= t;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${half ? ' f16' : ''} ${label}: max|diff| = ${diff.toExponential(3)} (tol ${t.toExponential(3)})`);
    if (!ok) failures.push(label);
  };
  const pkg = await VlmPackage.load(pkgDir, half ? '_fp16' : '');

  // (w) -emit=weights lists exactly the checkpoint's tensors (vision,
  // projector, text; names, shapes).
  if (!half) {
    const listed = execFileSync(args.archc, [args.case, '-emit=weights'], { encoding: 'utf8' })
      .split('\n').filter((l) => l && !l.startsWith('//'))
      .map((l) => { const [n, rest] = [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)];
        return `${n} ${rest.slice(0, rest.indexOf(']') + 1)}`; });
    const ckpt = readSafetensors(path.join(args.case, 'model.safetensors')).tensors;
    const want = Object.keys(ckpt).map((n) => `${n} [${ckpt[n].shape.join(', ')}]`);
    const a = new Set(listed), b = new Set(want);
    const missing = want.filter((x) => !a.has(x)), extra = listed.filter((x) => !b.has(x));
    const ok = missing.length === 0 && extra.length === 0;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} (w) -emit=weights: ${listed.length} tensors, checkpoint ${want.length}` +
      (ok ? '' : `; missing ${missing.slice(0, 3)}, extra ${extra.slice(0, 3)}`));
    if (!ok) failures.push('(w) weights');
  }

  // Images of each row, in order (generated cases may have several).
  const perRow = expFile.metadata.images_per_row
    ? JSON.parse(expFile.metadata.images_per_row) : new Array(B).fill(1);
  const firstImage = (b) => perRow.slice(0, b).reduce((x, y) => x + y, 0);
  // Vision inputs of the images of rows [lo, hi) (Qwen: their patch rows;
  // SmolVLM: the rows' image slots).
  const qwen = type === 'qwen2_5_vl' || type === 'qwen3_vl';
  const visionInputs = (rowLo, rowHi) => {
    const v = {};
    const lo = type === 'smolvlm' ? rowLo : firstImage(rowLo);
    const hi = type === 'smolvlm' ? rowHi : firstImage(rowHi);
    if (qwen) {
      const g = exp.image_grid_thw;
      const counts = range(0, g.shape[0]).map((i) =>
        Number(g.data[3 * i]) * Number(g.data[3 * i + 1]) * Number(g.data[3 * i + 2]));
      const start = counts.slice(0, lo).reduce((a, b) => a + b, 0);
      const end = start + counts.slice(lo, hi).reduce((a, b) => a + b, 0);
      v.pixel_values = rowsOf(exp.pixel_values, start, end);
      v.image_grid_thw = rowsOf(g, lo, hi);
    } else {
      v.pixel_values = rowsOf(exp.pixel_values, lo, hi);
      if (exp.pixel_attention_mask) v.pixel_attention_mask = rowsOf(exp.pixel_attention_mask, lo, hi);
    }
    return v;
  };
  const positionsOf = (bs, lo, hi) => (qwen
    ? range(0, 3).map((a) => bs.map((b) => range(lo, hi).map((s) =>
      Number(exp.position_ids.data[(a * B + b) * S + s]))))
    : bs.map(() => range(lo, hi)));

  // (v) vision features, both images: HF's in the first D channels of
  // each row, the side channels after them.
  const vision = await pkg.encode(visionInputs(0, B));
  const feats = values(vision.image_features);
  const featRef = exp.image_features.data;
  const [N, D] = exp.image_features.shape;
  const W = vision.image_features.dims[1];
  let featDiff = vision.image_features.dims[0] === N && W >= D ? 0 : Infinity;
  for (let i = 0; i < N && featDiff !== Infinity; i++)
    featDiff = Math.max(featDiff, maxAbsDiff(feats, i * W, featRef, i * D, D));
  check('(v) image_features', featDiff, relTol * Math.max(1, maxAbs(featRef)));
  if (type === 'gemma3') {
    // One marker channel, 1 at every image token.
    let ok = W === D + 1;
    for (let i = 0; ok && i < N; i++) ok = feats[i * W + D] === 1;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${half ? ' f16' : ''} (v) image marker channel: ${W - D} ` +
      'channel(s) after the features, all 1');
    if (!ok) failures.push('(v) image marker');
  }

  // (a) batch-2 prefill through embedding and decoder.
  const embeds = await pkg.embed(rows, vision.image_features);
  // (e) The side channels of inputs_embeds: the features' at image tokens
  // (in order), zeros at text tokens; Gemma 3's marker is the processor's
  // token_type_ids.
  {
    const e = values(embeds.inputs_embeds);
    let ok = embeds.inputs_embeds.dims.join() === [B, S, W].join(), img = 0;
    for (let t = 0; ok && t < B * S; t++) {
      const isImage = rows.flat()[t] === imageToken;
      for (let c = D; ok && c < W; c++) ok = e[t * W + c] === (isImage ? feats[img * W + c] : 0);
      if (isImage) img++;
      if (ok && exp.token_type_ids) ok = e[t * W + D] === Number(exp.token_type_ids.data[t]);
    }
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${half ? ' f16' : ''} (e) inputs_embeds side channels (${W - D}): ` +
      `the features' at image tokens, zeros elsewhere${exp.token_type_ids ? '; marker = token_type_ids' : ''}`);
    if (!ok) failures.push('(e) side channels');
  }
  const full = await pkg.decode(embeds, rows.map(() => new Array(S).fill(1)),
    positionsOf(range(0, B), 0, S), pkg.emptyState(B));
  check('(a) prefill logits', maxAbsDiff(full.logits, 0, ref.data, 0, B * S * V), tol);

  // (g) greedy continuation of row 0 through the cache.
  const gIds = exp.greedy_ids, gLogits = exp.greedy_logits;
  const steps = gLogits.shape[1];
  const firstGap = margin(gLogits.data, 0, V);
  const want = range(S, S + steps).map((k) => Number(gIds.data[k]));
  const v0 = await pkg.encode(visionInputs(0, 1));
  let out = await pkg.decode(await pkg.embed([rows[0]], v0.image_features), [new Array(S).fill(1)],
    positionsOf([0], 0, S), pkg.emptyState(1));
  const got = [];
  let worst = 0, lastToken = argmax(out.logits, (S - 1) * V, V);
  let tokensOk = true;
  for (let j = 0; j < steps; j++) {
    const off = j === 0 ? (S - 1) * V : 0;
    worst = Math.max(worst, maxAbsDiff(out.logits, off, gLogits.data, j * V, V));
    const tok = argmax(out.logits, off, V);
    got.push(tok);
    // In f16 a token after the first may differ only where HF's own margin
    // is small.
    if (tok !== want[j] && !(half && j > 0 && margin(gLogits.data, j * V, V) <= 2 * tol)) tokensOk = false;
    if (tok !== want[j]) break; // the continuations diverge
    if (j + 1 === steps) break;
    lastToken = want[j];
    const t = S + j; // the new token's index in the sequence
    const pos = qwen
      ? range(0, 3).map((a) => [[Number(exp.greedy_position_ids.data[a * (S + steps) + t])]])
      : [[t]];
    const e = await pkg.embed([[lastToken]], null);
    out = await pkg.decode(e, [new Array(t + 1).fill(1)], pos, out.state);
  }
  console.log(`${tokensOk ? 'ok  ' : 'FAIL'} ${name}${half ? ' f16' : ''} (g) greedy tokens ${JSON.stringify(got)} (HF ${JSON.stringify(want)})`);
  if (!tokensOk) failures.push('(g) greedy tokens');
  if (got.length === steps) check('(g) greedy step logits', worst, tol);
  if (args.measure) {
    console.log(JSON.stringify({ case: name, class: cls, target: 'portable', relative_error: measured,
      first_gap: firstGap / Math.max(1, maxAbs(ref.data)), tokens_equal: got.length === steps &&
        got.every((t, j) => t === want[j]) }));
    return;
  }

  // (t) text-only prompt: the package equals the text model.
  if (!half) {
    const textModel = path.join(args.work, 'text', 'model.onnx');
    fs.mkdirSync(path.dirname(textModel), { recursive: true });
    execFileSync(args.archc, [args.case, '-emit=onnx', '-o', textModel],
      { stdio: ['ignore', 'inherit', 'inherit'] });
    const text = await Decoder.load(textModel);
    const prompt = rows[0].map((t) => (t === imageToken ? 3 : t));
    const P = prompt.length;
    let a = await text.step([prompt], [new Array(P).fill(1)], [range(0, P)], text.emptyState(1));
    const pos3 = (lo, hi) => (qwen ? range(0, 3).map(() => [range(lo, hi)]) : [range(lo, hi)]);
    let p = await pkg.decode(await pkg.embed([prompt], null), [new Array(P).fill(1)], pos3(0, P),
      pkg.emptyState(1));
    let diff = maxAbsDiff(p.logits, 0, a.logits, 0, P * V);
    for (let j = 0; j < 2; j++) {
      const tok = argmax(a.logits, (j === 0 ? P - 1 : 0) * V, V);
      const t = P + j;
      a = await text.step([[tok]], [new Array(t + 1).fill(1)], [[t]], a.state);
      p = await pkg.decode(await pkg.embed([[tok]], null), [new Array(t + 1).fill(1)], pos3(t, t + 1),
        p.state);
      diff = Math.max(diff, maxAbsDiff(p.logits, 0, a.logits, 0, V));
    }
    check('(t) text-only package = text model', diff, tol);
  }

  if (failures.length) {
    console.log(`FAIL ${name}: ${failures.join(', ')}`);
    process.exit(1);
  }
  console.log(`PASS ${name}`);
}

main().catch((e) => { console.error(e); process.exit(1); });
