// Headless Chromium (system /usr/bin/chromium via playwright-core) opening
// checks/clients/node/page.html from a static server on another loopback
// origin, and calling one of the page's functions against hermes-trio.
//
// Cases (config fields in brackets):
//   text_plain  [page_url, url, body]           page.attackTextPlain(url, body)
//   stream      [page_url, url, key, body, screenshot]  page.streamChat(...), then a screenshot
//   sdk         [page_url, base_url, key, body, screenshot]  the openai npm client in the page
//   rebind      [page_url, body, rules]         page.sameOriginChat('/v1/chat/completions', body)
import { emit, main, require, version } from './_common.mjs';

const { chromium } = require('playwright-core');

const FLAGS = [
  '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

async function withPage(config, fn) {
  const args = [...FLAGS];
  if (config.rules) args.push(`--host-resolver-rules=${config.rules}`);
  emit('browser', { playwright: version('playwright-core') });
  // launch() gives a fresh temporary profile (--user-data-dir) and passes
  // --headless and --no-sandbox itself.
  const browser = await chromium.launch({
    executablePath: process.env.HERMES_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    chromiumSandbox: false,
    args,
    timeout: 20000,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 420 } });
    page.on('console', (msg) => emit('console', { type: msg.type(), text: msg.text().slice(0, 500) }));
    page.on('pageerror', (err) => emit('pageerror', { message: String(err).slice(0, 500) }));
    page.on('requestfailed', (req) => emit('requestfailed', {
      url: req.url(), method: req.method(), failure: req.failure()?.errorText,
    }));
    page.on('request', (req) => emit('request', {
      url: req.url(), method: req.method(), headers: req.headers(),
    }));
    page.on('response', (res) => emit('response', {
      url: res.url(), status: res.status(), headers: res.headers(),
    }));
    const response = await page.goto(config.page_url, { timeout: 15000 });
    emit('page', { url: page.url(), status: response?.status(), version: await browser.version() });
    await fn(page);
  } finally {
    await browser.close();
  }
}

main({
  text_plain: (c) => withPage(c, async (page) => {
    emit('result', await page.evaluate(([u, b]) => window.attackTextPlain(u, b), [c.url, c.body]));
  }),
  stream: (c) => withPage(c, async (page) => {
    emit('result', await page.evaluate(([u, k, b]) => window.streamChat(u, k, b), [c.url, c.key, c.body]));
    if (c.screenshot) {
      await page.screenshot({ path: c.screenshot, fullPage: true });
      emit('screenshot', { path: c.screenshot });
    }
  }),
  sdk: (c) => withPage(c, async (page) => {
    emit('result', await page.evaluate(([u, k, b]) => window.sdkStream(u, k, b), [c.base_url, c.key, c.body]));
    if (c.screenshot) {
      await page.screenshot({ path: c.screenshot, fullPage: true });
      emit('screenshot', { path: c.screenshot });
    }
  }),
  rebind: (c) => withPage(c, async (page) => {
    emit('result', await page.evaluate(([b]) => window.sameOriginChat('/v1/chat/completions', b), [c.body]));
  }),
});
