import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/data-plane/redaction/policy.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import { useTestService } from '../helpers/service.ts';
import { curl, eventually, fileEvents, type SshAgent } from './agents-helpers.ts';
import { boundAgent } from './edge-helpers.ts';

// An end user's credentials through a real `ssh -R` agent: the agent gets them, the stored
// events do not (docs/security.md#redacted), unless the source opts in with keep_credentials.

const DOMAIN = 'edge-redaction.example.com';
const HOST = `app.${DOMAIN}`;
const HTTP = 'http_request_complete.v0';
// Lower-case: the edge lower-cases header values (SPEC), so the stored form is the same.
const SECRETS = {
  bearer: 'sk-live-bearer-7f3a9c',
  cookie: 'cookie-session-51d2e8',
  apiKey: 'api-key-value-c0ffee',
  query: 'query-access-token-9b1e',
  setCookie: 'set-cookie-sid-a4b4c4',
};

/** Everything the file destination `path` of the account wrote, as one text. */
function storedText(dataDir: string, accountId: string, path: string): string {
  const dir = join(accountEventsDir(dataDir, accountId), path);
  let names: string[];
  try {
    names = readdirSync(dir, { recursive: true }).map(String);
  } catch {
    return '';
  }
  return names
    .filter((name) => /\.ndjson(\.open)?$/.test(name))
    .map((name) => readFileSync(join(dir, name), 'utf8'))
    .join('\n');
}

describe('the edge: end users’ credentials stay out of the stored events', () => {
  const ctx = useTestService();
  let agent: SshAgent;
  let local: Server;
  let accountId: string;
  let received: IncomingHttpHeaders | undefined;

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    accountId = (await ctx.api('GET', '/account')).body.id;
    const destination = async (path: string) =>
      (await ctx.api('POST', '/event_destinations', { target: { file: { path } } })).body.id;
    const subscribe = async (source: Record<string, unknown>, path: string) => {
      const res = await ctx.api('POST', '/event_subscriptions', {
        sources: [{ type: HTTP, ...source }],
        destination_ids: [await destination(path)],
      });
      expect(res.status).toBe(201);
    };
    await subscribe({}, 'by-default');
    await subscribe({ redact_headers: ['X-Api-Key'] }, 'named');
    await subscribe({ keep_credentials: true }, 'kept');
    await ctx.service.pipeline.reload();
    local = createServer((request, response) => {
      received = request.headers;
      request.resume();
      response.writeHead(200, { 'set-cookie': `sid=${SECRETS.setCookie}; HttpOnly` }).end('ok');
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    agent = await boundAgent(ctx, HOST, (local.address() as AddressInfo).port);
  });
  afterAll(async () => {
    await agent?.kill();
    local?.close();
  });

  it('forwards them to the agent, and writes every destination with the key and a marker', async () => {
    const answer = await curl(
      ctx.service.edgePort!,
      HOST,
      `/login?access_token=${SECRETS.query}&next=%2Fhome`,
      [
        '-H',
        `Authorization: Bearer ${SECRETS.bearer}`,
        '-H',
        `Cookie: session=${SECRETS.cookie}`,
        '-H',
        `X-Api-Key: ${SECRETS.apiKey}`,
      ],
    );
    expect(answer.status).toBe(200);
    expect(answer.headers).toContain(SECRETS.setCookie);
    expect(received?.authorization).toBe(`Bearer ${SECRETS.bearer}`);
    expect(received?.cookie).toBe(`session=${SECRETS.cookie}`);

    const dir = (path: string) => join(accountEventsDir(ctx.store.env.DATA_DIR, accountId), path);
    const [byDefault, named, kept] = await Promise.all(
      ['by-default', 'named', 'kept'].map((path) =>
        eventually(() => fileEvents(dir(path))[0]?.object, `an event in ${path}`),
      ),
    );

    const byDefaultText = storedText(ctx.store.env.DATA_DIR, accountId, 'by-default');
    for (const secret of [SECRETS.bearer, SECRETS.cookie, SECRETS.query, SECRETS.setCookie]) {
      expect(byDefaultText).not.toContain(secret);
    }
    expect(byDefault.http.request.headers).toMatchObject({
      Authorization: [REDACTED],
      Cookie: [REDACTED],
      'X-Api-Key': [SECRETS.apiKey],
    });
    expect(byDefault.http.response.headers['Set-Cookie']).toEqual([REDACTED]);
    expect(byDefault.http.request.url.query).toBe(`access_token=${REDACTED}&next=%2Fhome`);
    expect(byDefault.http.request.url.raw).toBe(
      `http://${HOST}/login?access_token=${REDACTED}&next=%2Fhome`,
    );

    expect(storedText(ctx.store.env.DATA_DIR, accountId, 'named')).not.toContain(SECRETS.apiKey);
    expect(named.http.request.headers).toMatchObject({
      Authorization: [REDACTED],
      'X-Api-Key': [REDACTED],
    });

    // The explicit opt-in: this source's destination has them (as the edge records them).
    expect(kept.http.request.headers.Authorization).toEqual([`bearer ${SECRETS.bearer}`]);
    expect(kept.http.request.headers.Cookie).toEqual([`session=${SECRETS.cookie}`]);
    expect(kept.http.request.url.query).toContain(SECRETS.query);
    expect(kept.http.response.headers['Set-Cookie'][0]).toContain(SECRETS.setCookie);
  });
});
