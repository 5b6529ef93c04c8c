// The harness page (harness.mjs serves it): loads transformers.js' browser
// bundle from the local server and exposes window.archc.run(entry), which
// loads one model folder from /models/ with from_pretrained(name) and no
// options - config.json's transformers.js_config decides the dtype, as for
// a user - and returns generate()'s greedy ids with its timings.
//
// Query: wasm=asyncify|plain|jspi picks onnxruntime-web's WASM build
// (default asyncify: transformers.js' own default for a browser with
// WebGPU, which the bundle would fetch from a CDN); threads=N sets
// env.backends.onnx.wasm.numThreads (default: onnxruntime-web's own choice).
window.archc = { ready: false, error: null };
try {
  const tjs = await import('/tjs/transformers.js');
  const { env, Tensor } = tjs;
  const q = new URLSearchParams(location.search);
  const build = q.get('wasm') || 'asyncify';
  const suffix = build === 'plain' ? '' : `.${build}`;
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = `${location.origin}/models/`;
  env.useBrowserCache = false;
  env.backends.onnx.wasm.wasmPaths = {
    mjs: `${location.origin}/ort/ort-wasm-simd-threaded${suffix}.mjs`,
    wasm: `${location.origin}/ort/ort-wasm-simd-threaded${suffix}.wasm`,
  };
  if (q.get('threads')) env.backends.onnx.wasm.numThreads = Number(q.get('threads'));

  const tensor = (t) => t.type === 'int64'
    ? new Tensor('int64', BigInt64Array.from(t.data.map(BigInt)), t.dims)
    : new Tensor(t.type, Float32Array.from(t.data), t.dims);

  // entry: { model: folder name under /models/, cls: transformers.js class
  // (default AutoModelForCausalLM), inputs: { name: { type, data, dims } }
  // (input_ids and attention_mask; a VLM adds pixel_values), steps,
  // repeat: generate() calls to time after the first, force: no early end
  // of sequence (timings) }.
  window.archc.run = async (entry) => {
    const cls = tjs[entry.cls || 'AutoModelForCausalLM'];
    if (!cls) throw new Error(`transformers.js has no class ${entry.cls}`);
    const t0 = performance.now();
    const model = await cls.from_pretrained(entry.model);
    const t1 = performance.now();
    const inputs = {};
    for (const [k, v] of Object.entries(entry.inputs)) inputs[k] = tensor(v);
    const gen = async (n) => {
      const s = performance.now();
      const out = await model.generate({ ...inputs, max_new_tokens: n, ...(entry.force ? { min_new_tokens: n } : {}), do_sample: false });
      return { out, ms: performance.now() - s };
    };
    const first = await gen(entry.steps);
    const S = entry.inputs.input_ids.dims[1];
    const [, T] = first.out.dims;
    const ids = Array.from(first.out.data.slice(S, T), Number);
    const timings = { load_ms: t1 - t0, first_generate_ms: first.ms, generate_ms: [], prefill_ms: [] };
    for (let r = 0; r < (entry.repeat || 0); r++) {
      timings.generate_ms.push((await gen(entry.steps)).ms);
      timings.prefill_ms.push((await gen(1)).ms);
    }
    await model.dispose();
    return { ids, timings };
  };
  window.archc.info = () => ({
    transformers: tjs.env.version,
    ort: env.backends.onnx.versions?.web,
    crossOriginIsolated: self.crossOriginIsolated,
    hardwareConcurrency: navigator.hardwareConcurrency,
    numThreads: env.backends.onnx.wasm.numThreads,
    wasm: build,
  });
  window.archc.ready = true;
} catch (e) {
  window.archc.error = String(e && e.stack || e);
}
