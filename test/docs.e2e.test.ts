import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, Browser } from 'playwright-core';
import { createApp, App } from '../runtime/http/app';
import { loadConfig } from '../runtime/config';
import { testDatabases, TestDatabase } from './support/databases';
import openapi from '../generated/openapi.json';

/**
 * /docs in a real browser: Debian's `chromium` (installed by .ci/run in CI) driven by
 * playwright-core, with every request that leaves the server refused and counted, so the page
 * is proved to render the reference with no network. Outside CI, a machine without Chromium
 * skips this file with one line.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const haveChromium = fs.existsSync(CHROMIUM);
if (!haveChromium && !process.env.CI) console.info(`docs e2e skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH).`);

const describeWithBrowser = haveChromium || process.env.CI ? describe : describe.skip;

describeWithBrowser('/docs in headless Chromium', () => {
  let db: TestDatabase;
  let app: App;
  let server: http.Server;
  let baseUrl: string;
  let browser: Browser;

  beforeAll(async () => {
    db = await testDatabases[0].create();
    app = createApp(loadConfig({ LOG_LEVEL: 'silent' }), { db: db.knex, purgeIntervalMs: 0 });
    server = http.createServer(app.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync'],
      timeout: 30_000,
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    server?.closeAllConnections();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    app?.close();
    await db?.destroy();
  });

  it('renders every resource group of the contract from local assets only, and saves a screenshot', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
    const outside: string[] = [];
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(baseUrl) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue();
      outside.push(url);
      return route.abort();
    });
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    // a clean page: no request of the page answered with an error (the icon included)
    const failed: string[] = [];
    page.on('response', (res) => { if (res.status() >= 400) failed.push(`${res.status()} ${res.url()}`); });
    const consoleErrors: string[] = [];
    page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()); });

    const response = await page.goto(`${baseUrl}/docs`, { waitUntil: 'load', timeout: 30_000 });
    expect(response?.status()).toBe(200);
    await page.waitForSelector('.opblock-tag', { timeout: 30_000 });

    const tags: string[] = openapi.tags.map((tag) => tag.name);
    expect(tags.length).toBeGreaterThan(0);
    const listed = await page.$$eval('.opblock-tag', (nodes) => nodes.map((n) => n.getAttribute('data-tag')));
    expect(listed).toEqual(expect.arrayContaining(tags));
    await expect(page.title()).resolves.toMatch(/Field Operations API/);
    expect(await page.textContent('.info .title')).toContain(openapi.info.title);
    // "Try it out" calls the server the page came from
    expect(await page.$eval('.servers select', (select) => (select as unknown as { value: string }).value)).toBe(baseUrl);

    // headless Chromium loads no icon by itself; a headed browser asks for the declared icon, or for
    // /favicon.ico when none is declared: both answer. (A page fetch of the bare /favicon.ico fails
    // inside Chromium under request interception, hence the query string.)
    const declared = await page.$eval('link[rel="icon"]', (link) => link.getAttribute('href'));
    const statusOf = (url: string) => page.evaluate(async (u) => (await fetch(u)).status, url);
    expect({ declared, status: await statusOf(declared ?? ''), root: await statusOf('/favicon.ico?from-page') })
      .toEqual({ declared: '/docs/assets/favicon-32x32.png', status: 200, root: 200 });

    const artifacts = path.resolve(__dirname, 'artifacts');
    fs.mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, 'docs.png'), fullPage: false });

    expect(outside).toEqual([]);
    expect(pageErrors).toEqual([]);
    expect(failed).toEqual([]);
    expect(consoleErrors).toEqual([]);
  }, 60_000);
});
