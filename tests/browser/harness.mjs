// The browser harness of the client tests (check_browser.mjs) and of the
// browser benchmark (bench/browser_decode.mjs): a static HTTP server on
// 127.0.0.1 that serves only the harness page, transformers.js' browser
// bundle, onnxruntime-web's WASM files and the model folders it is given,
// and headless Chromium driven by puppeteer-core.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.wasm': 'application/wasm', '.json': 'application/json', '.onnx': 'application/octet-stream',
};

/// Where transformers.js is installed (tests/transformersjs, the version
/// the node client tests pin) and onnxruntime-web beside it: the browser
/// bundle dist/transformers.js carries onnxruntime-web's JavaScript, the
/// .wasm/.mjs pair it loads comes from onnxruntime-web/dist. Their versions
/// must agree (the pair belongs to one onnxruntime-web build).
export function clientFiles() {
  const tjsDir = path.join(here, '..', 'transformersjs');
  const nm = path.join(tjsDir, 'node_modules');
  const tjsRoot = path.join(nm, '@huggingface', 'transformers');
  const tjsPkg = path.join(tjsRoot, 'package.json');
  // onnxruntime-web as transformers.js resolves it: its own copy if it has
  // one, else the hoisted one.
  const ortPkg = [path.join(tjsRoot, 'node_modules', 'onnxruntime-web', 'package.json'),
    path.join(nm, 'onnxruntime-web', 'package.json')].find((f) => fs.existsSync(f));
  if (!fs.existsSync(tjsPkg) || !ortPkg)
    throw new Error(`transformers.js is not installed in ${tjsDir} (npm ci --ignore-scripts there)`);
  const bundle = path.join(path.dirname(tjsPkg), 'dist', 'transformers.js');
  const ortDist = path.join(path.dirname(ortPkg), 'dist');
  const ortVersion = JSON.parse(fs.readFileSync(ortPkg, 'utf8')).version;
  const text = fs.readFileSync(bundle, 'utf8');
  if (!text.includes(`onnxruntime-web@${ortVersion}/`))
    throw new Error(`${bundle} does not bundle onnxruntime-web ${ortVersion} (${ortPkg})`);
  return {
    bundle, ortDist, ortVersion,
    tjsVersion: JSON.parse(fs.readFileSync(tjsPkg, 'utf8')).version,
  };
}

/// Starts the server on 127.0.0.1, an ephemeral port. routes: URL prefix
/// ('/models/') -> a directory or a file. Only GET/HEAD of files under a
/// route; nothing else (no directory listing, no '..'). With isolated, every
/// response carries the COOP/COEP headers that make the page
/// crossOriginIsolated (SharedArrayBuffer, so onnxruntime-web's threads).
export async function startServer(routes, { isolated = false } = {}) {
  const table = Object.entries(routes).sort((a, b) => b[0].length - a[0].length);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const headers = {};
    if (isolated) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
    }
    const send = (code, body) => { res.writeHead(code, headers); res.end(body); };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed');
    let file = null;
    const p = decodeURIComponent(url.pathname);
    for (const [prefix, target] of table) {
      if (p === prefix || (prefix.endsWith('/') && p.startsWith(prefix))) {
        const rest = p.slice(prefix.length);
        if (rest.split('/').includes('..')) return send(403, 'forbidden');
        file = rest ? path.join(target, rest) : target;
        break;
      }
    }
    let st;
    try { st = file && fs.statSync(file); } catch { st = null; }
    if (p === '/favicon.ico') return send(204, '');
    if (!st || !st.isFile()) {
      console.log(`  [server] 404 ${p}`);
      return send(404, 'not found');
    }
    headers['Content-Type'] = TYPES[path.extname(file)] || 'application/octet-stream';
    headers['Content-Length'] = st.size;
    headers['Cache-Control'] = 'no-store';
    res.writeHead(200, headers);
    if (req.method === 'HEAD') return res.end();
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  server.unref();
  const { port } = server.address();
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}

/// The routes of the harness page: the page itself, the bundle, the WASM
/// pair(s) and the model folders (name -> directory).
export function harnessRoutes(files, models) {
  const routes = {
    '/': path.join(here, 'page.html'),
    '/page.html': path.join(here, 'page.html'),
    '/page.mjs': path.join(here, 'page.mjs'),
    '/tjs/transformers.js': files.bundle,
  };
  for (const f of fs.readdirSync(files.ortDist))
    if (/^ort-wasm-simd-threaded(\.[a-z]+)?\.(wasm|mjs)$/.test(f)) routes[`/ort/${f}`] = path.join(files.ortDist, f);
  for (const [name, dir] of Object.entries(models)) routes[`/models/${name}/`] = dir;
  return routes;
}

/// Launches Chromium headless (no sandbox: the tests run as root in CI).
/// puppeteer-core downloads nothing; the binary is Debian's chromium.
export async function launchBrowser(executablePath) {
  if (!fs.existsSync(executablePath))
    throw new Error(`${executablePath} not found: install Debian's chromium (scripts/install-deps.sh)`);
  let puppeteer;
  try {
    puppeteer = (await import('puppeteer-core')).default;
  } catch {
    throw new Error(`puppeteer-core is not installed in ${here} (npm ci --ignore-scripts there)`);
  }
  return puppeteer.launch({
    executablePath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
      '--disable-extensions', '--disable-background-networking'],
  });
}

/// Opens the harness page with the given query (wasm: which onnxruntime-web
/// WASM build; threads: numThreads, default onnxruntime-web's own) and waits
/// until it has loaded transformers.js. Console errors of the page are
/// echoed with a prefix.
export async function openPage(browser, origin, query = {}, timeoutMs = 60000) {
  const page = await browser.newPage();
  page.setDefaultTimeout(timeoutMs);
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warn' || process.env.ARCHC_BROWSER_VERBOSE)
      console.log(`  [page ${m.type()}] ${m.text()}`);
  });
  page.on('pageerror', (e) => console.log(`  [page exception] ${e.message}`));
  const q = new URLSearchParams(query).toString();
  await page.goto(`${origin}/page.html${q ? '?' + q : ''}`, { waitUntil: 'load', timeout: timeoutMs });
  await page.waitForFunction('window.archc && (window.archc.ready || window.archc.error)', { timeout: timeoutMs });
  const err = await page.evaluate('window.archc.error');
  if (err) throw new Error(`the harness page failed to load transformers.js: ${err}`);
  return page;
}

/// Runs fn() with a bound: rejects after ms.
export function within(ms, what, promise) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms / 1000} s`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}
