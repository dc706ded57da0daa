import { Buffer } from 'node:buffer';
import { create, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { routeRequest } from '../../src/data-plane/pipeline/route-events.ts';
import { compileRouting, type RoutingConfig } from '../../src/data-plane/pipeline/routing.ts';
import { redactObject } from '../../src/data-plane/redaction/event-object.ts';
import {
  DEFAULT_REDACTION,
  NO_REDACTION,
  REDACTED,
  redactionOf,
} from '../../src/data-plane/redaction/policy.ts';
import { queryHasName, redactQuery, redactUrl } from '../../src/data-plane/redaction/query.ts';
import { readPublishRequest } from '../../src/data-plane/wire-json/request-text.ts';
import {
  EventSchema,
  PublishRequestSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { recordsOf } from '../helpers/blocks.ts';

// The redaction of end users' credentials (docs/security.md#redacted): what the worker's text
// writer and the decoder's object path deliver, and a source's opt-in and additions.

const HTTP = 'http_request_complete.v0';
const BEARER = 'bearer sk-live-abcdef0123456789';
const SESSION = 'session=s3cr3t-cookie';
const TOKEN = 'tok-in-the-query-42';

/** An http event carrying credentials the way an edge records them. */
function credentialEvent(accountId = 'ac_a'): MessageInitShape<typeof EventSchema> {
  return {
    accountId,
    eventId: `ev-${accountId}`,
    payload: {
      case: 'httpRequestComplete',
      value: {
        conn: { serverName: 'app.example.com', clientIp: '192.0.2.1', serverPort: 443 },
        http: {
          request: {
            method: 'get',
            headers: {
              Authorization: { values: [BEARER] },
              Cookie: { values: [SESSION, 'theme=dark'] },
              'Proxy-Authorization': { values: ['basic dxnlcjpwyxnz'] },
              'X-Api-Key': { values: ['key-123'] },
              Accept: { values: ['*/*'] },
              Empty: { values: [] },
            },
            url: {
              scheme: 'https',
              host: 'app.example.com',
              path: '/cb',
              query: `state=1&ACCESS_TOKEN=${TOKEN}&x=2`,
              raw: `https://app.example.com/cb?state=1&ACCESS_TOKEN=${TOKEN}&x=2`,
            },
          },
          response: {
            statusCode: 200,
            headers: { 'Set-Cookie': { values: ['sid=abc; httponly'] }, Vary: { values: ['x'] } },
          },
        },
      },
    },
  };
}

function requestBytes(...events: MessageInitShape<typeof EventSchema>[]): Uint8Array {
  return toBinary(PublishRequestSchema, create(PublishRequestSchema, { events }));
}

/** The payload JSON of event i as the writer wrote it. */
function payloadText(bytes: Uint8Array, i = 0, redaction = DEFAULT_REDACTION): any {
  const request = readPublishRequest(bytes, Number.POSITIVE_INFINITY, () => redaction);
  const base = request.events[i].spanBase;
  return JSON.parse(request.text.toString('utf8', request.spans[base], request.spans[base + 1]));
}

describe('redaction of credentials', () => {
  it('keeps the key and replaces the values of credential headers and token parameters', () => {
    const object = payloadText(requestBytes(credentialEvent()));
    expect(object.http.request.headers).toEqual({
      Authorization: [REDACTED],
      Cookie: [REDACTED],
      'Proxy-Authorization': [REDACTED],
      'X-Api-Key': ['key-123'],
      Accept: ['*/*'],
      Empty: [],
    });
    expect(object.http.response.headers).toEqual({ 'Set-Cookie': [REDACTED], Vary: ['x'] });
    expect(object.http.request.url.query).toBe(`state=1&ACCESS_TOKEN=${REDACTED}&x=2`);
    expect(object.http.request.url.raw).toBe(
      `https://app.example.com/cb?state=1&ACCESS_TOKEN=${REDACTED}&x=2`,
    );
    expect(object.http.request.url.path).toBe('/cb');
  });

  it('writes the same text as the decoder’s object redacted, and nothing when told so', () => {
    const bytes = requestBytes(credentialEvent());
    const request = readPublishRequest(bytes, Number.POSITIVE_INFINITY, () => NO_REDACTION);
    const clear = request.object(0);
    expect(payloadText(bytes, 0, NO_REDACTION)).toEqual(clear);
    expect(JSON.stringify(clear)).toContain(BEARER);
    for (const redaction of [DEFAULT_REDACTION, redactionOf({ redactHeaders: ['X-API-KEY'] })]) {
      expect(payloadText(bytes, 0, redaction)).toEqual(redactObject(clear, redaction));
    }
  });

  it('redacts an event protobuf would merge, which the decoder writes', () => {
    // Two Event messages back to back are one merged Event with two payloads: the decoder's.
    const one = toBinary(EventSchema, create(EventSchema, credentialEvent()));
    const event = Buffer.concat([one, one]);
    const field = Buffer.from([0x0a, ...varint(event.length)]); // PublishRequest.events = 1
    const bytes = Buffer.concat([field, event]);
    const request = readPublishRequest(bytes);
    expect(request.events[0].object).toBeDefined();
    const text = request.text.toString('utf8', request.spans[0], request.spans[1]);
    for (const secret of [BEARER, SESSION, TOKEN, 'sid=abc']) expect(text).not.toContain(secret);
    expect(JSON.parse(text).http.request.headers.Authorization).toEqual([REDACTED]);
  });

  it('matches names case-insensitively, never by prefix or in a fragment', () => {
    const names = DEFAULT_REDACTION.queryParams!;
    const has = (s: string, raw = false) => queryHasName(names, Buffer.from(s), 0, s.length, raw);
    expect(has('Access_Token=1')).toBe(true);
    expect(has('access_tokens=1&x=access_token')).toBe(false);
    expect(has('a=1&id_token=')).toBe(true);
    expect(has('https://h/p?x=1#access_token=1', true)).toBe(false);
    expect(has('https://h/access_token=1', true)).toBe(false);
    expect(redactQuery('access_token&x=access_token=1', names)).toBe(
      'access_token&x=access_token=1',
    );
    expect(redactUrl('https://h/p?refresh_token=a=b&y#f', names)).toBe(
      `https://h/p?refresh_token=${REDACTED}&y#f`,
    );
    expect(redactionOf({ keepCredentials: true }).queryParams).toBeNull();
    expect(
      redactionOf({ keepCredentials: true, redactHeaders: ['Cookie'] }).headers!.hasString(
        'COOKIE',
      ),
    ).toBe(true);
  });
});

describe('a source’s redaction in routing', () => {
  const sources = (extra: Partial<RoutingConfig['subscriptions'][0]['sources'][0]>) => [
    { type: HTTP, filter: '', fields: [], ...extra },
  ];
  const subscriptions: RoutingConfig['subscriptions'] = [
    { id: 's1', accountId: 'ac_a', sources: sources({}), destinationIds: ['plain'] },
    {
      id: 's2',
      accountId: 'ac_a',
      sources: sources({ keepCredentials: true }),
      destinationIds: ['kept', 'plain'],
    },
    {
      id: 's3',
      accountId: 'ac_a',
      sources: sources({ redactHeaders: ['x-api-key'] }),
      destinationIds: ['more'],
    },
  ];
  const routing = compileRouting({ version: 1, subscriptions });

  function delivered(order: RoutingConfig['subscriptions']) {
    const routes = compileRouting({ version: 1, subscriptions: order });
    const result = routeRequest(routes, requestBytes(credentialEvent(), credentialEvent()), 0);
    if (result.kind !== 'routed') throw new Error(result.kind);
    return Object.fromEntries(
      result.deliveries.map((d) => [d.destinationId, recordsOf(d).map((r) => r.json)]),
    );
  }

  it.each([
    ['the default', subscriptions],
    ['keep_credentials', [subscriptions[1], subscriptions[0], subscriptions[2]]],
    ['redact_headers', [...subscriptions].reverse()],
  ])('delivers each destination what its source says, %s first', (_, order) => {
    const out = delivered(order);
    expect(out.plain).toHaveLength(4); // s1's and s2's records, each different
    for (const json of [...out.plain.filter((j) => !j.includes(BEARER)), ...out.more]) {
      for (const secret of [BEARER, SESSION, TOKEN, 'sid=abc']) expect(json).not.toContain(secret);
    }
    expect(out.plain.filter((j) => j.includes(BEARER))).toHaveLength(2);
    for (const json of out.kept) {
      const object = JSON.parse(json).object;
      expect(object.http.request.headers.Authorization).toEqual([BEARER]);
      expect(object.http.request.headers.Cookie).toEqual([SESSION, 'theme=dark']);
      expect(object.http.request.url.query).toContain(TOKEN);
      expect(object.http.response.headers['Set-Cookie']).toEqual(['sid=abc; httponly']);
    }
    for (const json of out.more) {
      const headers = JSON.parse(json).object.http.request.headers;
      expect(headers['X-Api-Key']).toEqual([REDACTED]);
      expect(headers.Authorization).toEqual([REDACTED]);
    }
  });

  it('redacts a tap preview by default', () => {
    const result = routeRequest(routing, requestBytes(credentialEvent()), Date.now(), undefined, [
      { id: 't', kind: 'preview', accountId: 'ac_a', type: HTTP, filter: '', fields: [] },
    ]);
    if (result.kind !== 'routed') throw new Error(result.kind);
    const [tapped] = result.tapped!;
    expect(tapped.records).toHaveLength(1);
    expect(tapped.records[0]).not.toContain(BEARER);
    expect(tapped.records[0]).toContain(`"Authorization":["${REDACTED}"]`);
  });
});

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
