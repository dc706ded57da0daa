import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import {
  type Event,
  PublishRequestSchema,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { LINGER_IDLE_MS, LINGER_MAX_BYTES } from '../../src/shared/http/lingering-close.ts';
import { generateEvents } from '../helpers/events.ts';
import { expectError } from '../helpers/expect-error.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { requestHead } from '../helpers/raw-http.ts';
import { TEST_BOOTSTRAP_KEY, useTestService } from '../helpers/service.ts';

// An answer given before its request has arrived whole (a stream past its limit, a body over its
// limit) reaches the client: over HTTP/1.1 the service closes only after it has read and dropped
// the rest of the body, within bounds (a lingering close). Closing with unread bytes resets the
// connection, and the client's TCP stack drops the answer with it.

const PUBLISH_STREAM = '/agent_ingress.ingest.v0.IngestService/PublishStream';
const MiB = 1024 * 1024;

/** `count` small events whose ids are `<prefix>-<i>`, copies of `pool`'s. */
function named(pool: Event[], prefix: string): Event[] {
  return pool.map((event, i) => ({ ...event, eventId: `${prefix}-${i}` }));
}

/**
 * POSTs `size` bytes to `path` (chunked, or with a Content-Length) and reads the answer only once
 * all of it is sent, as many clients do (Python's requests, curl without Expect): what it reads,
 * or the error that ended the exchange.
 */
async function postThenRead(
  url: string,
  path: string,
  size: number,
  chunked: boolean,
  token: string | null = TEST_BOOTSTRAP_KEY,
) {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true }).pause();
  let error: string | undefined;
  socket.on('error', (e: NodeJS.ErrnoException) => {
    error ??= e.code;
  });
  // The service's FIN ('end') after its answer, or a reset ('close' after an error).
  const ended = new Promise<void>((resolve) => socket.once('end', resolve).once('close', resolve));
  const headers: Record<string, string | number> = { 'content-type': 'application/json' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (chunked) headers['transfer-encoding'] = 'chunked';
  else headers['content-length'] = size;
  const write = (data: Buffer | string) =>
    new Promise<void>((resolve) => socket.write(data, () => resolve()));
  await write(requestHead('POST', path, headers));
  const piece = Buffer.alloc(256 * 1024, 0x20);
  for (let sent = 0; sent < size && error === undefined; sent += piece.length) {
    await write(chunked ? chunk(piece) : piece);
  }
  if (chunked) await write('0\r\n\r\n');
  let received = '';
  socket.setEncoding('latin1').on('data', (text: string) => {
    received += text;
  });
  socket.resume();
  await ended;
  socket.destroy();
  return { error, received };
}

describe('an early answer reaches the client before the connection closes', () => {
  const context = useTestService(undefined, {
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    MAX_STREAM_EVENTS: '100000',
  });

  it('answers a PublishStream of 300,000 events in 30 messages over HTTP/1.1 with RESOURCE_EXHAUSTED and its durable prefix', async () => {
    const pool = generateEvents(10_000, { accounts: ['ac_linger'], tcpShare: 1, seed: 30 });
    const messages = Array.from({ length: 30 }, (_, i) => named(pool, `m${i}`));
    async function* requests() {
      for (const events of messages) yield { events };
    }
    const client = ingestClient(context.service.url, TEST_INGEST_TOKEN);
    const answer = await client.publishStream(requests()).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    expect(answer?.code, answer?.message).toBe(Code.ResourceExhausted);
    expect(answer?.rawMessage).toContain('MAX_STREAM_EVENTS');
    const [durable] = answer!.findDetails(PublishResponseSchema);
    expect(durable?.accepted).toBe(100_000);
    const expected = messages.slice(0, 10).flatMap((events) => events.map((e) => e.eventId));
    expect(durable?.eventIds.length).toBe(expected.length);
    expect(durable?.eventIds).toEqual(expected);
  });

  it('refuses a 5 MiB Publish with RESOURCE_EXHAUSTED: MAX_INGEST_BYTES is 4 MiB by default', async () => {
    const events = generateEvents(6_000, { accounts: ['ac_linger'], tcpShare: 0, seed: 5 });
    const size = toBinary(PublishRequestSchema, create(PublishRequestSchema, { events })).length;
    expect(size).toBeGreaterThan(4.5 * MiB);
    expect(size).toBeLessThan(6 * MiB);
    const client = ingestClient(context.service.url, TEST_INGEST_TOKEN);
    const refused = await client.publish(events).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    expect(refused?.code, refused?.message).toBe(Code.ResourceExhausted);
    expect(refused?.rawMessage).toContain('larger than 4194304 bytes (MAX_INGEST_BYTES)');
    // The largest request the default accepts: just under 4 MiB.
    const fits = events.slice(0, Math.floor((events.length * 3.9 * MiB) / size));
    expect((await client.publish(fits)).accepted).toBe(fits.length);
  });

  it.each([
    ['chunked', true],
    ['with a Content-Length', false],
  ])(
    'answers a REST body over MAX_BODY_BYTES sent %s with 413, read after sending it all',
    async (_, chunked) => {
      const url = context.service.url;
      const { error, received } = await postThenRead(url, '/event_destinations', 24 * MiB, chunked);
      expect(error).toBeUndefined();
      expect(received).toMatch(/^HTTP\/1.1 413 /);
      const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4));
      expectError({ status: 413, body, headers: new Headers() }, 413, 'ERR_BODY_TOO_LARGE');
    },
  );

  it('answers a large upload without a key with 401, read after sending it all', async () => {
    const url = context.service.url;
    const sent = await postThenRead(url, '/event_destinations', 24 * MiB, true, null);
    expect(sent.error).toBeUndefined();
    expect(sent.received).toMatch(/^HTTP\/1.1 401 /);
  });
});

/**
 * A PublishStream over a bare socket whose chunked body never ends, answered at once: its first
 * frame announces more than MAX_INGEST_BYTES. The socket stays writable after the service's FIN
 * (Node's HTTP client would stop sending once it has the answer; a client that does not is what
 * the bounds are for).
 */
async function endlessStream(url: string) {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
  socket.on('error', () => {}); // a reset is one way to be cut; 'close' follows
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  let received = '';
  const answered = new Promise<string>((resolve) => {
    socket.setEncoding('latin1').on('data', (text: string) => {
      received += text;
      const head = received.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(received)?.[1]);
      if (head > 0 && received.length >= head + 4 + length) resolve(received);
    });
  });
  socket.write(
    requestHead('POST', PUBLISH_STREAM, {
      'content-type': 'application/connect+proto',
      authorization: `Bearer ${TEST_INGEST_TOKEN}`,
      'transfer-encoding': 'chunked',
    }),
  );
  socket.write(chunk(Buffer.from([0, 0xff, 0xff, 0xff, 0xff])));
  const answer = await answered;
  return { socket, answer, answeredAt: Date.now(), closed };
}

/** One chunk of a chunked body. */
function chunk(data: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]);
}

describe('the lingering close is bounded', () => {
  const REQUEST_TIMEOUT_MS = 10_000;
  const context = useTestService(undefined, {
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  });

  it('cuts a client that keeps sending after its answer: at the byte bound, at REQUEST_TIMEOUT_MS, or when it goes idle', async () => {
    const started = Date.now();
    const [flood, trickle, silent] = await Promise.all(
      [0, 1, 2].map(() => endlessStream(context.service.url)),
    );
    for (const { answer } of [flood, trickle, silent]) {
      expect(answer).toMatch(/^HTTP\/1.1 200 /);
      expect(answer).toMatch(/\r\nconnection: close\r\n/i);
      expect(answer).toContain('resource_exhausted');
    }
    // Flood: as fast as the connection takes it, counting what went out after the answer.
    let flooded = 0;
    const block = chunk(Buffer.alloc(256 * 1024));
    const pump = () => {
      while (!flood.socket.destroyed) {
        flooded += block.length;
        if (!flood.socket.write(block)) return void flood.socket.once('drain', pump);
      }
    };
    pump();
    const dribble = setInterval(() => trickle.socket.write(chunk(Buffer.alloc(1))), 100);
    // Silent: a socket the service closes after its FIN hears nothing more; writes then meet a
    // reset (the first is taken by the kernel, a later one fails), which shows it.
    const poked = sleep(LINGER_IDLE_MS + 500).then(async () => {
      const poke = setInterval(() => silent.socket.write(chunk(Buffer.alloc(1))), 50);
      const closed = await Promise.race([silent.closed, sleep(2_000).then(() => Number.NaN)]);
      clearInterval(poke);
      return closed;
    });
    try {
      const [floodClosed, trickleClosed, silentClosed] = await Promise.all([
        flood.closed,
        trickle.closed,
        poked,
      ]);
      // Kernel buffers on both ends hold a few MiB beyond what the service read.
      expect(flooded).toBeGreaterThan(LINGER_MAX_BYTES);
      expect(flooded).toBeLessThan(LINGER_MAX_BYTES + 32 * MiB);
      expect(floodClosed - flood.answeredAt).toBeLessThan(LINGER_IDLE_MS);
      expect(silentClosed - silent.answeredAt, 'closed once idle').toBeLessThan(
        LINGER_IDLE_MS + 2_500,
      );
      expect(trickleClosed - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
      expect(trickleClosed - started).toBeLessThan(REQUEST_TIMEOUT_MS + 3_000);
    } finally {
      clearInterval(dribble);
      for (const { socket } of [flood, trickle, silent]) socket.destroy();
    }
  });
});
