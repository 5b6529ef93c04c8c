#!/usr/bin/env node
// transformers.js' text pipelines on archc's encoder folders, with no manual
// step: make_pipeline_case.py gives two fixtures a WordPiece tokenizer and
// the numpy reference's answers; archc compiles each input folder
// (`archc IN/ -emit=onnx -o OUT/`, which copies the tokenizer), and
//   pipeline('feature-extraction', OUT)(texts, {pooling: 'mean', normalize: true})
//     must give the reference's normalised mean embeddings of a padded batch,
//   pipeline('fill-mask', OUT)(text) the reference's top-5 tokens and scores,
// within 1e-4 x max(1, max|expected|); and on three encoder-decoder fixtures
// given a word-level tokenizer, pipeline('text2text-generation' (T5),
// 'translation' (Marian), 'summarization' (BART), OUT)(text) must return
// the text of Hugging Face's greedy ids; the tokenizer's ids are checked
// first.
// Usage: check_pipelines.mjs --archc BIN --python PY --shared DIR --work DIR
// Exit 0 = pass, 1 = fail.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { pipeline, env } from '@huggingface/transformers';

env.allowRemoteModels = false;
env.allowLocalModels = true;

const a = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
for (const k of ['archc', 'python', 'shared', 'work'])
  if (!a[k]) { console.error(`missing --${k}`); process.exit(2); }

const here = path.dirname(new URL(import.meta.url).pathname);
const inDir = path.join(a.work, 'in');
fs.rmSync(a.work, { recursive: true, force: true });
execFileSync(a.python, [path.join(here, 'make_pipeline_case.py'), a.shared, inDir], { stdio: 'inherit' });
const E = JSON.parse(fs.readFileSync(path.join(inDir, 'expected.json'), 'utf8'));
const failures = [];
const report = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};
const tolOf = (vals) => 1e-4 * Math.max(1, ...vals.map(Math.abs));
const same = (x, y) => JSON.stringify(x) === JSON.stringify(y);

function compile(task) {
  const out = path.join(a.work, 'out', task);
  execFileSync(a.archc, [path.join(inDir, task) + '/', '-emit=onnx', '-o', out + '/'],
    { stdio: ['ignore', 'inherit', 'inherit'] });
  return out;
}

async function main() {
  {
    const e = E['feature-extraction'];
    const pipe = await pipeline('feature-extraction', compile('feature-extraction'),
      { local_files_only: true, dtype: 'fp32' });
    const enc = pipe.tokenizer(e.texts, { padding: true, truncation: true });
    const ids = enc.input_ids.tolist().map((r) => r.map(Number));
    report(same(ids, e.input_ids), `feature-extraction: tokenizer ids ${JSON.stringify(ids)}`);
    const res = await pipe(e.texts, { pooling: 'mean', normalize: true });
    const got = res.tolist();
    const want = e.embeddings;
    let d = 0;
    for (let b = 0; b < want.length; b++)
      for (let i = 0; i < want[b].length; i++) d = Math.max(d, Math.abs(got[b][i] - want[b][i]));
    const tol = tolOf(want.flat());
    report(d <= tol, `feature-extraction: mean-pooled normalised embeddings, max|diff| = ${d.toExponential(3)} (tol ${tol.toExponential(3)})`);
  }
  {
    const e = E['fill-mask'];
    const pipe = await pipeline('fill-mask', compile('fill-mask'), { local_files_only: true, dtype: 'fp32' });
    const ids = Array.from(pipe.tokenizer(e.text).input_ids.data, Number);
    report(same(ids, e.input_ids), `fill-mask: tokenizer ids ${JSON.stringify(ids)}`);
    const res = await pipe(e.text, { top_k: 5 });
    const gotIds = res.map((r) => r.token);
    report(same(gotIds, e.top_ids), `fill-mask: top-5 tokens ${JSON.stringify(gotIds)} (want ${JSON.stringify(e.top_ids)})`);
    const d = Math.max(...res.map((r, i) => Math.abs(r.score - e.top_scores[i])));
    const tol = tolOf(e.top_scores);
    report(d <= tol, `fill-mask: top-5 scores, max|diff| = ${d.toExponential(3)} (tol ${tol.toExponential(3)})`);
  }
  // Encoder-decoders through the text pipelines: the tokenizer gives the
  // fixture's input ids, and the pipeline's text is HF's greedy ids.
  for (const task of ['text2text-generation', 'translation', 'summarization']) {
    const e = E[task];
    const pipe = await pipeline(task, compile(task), { local_files_only: true, dtype: 'fp32' });
    const ids = Array.from(pipe.tokenizer(e.text).input_ids.data, Number);
    report(same(ids, e.input_ids), `${task} (${e.case}): tokenizer ids ${JSON.stringify(ids)}`);
    const res = await pipe(e.text, { max_new_tokens: e.max_new_tokens });
    const key = task === 'translation' ? 'translation_text'
      : task === 'summarization' ? 'summary_text' : 'generated_text';
    const got = res[0][key];
    report(got === e.generated_text,
      `${task} (${e.case}): "${got}" (HF's greedy ids: "${e.generated_text}")`);
  }
  if (failures.length) {
    console.log(`${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log('transformers.js pipelines reproduce the reference');
}

main().catch((e) => { console.error(e); process.exit(1); });
