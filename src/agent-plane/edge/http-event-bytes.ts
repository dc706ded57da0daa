import { create, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { TrafficPolicySchema } from '../../gen/agent_ingress/events/v0/traffic_pb.ts';
import { newId } from '../../shared/ids.ts';
import type { Decisions } from '../policy/index.ts';
import {
  type CompletedRequest,
  combinedIpDecision,
  normalizeHeaders,
  requestUrl,
  type TlsFacts,
} from './traffic-event.ts';

// The PublishRequest of one http_request_complete.v0, written field by field: the edge makes
// one per request, and protobuf-es's create() and toBinary() walk the schema by reflection,
// which was ~13 % of the edge's thread through `ssh -R`. The bytes are toBinary's (fields in
// number order, proto3 zero values left out; test/unit/http-event-bytes.test.ts compares the
// two), so the pipeline reads them as any Publish. Field numbers: proto/agent_ingress/.

const LEN = WireType.LengthDelimited;

/** One writer for every event: finish() copies the bytes out and keeps its grown buffer. */
const writer = new BinaryWriter();

/** The PublishRequest (events = 1) carrying `done` as its one event. */
export function httpEventBytes(done: CompletedRequest, eventId = newId('ev')): Uint8Array {
  const w = writer;
  try {
    w.tag(1, LEN).fork();
    text(w, 1, done.accountId);
    text(w, 2, eventId);
    timestamp(w, 3, done.endMs);
    w.tag(10, LEN).fork();
    httpRequestComplete(w, done);
    return w.join().join().finish();
  } catch (error) {
    w.finish(); // the next event starts on an empty writer
    throw error;
  }
}

function httpRequestComplete(w: BinaryWriter, done: CompletedRequest): void {
  const d = done.decisions;
  w.tag(1, LEN).fork();
  if (done.connectionReused) w.tag(1, WireType.Varint).bool(true);
  w.join();
  w.tag(2, LEN).fork();
  text(w, 1, d?.basicAuth.decision ?? 'invalid');
  text(w, 2, d?.basicAuth.username ?? '');
  w.join();
  message(w, 3, () => text(w, 1, d?.circuitBreaker ?? 'invalid'));
  w.tag(4, LEN).fork();
  text(w, 1, d?.compression.algorithm ?? 'none');
  int64(w, 2, d?.compression.bytesSaved ?? 0);
  w.join();
  conn(w, done);
  http(w, done);
  message(w, 7, () => text(w, 1, combinedIpDecision(done.ipDecision, d?.ipPolicy)));
  oauth(w, d);
  if (done.tls !== undefined) tls(w, done.tls);
  if (d !== undefined) {
    const policy = create(TrafficPolicySchema, { logs: d.logs as never });
    w.tag(10, LEN).bytes(toBinary(TrafficPolicySchema, policy));
  }
  message(w, 11, () => text(w, 1, d?.webhookVerification ?? 'invalid'));
}

function conn(w: BinaryWriter, { conn }: CompletedRequest): void {
  w.tag(5, LEN).fork();
  text(w, 1, conn.clientIp);
  text(w, 2, conn.serverIp);
  text(w, 3, conn.serverName);
  if (conn.serverPort !== 0) w.tag(4, WireType.Varint).int32(conn.serverPort);
  timestamp(w, 5, conn.startMs);
  w.join();
}

function http(w: BinaryWriter, { request, response, tls }: CompletedRequest): void {
  const scheme = tls === undefined ? 'http' : 'https';
  const url = requestUrl(scheme, request.host, request.target);
  w.tag(6, LEN).fork();
  w.tag(1, LEN).fork();
  int64(w, 1, request.bodyLength);
  headers(w, 2, request.headers);
  text(w, 3, request.method.toLowerCase());
  w.tag(4, LEN).fork();
  text(w, 1, request.host);
  text(w, 2, url.pathname);
  text(w, 3, url.search.slice(1));
  text(w, 4, `${scheme}://${request.host}${request.target}`);
  text(w, 5, scheme);
  w.join();
  text(w, 5, String(request.headers['user-agent'] ?? ''));
  w.join();
  w.tag(2, LEN).fork();
  int64(w, 1, response.bodyLength);
  headers(w, 2, response.headers);
  if (response.statusCode !== 0) w.tag(3, WireType.Varint).int32(response.statusCode);
  w.join();
  w.join();
}

function oauth(w: BinaryWriter, d: Decisions | undefined): void {
  w.tag(8, LEN).fork();
  if (d === undefined) {
    text(w, 2, 'invalid');
    return void w.join();
  }
  text(w, 1, d.oauth.appClientId);
  text(w, 2, d.oauth.decision);
  w.tag(3, LEN).fork();
  text(w, 1, d.oauth.userId);
  text(w, 2, d.oauth.userName);
  w.join().join();
}

function tls(w: BinaryWriter, facts: TlsFacts): void {
  w.tag(9, LEN).fork();
  text(w, 1, facts.cipherSuite);
  const cert = facts.clientCert;
  if (cert !== undefined) {
    w.tag(2, LEN).fork();
    text(w, 1, cert.serialNumber);
    message(w, 2, () => text(w, 1, cert.subjectCn));
    w.join();
  }
  text(w, 3, facts.version);
  w.join();
}

/** map<string, StringList>: an entry (key = 1, value = 2) per field name. */
function headers(w: BinaryWriter, field: number, fields: Parameters<typeof normalizeHeaders>[0]) {
  for (const [name, { values }] of Object.entries(normalizeHeaders(fields))) {
    w.tag(field, LEN).fork();
    w.tag(1, LEN).string(name);
    w.tag(2, LEN).fork();
    for (const value of values) w.tag(1, LEN).string(value);
    w.join().join();
  }
}

function message(w: BinaryWriter, field: number, body: () => void): void {
  w.tag(field, LEN).fork();
  body();
  w.join();
}

function text(w: BinaryWriter, field: number, value: string): void {
  if (value !== '') w.tag(field, LEN).string(value);
}

function int64(w: BinaryWriter, field: number, value: number): void {
  if (value !== 0) w.tag(field, WireType.Varint).int64(value);
}

/** google.protobuf.Timestamp: seconds = 1, nanos = 2. */
function timestamp(w: BinaryWriter, field: number, ms: number): void {
  w.tag(field, LEN).fork();
  int64(w, 1, Math.floor(ms / 1000));
  const nanos = (ms % 1000) * 1_000_000;
  if (nanos !== 0) w.tag(2, WireType.Varint).int32(nanos);
  w.join();
}
