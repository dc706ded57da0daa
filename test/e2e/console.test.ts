import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseServer, startClickHouse } from '../helpers/clickhouse.ts';
import { generateEvents } from '../helpers/events.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';
import { startSshAgent } from './agents-helpers.ts';

// The console in a real browser: Debian's chromium (package `chromium`, .ci/apt-packages) driven
// by playwright-core, which downloads no browser. The screenshots in docs/console/ are this
// test's, for the README.

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '..', '..', 'docs', 'console');
const HTTP = 'http_request_complete.v0';

describe('the operator’s console at /console, in chromium', () => {
  const ctx = useTestService(undefined, {
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    BATCH_LINGER_MS: '10',
  });
  let clickhouse: ClickHouseServer;
  let warehouseId: string;
  let browser: Browser;
  let page: Page;
  let accountId: string;
  let subscriptionId: string;
  let connectionsId: string;
  const problems: string[] = [];

  /** Publishes `count` HTTP events of the account, all on port 443 (the subscription's filter). */
  async function publish(count: number, seed: number) {
    const events = generateEvents(count, { accounts: [accountId], tcpShare: 0, seed });
    for (const event of events) (event.payload.value as any).conn.serverPort = 443;
    await ingestClient(ctx.service.url, TEST_INGEST_TOKEN).publish(events);
    return events;
  }

  beforeAll(async () => {
    accountId = (await ctx.api('GET', '/account')).body.id;
    const destination = await ctx.api('POST', '/event_destinations', {
      description: 'archive',
      target: { file: { path: 'console-archive' } },
    });
    const subscription = await ctx.api('POST', '/event_subscriptions', {
      description: 'tls traffic',
      sources: [{ type: HTTP, filter: 'conn.server_port == 443', fields: [] }],
      destination_ids: [destination.body.id],
    });
    subscriptionId = subscription.body.id;
    clickhouse = await startClickHouse();
    const warehouse = await ctx.api('POST', '/event_destinations', {
      description: 'warehouse',
      target: { clickhouse: { url: clickhouse.url, table_prefix: 'console_' } },
    });
    warehouseId = warehouse.body.id;
    const connections = await ctx.api('POST', '/event_subscriptions', {
      description: 'connections',
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destination_ids: [warehouseId],
    });
    connectionsId = connections.body.id;
    await ctx.service.pipeline.reload();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.setDefaultTimeout(10_000);
    page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    // Offline: the page may load nothing but this service.
    page.on('request', (request) => {
      if (!request.url().startsWith(ctx.service.url)) problems.push(`request: ${request.url()}`);
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await clickhouse?.close();
  });

  it('refuses a wrong key, signs in with a good one, kept in sessionStorage only', async () => {
    await page.goto(`${ctx.service.url}/console`);
    await page.fill('input[name=key]', 'not-a-key');
    await page.click('button[type=submit]');
    await expect.poll(() => page.textContent('.error')).toContain('not valid');
    await page.fill('input[name=key]', TEST_BOOTSTRAP_KEY);
    await page.click('button[type=submit]');
    await page.waitForSelector(`header >> text=${accountId}`);
    // Runs in the page (DOM globals, which this project's TypeScript does not declare).
    const stored = await page.evaluate(() => {
      const { sessionStorage, localStorage, document } = globalThis as any;
      return {
        session: Object.values(sessionStorage),
        local: Object.keys(localStorage).length,
        cookies: document.cookie,
      };
    });
    expect(stored).toEqual({ session: [TEST_BOOTSTRAP_KEY], local: 0, cookies: '' });
  });

  it('shows the counters moving while events are published, and each destination’s health', async () => {
    const received = '[data-counter=events_received] .total';
    await page.waitForSelector(received);
    const before = Number(await page.textContent(received));
    await publish(30, 1);
    await expect
      .poll(async () => Number(await page.textContent(received)), { timeout: 5_000 })
      .toBe(before + 30);
    await publish(20, 2);
    await expect
      .poll(async () => Number(await page.textContent(received)), { timeout: 5_000 })
      .toBe(before + 50);
    await expect
      .poll(() => page.textContent('[data-counter=events_received] .rate'))
      .not.toBe('0.0/s');
    await expect
      .poll(async () =>
        Number(await page.textContent(`[data-subscription-rate=${subscriptionId}] .total`)),
      )
      .toBe(50);
    const archive = '[data-destination]:has-text("archive")';
    expect(await page.textContent(`${archive} .status`)).toBe('ok');
  });

  it('shows each subscription’s match rate: the one whose events flow moves, the other stays', async () => {
    const tls = `[data-subscription-rate=${subscriptionId}]`;
    const idle = `[data-subscription-rate=${connectionsId}]`;
    await page.waitForSelector(tls);
    expect(await page.textContent(`${tls} td:nth-child(2)`)).toBe(HTTP);
    // Published in a stream of small requests, so a one-second snapshot always sees some.
    let feeding = true;
    const feeder = (async () => {
      for (let seed = 100; feeding; seed++) {
        await publish(5, seed);
        await sleep(150);
      }
    })();
    try {
      await expect
        .poll(() => page.textContent(`${tls} .rate`), { timeout: 10_000 })
        .not.toBe('0.0/s');
      expect(await page.textContent(`${idle} .rate`)).toBe('0.0/s');
      expect(await page.textContent(`${idle} .total`)).toBe('0');
    } finally {
      feeding = false;
      await feeder;
    }
  });

  it('sends a test event from the destinations table', async () => {
    const archive = '[data-destination]:has-text("archive")';
    await page.click(`${archive} >> text=Send test event`);
    await expect.poll(() => page.textContent(`${archive} .test-result`)).toMatch(/^delivered ev_/);
  });

  it('shows a destination go retrying when its target is down, with its error and backlog', async () => {
    const warehouse = `[data-destination=${warehouseId}]`;
    await clickhouse.stop();
    const events = generateEvents(50, { accounts: [accountId], tcpShare: 1, seed: 9 });
    await ingestClient(ctx.service.url, TEST_INGEST_TOKEN).publish(events);
    await expect
      .poll(() => page.textContent(`${warehouse} .status`), { timeout: 10_000 })
      .toBe('retrying');
    expect(await page.textContent(`${warehouse} .last-error`)).not.toBe('');
    await page.screenshot({ path: join(SHOTS, 'pipeline.png'), fullPage: true });
    await clickhouse.start();
    await expect
      .poll(() => page.textContent(`${warehouse} .status`), { timeout: 30_000 })
      .toBe('ok');
  });

  it('opens a tap on a source and shows a published event appear', async () => {
    await page.click('header >> text=Subscriptions');
    const source = `[data-subscription=${subscriptionId}] [data-source="${HTTP}"]`;
    await page.click(`${source} >> text=Tap`);
    await page.waitForSelector(`${source} .tap-status[data-status=open]`);
    const [event] = await publish(1, 3);
    const host = (event.payload.value as any).conn.serverName;
    await expect
      .poll(() => page.textContent(`${source} .tap-events`), { timeout: 5_000 })
      .toContain(host);
    expect(await page.textContent(`${source} .tap-events`)).toContain(accountId);
  });

  it('compiles the filter as it is typed and shows an error at its position', async () => {
    await page.fill('#filter', 'conn.server_port == 443');
    await page.waitForSelector('.editor .compiles');
    await page.fill('#filter', 'conn.server_port == 443 &&');
    await page.waitForSelector('.filter-error');
    const error = await page.textContent('.filter-error');
    expect(error).toContain('ERR_INVALID_FILTER');
    expect(error).toMatch(/at line 1, column \d+/);
    expect(await page.textContent('.filter-error .caret')).toMatch(/\n\s+\^$/);
    await page.fill('#filter', 'conn.server_port == 443');
    await page.waitForSelector('.editor .tap-status[data-status=open]');
    const [event] = await publish(1, 4);
    await expect
      .poll(() => page.textContent('.editor .tap-events'), { timeout: 5_000 })
      .toContain((event.payload.value as any).conn.serverName);
    await page.screenshot({ path: join(SHOTS, 'subscriptions.png'), fullPage: true });
    await page.fill('#filter', 'conn.server_port == 443 &&');
    await page.waitForSelector('.filter-error');
    await page.locator('.editor').screenshot({ path: join(SHOTS, 'filter-error.png') });
  });

  it('lists the Agent Ingresses with their region domains and certificate state', async () => {
    const created = await ctx.api('POST', '/agent_ingresses', {
      domain: 'agents.console.example',
      description: 'edge',
      certificate_management_policy: null,
    });
    expect(created.status).toBe(201);
    await page.click('header >> text=Agent Ingresses');
    const row = `[data-ingress=${created.body.id}]`;
    await page.waitForSelector(row);
    expect(await page.textContent(row)).toContain('agents.console.example');
    for (const domain of created.body.region_domains) {
      expect(await page.textContent(row)).toContain(domain);
    }
    expect(await page.textContent(`${row} .certificate`)).toBe('off');
    await page.screenshot({ path: join(SHOTS, 'agent-ingresses.png'), fullPage: true });
  });

  it('shows a live agent session and stops it', async () => {
    await page.click('header >> text=Agent sessions');
    await page.waitForSelector('.no-sessions');
    const credential = await ctx.api('POST', '/credentials', {});
    const agent = startSshAgent(ctx.service, {
      user: credential.body.token,
      hostname: 'app.agents.console.example',
      localPort: 9,
    });
    try {
      const row = await page.waitForSelector('[data-session]', { timeout: 15_000 });
      expect(await row.textContent()).toContain(credential.body.id);
      await page.screenshot({ path: join(SHOTS, 'agent-sessions.png'), fullPage: true });
      await page.click('[data-session] >> text=Stop');
      await page.waitForSelector('.no-sessions');
      expect(await Promise.race([agent.exited, sleep(5_000).then(() => 'still running')])).not.toBe(
        'still running',
      );
    } finally {
      await agent.kill();
    }
  });

  it('loaded nothing from elsewhere and logged no error', () => {
    // 4xx answers the page expected (a wrong key, a bad filter) are logged by chromium as
    // failed resources; anything else is a defect.
    const unexpected = problems.filter((p) => !/status of (400|401)/.test(p));
    expect(unexpected).toEqual([]);
  });
});
