import { create, type JsonObject, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import {
  HttpRequestCompleteSchema,
  TcpConnectionClosedSchema,
} from '../../gen/agent_ingress/events/v0/traffic_pb.ts';
import { PublishRequestSchema } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { newId } from '../../shared/ids.ts';
import type { Decisions } from '../policy/index.ts';

// http_request_complete.v0 as the edge knows it, encoded as the PublishRequest an external edge
// proxy would post: the pipeline gets the same bytes either way, so filters, field selection,
// destinations and durability are the same.

/** The TLS session of an HTTPS request, between client and edge. */
export interface TlsFacts {
  /** As Node names it, e.g. `TLSv1.3`. */
  version: string;
  /** The IANA name, e.g. `TLS_AES_256_GCM_SHA384`. */
  cipherSuite: string;
  clientCert?: { serialNumber: string; subjectCn: string };
}

/** What the edge observed of one request. */
export interface CompletedRequest {
  accountId: string;
  conn: {
    clientIp: string;
    serverIp: string;
    serverName: string;
    serverPort: number;
    startMs: number;
  };
  /** Set on HTTPS. */
  tls?: TlsFacts;
  request: {
    method: string;
    host: string;
    /** The request target as received (path and query). */
    target: string;
    headers: NodeJS.Dict<string | string[]>;
    bodyLength: number;
  };
  response: {
    statusCode: number;
    headers: NodeJS.Dict<string | string[] | number>;
    bodyLength: number;
  };
  connectionReused: boolean;
  /** ip_policy.decision: `allow`, `block`, or `invalid` when no IP restriction was checked. */
  ipDecision: string;
  /** What the endpoint's Traffic Policy decided; absent: no policy ran. */
  decisions?: Decisions;
  endMs: number;
}

/** Field names capitalized so far: clients send the same few names again and again. */
const capitalized = new Map<string, string>();
const CAPITALIZED_KEPT = 1000;

/** `content-type` → `Content-Type` (keys capitalized, as the catalogue says). */
function capitalize(name: string): string {
  let done = capitalized.get(name);
  if (done === undefined) {
    done = name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => {
      return dash + letter.toUpperCase();
    });
    if (capitalized.size < CAPITALIZED_KEPT) capitalized.set(name, done);
  }
  return done;
}

/** Headers normalized as the catalogue says: keys capitalized, values lowercased, repeats kept. */
export function normalizeHeaders(headers: NodeJS.Dict<string | string[] | number>) {
  const out: Record<string, { values: string[] }> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const values = Array.isArray(value)
      ? value.map((v) => v.toLowerCase())
      : [String(value).toLowerCase()];
    out[capitalize(name.toLowerCase())] = { values };
  }
  return out;
}

type HttpRequestCompleteInit = MessageInitShape<typeof HttpRequestCompleteSchema>;

/** ip_policy.decision of the endpoint's IP restrictions and its policy's restrict-ips together. */
export function combinedIpDecision(restrictions: string, policy: string | undefined): string {
  if (restrictions === 'block' || policy === 'block') return 'block';
  if (restrictions === 'allow' || policy === 'allow') return 'allow';
  return 'invalid';
}

/** A request's URL, for its path and query. */
export function requestUrl(scheme: string, host: string, target: string): URL {
  return new URL(target, `${scheme}://${host}`);
}

/**
 * The event's payload; modules that did not run say `invalid`. The edge writes these bytes with
 * http-event-bytes.ts; this message is what they are checked against.
 */
export function httpRequestComplete(done: CompletedRequest): HttpRequestCompleteInit {
  const { conn, request, response, tls } = done;
  const d = done.decisions;
  const scheme = tls === undefined ? 'http' : 'https';
  const url = requestUrl(scheme, request.host, request.target);
  return {
    backend: { connectionReused: done.connectionReused },
    basicAuth: d ? d.basicAuth : { decision: 'invalid' },
    circuitBreaker: { decision: d?.circuitBreaker ?? 'invalid' },
    compression: {
      algorithm: d?.compression.algorithm ?? 'none',
      bytesSaved: BigInt(d?.compression.bytesSaved ?? 0),
    },
    conn: {
      clientIp: conn.clientIp,
      serverIp: conn.serverIp,
      serverName: conn.serverName,
      serverPort: conn.serverPort,
      startTs: timestampFromMs(conn.startMs),
    },
    http: {
      request: {
        bodyLength: BigInt(request.bodyLength),
        headers: normalizeHeaders(request.headers),
        method: request.method.toLowerCase(),
        url: {
          host: request.host,
          path: url.pathname,
          query: url.search.slice(1),
          raw: `${scheme}://${request.host}${request.target}`,
          scheme,
        },
        userAgent: String(request.headers['user-agent'] ?? ''),
      },
      response: {
        bodyLength: BigInt(response.bodyLength),
        headers: normalizeHeaders(response.headers),
        statusCode: response.statusCode,
      },
    },
    ipPolicy: { decision: combinedIpDecision(done.ipDecision, d?.ipPolicy) },
    oauth: d
      ? {
          decision: d.oauth.decision,
          appClientId: d.oauth.appClientId,
          user: { id: d.oauth.userId, name: d.oauth.userName },
        }
      : { decision: 'invalid' },
    ...(tls === undefined ? {} : { tls: tlsMessage(tls) }),
    ...(d === undefined ? {} : { trafficPolicy: { logs: d.logs as JsonObject[] } }),
    webhookVerification: { decision: d?.webhookVerification ?? 'invalid' },
  };
}

function tlsMessage(tls: TlsFacts): NonNullable<HttpRequestCompleteInit['tls']> {
  const cert = tls.clientCert;
  return {
    cipherSuite: tls.cipherSuite,
    version: tls.version,
    ...(cert
      ? { clientCert: { serialNumber: cert.serialNumber, subject: { cn: cert.subjectCn } } }
      : {}),
  };
}

/** What the edge observed of one TCP connection to an endpoint. */
export interface ClosedConnection {
  accountId: string;
  clientIp: string;
  serverIp: string;
  /** The reserved address's host name. */
  serverName: string;
  serverPort: number;
  bytesIn: number;
  bytesOut: number;
  startMs: number;
  endMs: number;
  ipDecision: string;
  /** traffic_policy.logs of the endpoint's on_tcp_connect; absent: no policy ran. */
  logs?: Record<string, unknown>[];
}

/** One event of the edge as the PublishRequest an edge proxy would post. */
function publishOne(
  accountId: string,
  atMs: number,
  payload:
    | { case: 'httpRequestComplete'; value: ReturnType<typeof httpRequestMessage> }
    | { case: 'tcpConnectionClosed'; value: ReturnType<typeof tcpMessage> },
): Uint8Array {
  const message = create(PublishRequestSchema, {
    events: [{ accountId, eventId: newId('ev'), eventTimestamp: timestampFromMs(atMs), payload }],
  });
  return toBinary(PublishRequestSchema, message);
}

function httpRequestMessage(done: CompletedRequest) {
  return create(HttpRequestCompleteSchema, httpRequestComplete(done));
}

function tcpMessage(closed: ClosedConnection) {
  return create(TcpConnectionClosedSchema, {
    conn: {
      bytesIn: BigInt(closed.bytesIn),
      bytesOut: BigInt(closed.bytesOut),
      clientIp: closed.clientIp,
      endTs: timestampFromMs(closed.endMs),
      serverIp: closed.serverIp,
      serverName: closed.serverName,
      serverPort: closed.serverPort,
      startTs: timestampFromMs(closed.startMs),
    },
    ipPolicy: { decision: closed.ipDecision },
    ...(closed.logs === undefined ? {} : { trafficPolicy: { logs: closed.logs as JsonObject[] } }),
  });
}

/** The PublishRequest carrying one completed request. */
export function publishRequestOf(done: CompletedRequest): Uint8Array {
  return publishOne(done.accountId, done.endMs, {
    case: 'httpRequestComplete',
    value: httpRequestMessage(done),
  });
}

/** The PublishRequest carrying one closed TCP connection (tcp_connection_closed.v0). */
export function publishConnectionOf(closed: ClosedConnection): Uint8Array {
  return publishOne(closed.accountId, closed.endMs, {
    case: 'tcpConnectionClosed',
    value: tcpMessage(closed),
  });
}
