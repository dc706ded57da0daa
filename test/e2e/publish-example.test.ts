import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { freePort } from '../helpers/free-port.ts';
import { TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { runProcess } from '../helpers/run-process.ts';
import { apiClient, startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// README's Node.js publishing example, run with the command README gives (npm run
// example:publish) against a real service, its event followed to a file destination.

describe('examples/publish.ts', () => {
  let store: TestStore;
  let service: Service;

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store, { INGEST_TOKENS: TEST_INGEST_TOKEN });
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('publishes one event for the API key’s account, delivered to its file destination', async () => {
    const api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    const destination = await api('POST', '/event_destinations', {
      target: { file: { path: 'example' } },
    });
    expect(destination.status).toBe(201);
    const subscription = await api('POST', '/event_subscriptions', {
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status).toBe(201);
    await service.pipeline.reload();

    // The service's URL as the argument the docs show (PORT need not be 8080).
    const { code, stdout, stderr } = await runProcess(
      'npm',
      ['run', '--silent', 'example:publish', '--', service.url],
      { AGENT_INGRESS_API_KEY: TEST_BOOTSTRAP_KEY, INGEST_TOKEN: TEST_INGEST_TOKEN },
    );
    expect(code, stderr).toBe(0);
    const printed = JSON.parse(stdout);
    const account = service.firstKey!.accountId;
    expect(printed).toEqual({ account_id: account, event_ids: [expect.stringMatching(/^ev_/)] });

    // Publish answered once the event was durable: it is in the destination's file already.
    const dir = join(store.env.DATA_DIR, 'events', account, 'example');
    const lines = readdirSync(dir).flatMap((name) =>
      readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean),
    );
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      expect.objectContaining({
        event_id: printed.event_ids[0],
        event_type: 'tcp_connection_closed.v0',
        account_id: account,
      }),
    ]);
  });

  it('says in one line, without a stack trace, that no service answers at the URL', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const { code, stdout, stderr } = await runProcess(
      'npm',
      ['run', '--silent', 'example:publish'],
      {
        AGENT_INGRESS_URL: url,
        AGENT_INGRESS_API_KEY: TEST_BOOTSTRAP_KEY,
        INGEST_TOKEN: TEST_INGEST_TOKEN,
      },
    );
    expect(code).toBe(69);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      `example:publish: cannot reach the service at ${url} (connect ECONNREFUSED ${url.slice(7)}): is it running there?\n`,
    );
  });

  it('says which token was refused, in one line', async () => {
    const run = (env: Record<string, string>) =>
      runProcess('npm', ['run', '--silent', 'example:publish', '--', service.url], env);
    const badKey = await run({
      AGENT_INGRESS_API_KEY: 'aik_wrong',
      INGEST_TOKEN: TEST_INGEST_TOKEN,
    });
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toMatch(
      /^example:publish: GET \/account answered 401: .+ \(AGENT_INGRESS_API_KEY\)\n$/,
    );
    const badToken = await run({
      AGENT_INGRESS_API_KEY: TEST_BOOTSTRAP_KEY,
      INGEST_TOKEN: 'not-an-ingest-token-0123',
    });
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toMatch(/^example:publish: Publish failed: \[unauthenticated\] .+\n$/);
  });
});
