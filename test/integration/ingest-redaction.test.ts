import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/data-plane/redaction/policy.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { EventSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { eventually } from '../e2e/agents-helpers.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { useTestService } from '../helpers/service.ts';
import { pgliteStore } from '../helpers/stores.ts';

// Events an edge proxy publishes over Connect (binary, JSON, a stream) with its end users'
// credentials in them: the file destination stores none of them (docs/security.md#redacted).

const HTTP = 'http_request_complete.v0';
const SECRETS = ['bearer eyj-secret-jwt', 'sess=cookie-secret', 'sid=set-cookie-secret', 'q-tok'];

function event(accountId: string, n: number): MessageInitShape<typeof EventSchema> {
  return {
    accountId,
    eventId: `ev-redaction-${n}`,
    payload: {
      case: 'httpRequestComplete',
      value: {
        conn: { serverName: 'shop.example.com', clientIp: '198.51.100.7', serverPort: 443 },
        http: {
          request: {
            method: 'post',
            headers: {
              authorization: { values: [SECRETS[0]] },
              COOKIE: { values: [SECRETS[1]] },
              'Proxy-Authorization': { values: ['basic cHJveHk6c2VjcmV0'] },
              'User-Agent': { values: ['curl/8'] },
            },
            url: {
              scheme: 'https',
              host: 'shop.example.com',
              path: '/cart',
              query: `id_token=${SECRETS[3]}`,
              raw: `https://shop.example.com/cart?id_token=${SECRETS[3]}`,
            },
          },
          response: { statusCode: 302, headers: { 'Set-Cookie': { values: [SECRETS[2]] } } },
        },
      },
    },
  };
}

describe('Connect-RPC ingest: credentials in published events are not stored', () => {
  const ctx = useTestService(pgliteStore, { INGEST_TOKENS: TEST_INGEST_TOKEN });

  it('stores the keys with a marker for unary (binary and JSON) and streamed publishes', async () => {
    const accountId = (await ctx.api('GET', '/account')).body.id;
    const destination = await ctx.api('POST', '/event_destinations', {
      target: { file: { path: 'ingested' } },
    });
    const subscription = await ctx.api('POST', '/event_subscriptions', {
      sources: [{ type: HTTP }],
      destination_ids: [destination.body.id],
    });
    expect(subscription.status).toBe(201);
    await ctx.service.pipeline.reload();

    await ingestClient(ctx.service.url, TEST_INGEST_TOKEN).publish([event(accountId, 1)]);
    const json = ingestClient(ctx.service.url, TEST_INGEST_TOKEN, 'connect-json');
    await json.publish([event(accountId, 2)]);
    async function* messages() {
      yield { events: [event(accountId, 3)] };
      yield { events: [event(accountId, 4)] };
    }
    const streamed = await ingestClient(ctx.service.url, TEST_INGEST_TOKEN).publishStream(
      messages(),
    );
    expect(streamed).toBeDefined();

    const dir = join(accountEventsDir(ctx.store.env.DATA_DIR, accountId), 'ingested');
    const read = () =>
      readdirSync(dir, { recursive: true })
        .map(String)
        .filter((name) => /\.ndjson(\.open)?$/.test(name))
        .map((name) => readFileSync(join(dir, name), 'utf8'))
        .join('');
    const text = await eventually(() => {
      const all = read();
      return all.split('\n').filter(Boolean).length >= 4 ? all : undefined;
    }, 'four stored events');
    for (const secret of [...SECRETS, 'cHJveHk6c2VjcmV0']) expect(text).not.toContain(secret);
    for (const line of text.split('\n').filter(Boolean)) {
      const { http } = JSON.parse(line).object;
      expect(http.request.headers).toEqual({
        authorization: [REDACTED],
        COOKIE: [REDACTED],
        'Proxy-Authorization': [REDACTED],
        'User-Agent': ['curl/8'],
      });
      expect(http.response.headers).toEqual({ 'Set-Cookie': [REDACTED] });
      expect(http.request.url.query).toBe(`id_token=${REDACTED}`);
      expect(http.request.url.raw).toBe(`https://shop.example.com/cart?id_token=${REDACTED}`);
    }
  });
});
