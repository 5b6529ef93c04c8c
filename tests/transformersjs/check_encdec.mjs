#!/usr/bin/env node
// Loads archc's model folder of one encoder, encoder-decoder or speech case
// (../shared/hf-golden-encdec, or a generated case of that format) with
// transformers.js 4.3.1 as a user would, from `archc CASE/ -emit=onnx -o
// OUT/` with no manual step:
//   encoders: the Auto class of the configured head (AutoModel,
//     AutoModelForMaskedLM, AutoModelForSequenceClassification,
//     AutoModelForTokenClassification).from_pretrained(OUT), called on the
//     case's input_ids / attention_mask (/ token_type_ids): the outputs
//     that class returns (a base model's last_hidden_state and pooler_output,
//     a head's logits) on the real positions, and the sentence-transformers mean
//     pooling (what feature-extraction computes with pooling "mean") of
//     last_hidden_state;
//   encoder-decoders: AutoModelForSeq2SeqLM.generate() on row 0
//     (text2text-generation / translation without the tokenizer): the
//     case's greedy ids;
//   Whisper: AutoModelForSpeechSeq2Seq.generate() on row 0's input_features
//     (automatic-speech-recognition after the feature extractor): the
//     greedy ids.
// Tolerance: 1e-4 x max(1, max|expected|) per tensor (the fixtures' rule).
// With --folder DIR --dtype DTYPE --expected FILE: an already compiled
// folder (tests/quant/run_quant_encdec_case.py: archc --quant) loaded with
// that dtype (q4, int8: onnx/*_q4.onnx, *_int8.onnx) against FILE (the
// reference over the dequantized weights); --dtype default loads it with
// no dtype, as config.json's transformers.js_config.dtype says.
// Usage: check_encdec.mjs --archc BIN --case DIR --work DIR
//                         [--folder DIR --dtype DTYPE --expected FILE]
// Exit 0 = pass, 1 = fail.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import {
  AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoModelForTokenClassification,
  AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq, env, Tensor,
} from '@huggingface/transformers';

const require = createRequire(import.meta.url);
const { readSafetensors } = require('../ort/lib/safetensors.js');
const { parseArgs } = require('../ort/lib/args.js');

env.allowRemoteModels = false;
env.allowLocalModels = true;

const maxAbs = (d) => d.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
const i64 = (data, dims) => new Tensor('int64', BigInt64Array.from(Array.from(data, (v) => BigInt(v))), dims);

async function main() {
  const args = parseArgs(['archc', 'case', 'work']);
  const name = path.basename(path.resolve(args.case));
  const cfg = JSON.parse(fs.readFileSync(path.join(args.case, 'config.json'), 'utf8'));
  const cls = (cfg.architectures || [''])[0];
  fs.rmSync(args.work, { recursive: true, force: true });
  fs.mkdirSync(args.work, { recursive: true });
  let out = path.join(args.work, 'model');
  if (args.folder) out = args.folder;
  else execFileSync(args.archc, [args.case, '-emit=onnx', '-o', out + '/'], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (args.dtype && !args.expected) { console.error('--dtype needs --expected'); process.exit(2); }
  const E = readSafetensors(args.expected || path.join(args.case, 'expected.safetensors')).tensors;
  // --dtype default: the folder's own (config.json's transformers.js_config.dtype).
  const opts = { local_files_only: true };
  if (args.dtype !== 'default') opts.dtype = args.dtype || 'fp32';
  const failures = [];
  const check = (label, diff, ref) => {
    const tol = 1e-4 * Math.max(1, maxAbs(ref));
    const ok = diff <= tol;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} ${label}: max|diff| = ${diff.toExponential(3)} (tol ${tol.toExponential(3)})`);
    if (!ok) failures.push(label);
  };
  if (!E.decoder_input_ids) {
    const Auto = cls.includes('ForMaskedLM') ? AutoModelForMaskedLM
      : cls.includes('ForSequenceClassification') ? AutoModelForSequenceClassification
        : cls.includes('ForTokenClassification') ? AutoModelForTokenClassification : AutoModel;
    const model = await Auto.from_pretrained(out, opts);
    const [B, S] = E.input_ids.shape;
    const feeds = { input_ids: i64(E.input_ids.data, [B, S]), attention_mask: i64(E.attention_mask.data, [B, S]) };
    if (E.token_type_ids) feeds.token_type_ids = i64(E.token_type_ids.data, [B, S]);
    const res = await model(feeds);
    const mask = Array.from(E.attention_mask.data, Number);
    let compared = 0;
    // A head class returns its logits only (transformers.js' MaskedLMOutput,
    // SequenceClassifierOutput, TokenClassifierOutput).
    const keys = Auto === AutoModel ? ['last_hidden_state', 'pooler_output'] : ['logits'];
    for (const key of keys) {
      if (!E[key]) continue;
      const got = res[key];
      if (!got) { console.log(`FAIL ${name}: transformers.js returned no ${key}`); failures.push(key); continue; }
      const want = E[key];
      const W = want.shape[want.shape.length - 1];
      const perRow = want.shape.length === 3;
      let d = 0;
      for (let i = 0; i < want.data.length; i++) {
        const pos = Math.floor(i / W);
        if (perRow && !mask[pos]) continue;
        d = Math.max(d, Math.abs(got.data[i] - want.data[i]));
      }
      check(`${key}${perRow ? ' on real positions' : ''}`, d, want.data);
      compared++;
    }
    if (E.mean_pooled) {
      const h = res.last_hidden_state.data, H = E.mean_pooled.shape[1];
      let d = 0;
      for (let b = 0; b < B; b++) {
        const acc = new Float64Array(H);
        let n = 0;
        for (let s = 0; s < S; s++) {
          if (!mask[b * S + s]) continue;
          n++;
          for (let i = 0; i < H; i++) acc[i] += h[(b * S + s) * H + i];
        }
        for (let i = 0; i < H; i++) d = Math.max(d, Math.abs(acc[i] / n - E.mean_pooled.data[b * H + i]));
      }
      check('mean pooling of last_hidden_state', d, E.mean_pooled.data);
      compared++;
    }
    if (!compared) failures.push('nothing compared');
  } else {
    const speech = !!E.input_features;
    const model = await (speech ? AutoModelForSpeechSeq2Seq : AutoModelForSeq2SeqLM).from_pretrained(out, opts);
    const steps = E.greedy_logits.shape[1];
    let res;
    if (speech) {
      const [, M, F] = E.input_features.shape;
      const feats = new Tensor('float32', E.input_features.data.slice(0, M * F), [1, M, F]);
      res = await model.generate({ inputs: feats, max_new_tokens: steps, do_sample: false, num_beams: 1 });
    } else {
      const S = E.input_ids.shape[1];
      res = await model.generate({
        inputs: i64(E.input_ids.data.slice(0, S), [1, S]),
        attention_mask: i64(E.attention_mask.data.slice(0, S), [1, S]),
        max_new_tokens: steps, do_sample: false, num_beams: 1,
      });
    }
    const got = Array.from(res.data ?? res.sequences.data, Number);
    const want = Array.from(E.greedy_ids.data, Number);
    const same = got.length === want.length && got.every((t, i) => t === want[i]);
    console.log(`${same ? 'ok  ' : 'FAIL'} ${name} generate(): got [${got}] want [${want}]`);
    if (!same) failures.push('generate');
  }
  if (failures.length) {
    console.log(`${name}: ${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log(`${name}: transformers.js reproduces the case`);
}

main().catch((e) => { console.error(e); process.exit(1); });
