import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { type Event, EventSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

/** A small deterministic PRNG (mulberry32): the same seed gives the same events in every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTS = [
  'api.example.com',
  'www.example.com',
  'shop.example.net',
  'agents.example.org',
  'status.example.io',
  'img.cdn.example.com',
];
const PATHS = [
  '/',
  '/v1/users',
  '/v1/orders',
  '/checkout',
  '/static/app.js',
  '/health',
  '/v2/search',
];
const METHODS = ['get', 'get', 'get', 'post', 'put', 'delete'];
const STATUSES = [200, 200, 200, 201, 204, 301, 304, 400, 401, 404, 429, 500, 502, 503];
const PORTS = [443, 443, 443, 80, 8443, 22, 5432];
const HEADER_NAMES = [
  'Accept',
  'Accept-Encoding',
  'Accept-Language',
  'Cache-Control',
  'Connection',
  'Cookie',
  'Dnt',
  'Origin',
  'Pragma',
  'Referer',
  'Sec-Fetch-Mode',
  'Sec-Fetch-Site',
  'Te',
  'Upgrade-Insecure-Requests',
  'X-Forwarded-For',
  'X-Request-Id',
  'X-Trace-Id',
];
const DECISIONS = ['allow', 'allow', 'allow', 'block', 'invalid'];

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)];
}

function headers(random: () => number) {
  const count = 8 + Math.floor(random() * 8);
  const result: Record<string, { values: string[] }> = {};
  for (let i = 0; i < count; i++) {
    const name = HEADER_NAMES[(i * 7 + Math.floor(random() * 3)) % HEADER_NAMES.length];
    result[name] = { values: [`value-${Math.floor(random() * 1000)}`] };
  }
  return result;
}

/** Options of the generated traffic: which accounts, which share of TCP events. */
export interface EventMix {
  accounts: readonly string[];
  tcpShare?: number;
  seed?: number;
  /** Base event time (ms); events are spread over the following hour. */
  startMs?: number;
}

/** Realistic traffic events: both kinds, 8-15 headers, varied hosts, client IPs, ports, statuses. */
export function generateEvents(count: number, mix: EventMix): Event[] {
  const random = seededRandom(mix.seed ?? 1);
  const start = mix.startMs ?? Date.UTC(2026, 10, 22, 10, 0, 0);
  const events: Event[] = [];
  for (let i = 0; i < count; i++) {
    const accountId = mix.accounts[i % mix.accounts.length];
    const at = start + Math.floor((i / count) * 3_600_000);
    const conn = {
      clientIp: `10.${Math.floor(random() * 4)}.${Math.floor(random() * 256)}.${Math.floor(random() * 256)}`,
      serverIp: `192.0.2.${1 + Math.floor(random() * 20)}`,
      serverName: pick(random, HOSTS),
      serverPort: pick(random, PORTS),
      startTs: timestampFromMs(at - 1500),
    };
    if (random() < (mix.tcpShare ?? 0.3)) {
      events.push(
        create(EventSchema, {
          accountId,
          eventTimestamp: timestampFromMs(at),
          payload: {
            case: 'tcpConnectionClosed',
            value: {
              conn: {
                ...conn,
                bytesIn: BigInt(Math.floor(random() * 1_000_000)),
                bytesOut: BigInt(Math.floor(random() * 5_000_000)),
                endTs: timestampFromMs(at),
              },
              ipPolicy: { decision: pick(random, DECISIONS) },
            },
          },
        }),
      );
      continue;
    }
    const host = conn.serverName;
    const path = pick(random, PATHS);
    events.push(
      create(EventSchema, {
        accountId,
        eventTimestamp: timestampFromMs(at),
        payload: {
          case: 'httpRequestComplete',
          value: {
            backend: { connectionReused: random() < 0.7 },
            basicAuth: { decision: 'invalid' },
            circuitBreaker: { decision: 'allow' },
            compression: { algorithm: 'gzip', bytesSaved: BigInt(Math.floor(random() * 10_000)) },
            conn,
            http: {
              request: {
                bodyLength: BigInt(Math.floor(random() * 20_000)),
                headers: headers(random),
                method: pick(random, METHODS),
                url: {
                  host,
                  path,
                  query: 'q=1',
                  raw: `https://${host}${path}?q=1`,
                  scheme: 'https',
                },
                userAgent: 'Mozilla/5.0 (X11; Linux x86_64) bench',
              },
              response: {
                bodyLength: BigInt(Math.floor(random() * 200_000)),
                headers: headers(random),
                statusCode: pick(random, STATUSES),
              },
            },
            ipPolicy: { decision: pick(random, DECISIONS) },
            oauth: { decision: 'invalid' },
            tls: { cipherSuite: 'TLS_AES_128_GCM_SHA256', version: 'TLSv1.3' },
            webhookVerification: { decision: 'invalid' },
          },
        },
      }),
    );
  }
  return events;
}
