// Renders bot message activities in Bot Framework Web Chat (index.html) in headless Chromium and
// prints, as JSON, what Web Chat put on the page plus every console error / uncaught exception.
//
// usage: node render.mjs CASES.json [SCREENSHOT_DIR]
//   CASES.json: {"cases": [{"name": "...", "activity": {"text": ..., "textFormat": ..., "entities": [...]}}]}
//   stdout:     {"browser": "...", "cases": [{"name", "inspect", "errors": [...]}]}
//
// Chromium (CHROMIUM_BIN, default /usr/bin/chromium) is driven over the DevTools protocol through
// --remote-debugging-pipe (fd 3 = commands in, fd 4 = replies/events out, NUL-terminated JSON), so
// only Node built-ins are needed: no WebSocket, no port, no puppeteer. The page is a file:// URL and
// every other request is blocked, so nothing leaves the machine.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const PAGE = pathToFileURL(join(HERE, 'index.html')).href;
const BUNDLE = join(HERE, 'node_modules', 'botframework-webchat', 'dist', 'webchat.js');
const CASE_TIMEOUT_MS = 30000;

const [casesPath, screenshotDir] = process.argv.slice(2);
if (!casesPath) {
  console.error('usage: node render.mjs CASES.json [SCREENSHOT_DIR]');
  process.exit(2);
}
readFileSync(BUNDLE, { flag: 'r' }); // fail early and clearly when npm ci has not run
const { cases } = JSON.parse(readFileSync(casesPath, 'utf8'));

let finished = false;
const profileDir = mkdtempSync(join(tmpdir(), 'cg-chromium-'));
const chromium = spawn(
  process.env.CHROMIUM_BIN || '/usr/bin/chromium',
  [
    '--headless=new',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--no-first-run',
    '--no-default-browser-check',
    '--disable-extensions',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--allow-file-access-from-files',
    '--remote-debugging-pipe',
    `--user-data-dir=${profileDir}`,
    '--window-size=900,1000',
    'about:blank'
  ],
  { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] }
);
let chromiumStderr = '';
chromium.stderr.on('data', d => {
  chromiumStderr = (chromiumStderr + d).slice(-4000);
});
const toBrowser = chromium.stdio[3];
const fromBrowser = chromium.stdio[4];

const watchdog = setTimeout(() => fail(new Error('render.mjs: overall timeout')), 25000 + CASE_TIMEOUT_MS * cases.length);

function cleanup() {
  try {
    chromium.kill('SIGKILL');
  } catch {}
  try {
    rmSync(profileDir, { recursive: true, force: true });
  } catch {}
}

function fail(err) {
  clearTimeout(watchdog);
  console.error(String(err && err.stack ? err.stack : err));
  console.error('chromium stderr (tail):\n' + chromiumStderr);
  cleanup();
  process.exit(1);
}
chromium.on('error', fail);
chromium.on('exit', (code, sig) => {
  if (!finished) fail(new Error(`chromium exited early: ${code ?? sig}`));
});

// ---------------------------------------------------------------- DevTools protocol over the pipe
let nextId = 0;
const pending = new Map();
const listeners = new Set();
let inbuf = Buffer.alloc(0);
fromBrowser.on('data', chunk => {
  inbuf = Buffer.concat([inbuf, chunk]);
  let nul;
  while ((nul = inbuf.indexOf(0)) >= 0) {
    const msg = JSON.parse(inbuf.subarray(0, nul).toString('utf8'));
    inbuf = inbuf.subarray(nul + 1);
    if (msg.id !== undefined && pending.has(msg.id)) {
      const { resolve, reject, method } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) reject(new Error(`${method}: ${JSON.stringify(msg.error)}`));
      else resolve(msg.result);
    } else if (msg.method) {
      for (const l of listeners) l(msg);
    }
  }
});

function send(method, params = {}, sessionId) {
  const id = ++nextId;
  const msg = { id, method, params };
  if (sessionId) msg.sessionId = sessionId;
  toBrowser.write(JSON.stringify(msg) + '\0');
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([
    promise.finally(() => clearTimeout(t)),
    new Promise((_, reject) => {
      t = setTimeout(() => reject(new Error(`timeout: ${what}`)), ms);
    })
  ]);
}

function remoteValueText(a) {
  if (a.type === 'string') return a.value;
  if (a.value !== undefined) return JSON.stringify(a.value);
  return a.description ?? a.type;
}

// ---------------------------------------------------------------- one case
async function renderCase(c, index) {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const errors = [];
  const onEvent = msg => {
    if (msg.sessionId !== sessionId) return;
    const p = msg.params;
    if (msg.method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert')) {
      errors.push(`console.${p.type}: ` + p.args.map(remoteValueText).join(' '));
    } else if (msg.method === 'Runtime.exceptionThrown') {
      const d = p.exceptionDetails;
      errors.push('uncaught: ' + (d.exception?.description ?? d.text));
    } else if (msg.method === 'Log.entryAdded' && p.entry.level === 'error') {
      errors.push(`log (${p.entry.source}): ${p.entry.text}${p.entry.url ? ' ' + p.entry.url : ''}`);
    }
  };
  listeners.add(onEvent);
  try {
    await send('Runtime.enable', {}, sessionId);
    await send('Log.enable', {}, sessionId);
    await send('Page.enable', {}, sessionId);
    // Offline: everything except our own file:// page and bundle is refused.
    await send('Fetch.enable', { patterns: [{ urlPattern: '*' }] }, sessionId);
    const onRequest = msg => {
      if (msg.sessionId !== sessionId || msg.method !== 'Fetch.requestPaused') return;
      const { requestId, request } = msg.params;
      if (request.url.startsWith('file://') || request.url.startsWith('data:') || request.url.startsWith('blob:')) {
        send('Fetch.continueRequest', { requestId }, sessionId).catch(() => {});
      } else {
        errors.push(`network request attempted (blocked): ${request.url}`);
        send('Fetch.failRequest', { requestId, errorReason: 'BlockedByClient' }, sessionId).catch(() => {});
      }
    };
    listeners.add(onRequest);

    const loaded = new Promise(resolve => {
      const l = msg => {
        if (msg.sessionId === sessionId && msg.method === 'Page.loadEventFired') {
          listeners.delete(l);
          resolve();
        }
      };
      listeners.add(l);
    });
    await send('Page.navigate', { url: PAGE }, sessionId);
    await withTimeout(loaded, 15000, 'page load');

    const evaluate = async expression => {
      const r = await send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, sessionId);
      if (r.exceptionDetails) {
        throw new Error(`${expression.slice(0, 60)}: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
      }
      return r.result.value;
    };
    const hasWebChat = await evaluate('typeof window.WebChat === "object" && typeof window.WebChat.renderWebChat');
    if (hasWebChat !== 'function') throw new Error('window.WebChat.renderWebChat missing: bundle not loaded');
    await withTimeout(evaluate(`window.citegateRender(${JSON.stringify(c.activity)})`), CASE_TIMEOUT_MS, 'render');
    const inspect = await withTimeout(evaluate("window.citegateInspect()"), CASE_TIMEOUT_MS, "inspect");

    if (screenshotDir) {
      const shot = await send('Page.captureScreenshot', { format: 'png' }, sessionId);
      writeFileSync(join(screenshotDir, `${String(index).padStart(2, '0')}-${c.name.replace(/[^A-Za-z0-9_.-]/g, '_')}.png`),
        Buffer.from(shot.data, 'base64'));
    }
    listeners.delete(onRequest);
    return { name: c.name, inspect, errors };
  } finally {
    listeners.delete(onEvent);
    await send('Target.closeTarget', { targetId }).catch(() => {});
  }
}

try {
  const version = await withTimeout(send('Browser.getVersion'), 15000, 'chromium start');
  const out = { browser: version.product, cases: [] };
  for (const [i, c] of cases.entries()) out.cases.push(await renderCase(c, i));
  finished = true;
  clearTimeout(watchdog);
  await send('Browser.close').catch(() => {});
  cleanup();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
} catch (e) {
  fail(e);
}
