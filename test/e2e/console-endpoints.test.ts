import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';
import { curl } from './agents-helpers.ts';

// The console's Endpoints page in a real browser (Debian's chromium driven by playwright-core,
// as test/e2e/console.test.ts): a policy checked as it is typed, saved once valid, listed, and
// a tap showing a request that went through the edge with each module's decision. The endpoint
// answers with its policy alone, so no agent is needed. docs/console/endpoints.png is this
// test's.

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '..', '..', 'docs', 'console');
const DOMAIN = 'console-endpoints.example';
const HOST = `tea.${DOMAIN}`;

// An expression that does not compile, on line 4 of the document.
const BAD_EXPRESSION = `on_http_request:
  - name: teapot
    expressions:
      - "req.url.path.startsWith('/tea') &&"
    actions:
      - type: custom-response
        config: {status_code: 418, body: short and stout}
`;
// YAML that does not parse: the second "type" on line 4, column 9.
const DUPLICATE_KEY = `on_http_request:
  - actions:
      - type: deny
        type: log
`;
const POLICY = `on_http_request:
  - name: teapot
    expressions:
      - "req.url.path.startsWith('/tea')"
    actions:
      - type: basic-auth
        config:
          credentials: ["ada:analytical engine"]
      - type: log
        config:
          metadata:
            user: "\${actions.ngrok.basic_auth.credentials.username}"
      - type: custom-response
        config: {status_code: 418, body: short and stout}
`;

const basic = (user: string, password: string) =>
  `Authorization: Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('the console’s Endpoints page, in chromium', () => {
  const ctx = useTestService();
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  const row = `[data-endpoint]:has-text("http://${HOST}")`;

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(10_000);
    page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    await page.goto(`${ctx.service.url}/console#/endpoints`);
    await page.fill('input[name=key]', TEST_BOOTSTRAP_KEY);
    await page.click('button[type=submit]');
    await page.waitForSelector('.no-endpoints');
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  it('checks a policy without saving it: its phases, or where it is wrong; only with an API key', async () => {
    const check = (body: unknown) => ctx.api('POST', '/endpoints/validate_policy', body);
    expect((await check({ traffic_policy: POLICY })).body).toEqual({
      phases: [
        { phase: 'on_http_request', rules: 1, actions: ['basic-auth', 'log', 'custom-response'] },
      ],
    });
    const duplicate = await check({ traffic_policy: DUPLICATE_KEY });
    expect(duplicate.status).toBe(400);
    expect(duplicate.body.error_code).toBe('ERR_INVALID_FIELD');
    expect(duplicate.body.details).toEqual({
      operation_id: expect.stringMatching(/^op_/),
      field: 'traffic_policy',
      reason: 'syntax',
      location: { line: 4, column: 9 },
    });
    expect((await check({ traffic_policy: POLICY, proto: 'tcp' })).body.error_code).toBe(
      'ERR_UNKNOWN_FIELD',
    );
    // The URL's scheme decides the phases: a TCP endpoint's policy has no on_http_request.
    const forTcp = await check({ traffic_policy: POLICY, url: 'tcp://1.tcp.example.com:20000' });
    expect(forTcp.status).toBe(400);
    expect(forTcp.body.details.location).toMatchObject({ phase: 'on_http_request' });
    expect((await ctx.api('GET', '/endpoints')).body.endpoints).toEqual([]);
    const anonymous = await fetch(`${ctx.service.url}/endpoints/validate_policy`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ traffic_policy: POLICY }),
    });
    expect(anonymous.status).toBe(401);
  });

  it('checks the policy as it is typed: the error at its line, Save disabled until it is valid', async () => {
    await page.click('#new-endpoint');
    await page.fill('#endpoint-url', `http://${HOST}`);
    await page.fill('#endpoint-description', 'teapot');
    await page.fill('#policy', BAD_EXPRESSION);
    await page.waitForSelector('.policy-error');
    const error = await page.textContent('.policy-error');
    expect(error).toContain('ERR_INVALID_FIELD at line 4:');
    expect(error).toContain('expressions[0] at line 1, column 35');
    expect(await page.textContent('.policy-error .caret')).toBe(BAD_EXPRESSION.split('\n')[3]);
    expect(await page.isDisabled('#save-endpoint')).toBe(true);

    await page.fill('#policy', DUPLICATE_KEY);
    await page.waitForSelector('.policy-error >> text=Map keys must be unique');
    expect(await page.textContent('.policy-error')).toContain('at line 4, column 9');
    expect(await page.textContent('.policy-error .caret')).toBe('        type: log\n        ^');
    expect(await page.isDisabled('#save-endpoint')).toBe(true);

    await page.fill('#policy', POLICY);
    await page.waitForSelector('.policy-valid');
    expect(await page.textContent('.policy-valid')).toBe(
      'valid: on_http_request: basic-auth, log, custom-response',
    );
    expect(await page.isDisabled('#save-endpoint')).toBe(false);
    await page.click('#save-endpoint');
    await page.waitForSelector(row);
    await expect
      .poll(() => page.textContent(`${row} .summary`))
      .toBe('on_http_request: basic-auth, log, custom-response');
    expect(await page.textContent(row)).toContain('teapot');
    const listed = (await ctx.api('GET', '/endpoints')).body.endpoints;
    expect(
      listed.map((e: { url: string; traffic_policy: string }) => [e.url, e.traffic_policy]),
    ).toEqual([[`http://${HOST}`, POLICY]]);
  });

  it('taps the endpoint: each request through the edge with its decisions', async () => {
    await page.click(`${row} >> text=Tap`);
    await page.waitForSelector('.endpoint-tap .tap-status[data-status=open]');
    const refused = await curl(ctx.service.edgePort!, HOST, '/tea/refused');
    expect(refused.status).toBe(401);
    const answered = await curl(ctx.service.edgePort!, HOST, '/tea/pot', [
      '-H',
      basic('ada', 'analytical engine'),
    ]);
    expect(answered.status).toBe(418);
    expect(answered.body).toBe('short and stout');

    const request = (path: string) => `.endpoint-tap .request:has(.path:text-is("${path}"))`;
    await page.waitForSelector(request('/tea/pot'));
    const allowed = request('/tea/pot');
    expect(await page.textContent(`${allowed} .response-status`)).toBe('418');
    expect(await page.textContent(`${allowed} [data-decision=basic_auth] dd`)).toBe('allow (ada)');
    expect(await page.textContent(`${allowed} [data-decision="traffic_policy.logs"] dd`)).toBe(
      '[{"user":"ada"}]',
    );
    for (const module of ['ip_policy', 'circuit_breaker', 'webhook_verification', 'oauth']) {
      expect(await page.textContent(`${allowed} [data-decision=${module}] dd`)).toBe('invalid');
    }
    expect(await page.textContent(`${allowed} [data-decision=compression] dd`)).toBe('none');
    const blocked = request('/tea/refused');
    await page.waitForSelector(blocked);
    expect(await page.textContent(`${blocked} .response-status`)).toBe('401');
    expect(await page.textContent(`${blocked} [data-decision=basic_auth] dd`)).toBe('block');
    await page.screenshot({ path: join(SHOTS, 'endpoints.png'), fullPage: true });
  });

  it('edits the policy of a saved endpoint, then deletes it', async () => {
    await page.click(`${row} >> text=Edit`);
    expect(await page.inputValue('#policy')).toBe(POLICY);
    expect(await page.isDisabled('#endpoint-url')).toBe(true);
    await page.fill('#policy', POLICY.replace('      - type: log\n', '      - type: lg\n'));
    await page.waitForSelector('.policy-error >> text=unknown action');
    expect(await page.isDisabled('#save-endpoint')).toBe(true);
    await page.fill('#policy', POLICY.replace('status_code: 418', 'status_code: 200'));
    await page.waitForSelector('.policy-valid');
    await page.click('#save-endpoint');
    await expect
      .poll(async () => (await ctx.api('GET', '/endpoints')).body.endpoints[0].traffic_policy)
      .toContain('status_code: 200');
    await page.click(`${row} >> text=Delete`);
    await page.waitForSelector('.no-endpoints');
    expect((await ctx.api('GET', '/endpoints')).body.endpoints).toEqual([]);
    // Its editor and its tap went with it.
    expect(await page.$('.policy-editor')).toBeNull();
    expect(await page.$('.endpoint-tap')).toBeNull();
  });

  it('logged no error but the 400s and 401s it expected', () => {
    expect(problems.filter((p) => !/status of (400|401)/.test(p))).toEqual([]);
  });
});
