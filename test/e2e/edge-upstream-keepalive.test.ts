import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRaw, requestHead } from '../helpers/raw-http.ts';
import { useTestService } from '../helpers/service.ts';
import { curl, eventually, type SshAgent } from './agents-helpers.ts';
import {
  boundAgent,
  eventsOf,
  type RawUpstream,
  rawAnswer,
  startRawUpstream,
  trafficEvents,
} from './edge-helpers.ts';

// The edge pools SSH channels to an agent (keep-alive): a channel whose far end closed (the
// agent's local server ended an idle keep-alive connection) is never handed to a new request,
// and a request that meets such a close before its answer is retried once on a fresh channel
// when that is safe; else 502. Nothing waits longer than EDGE_RESPONSE_TIMEOUT_MS.

const DOMAIN = 'edge-keepalive.example.com';
const TIMEOUT_MS = 3000;

/** Requests per burst: four on each of 16 connections (the pool holds up to 16 channels). */
const BURST = 64;

/** A burst of BURST requests on 16 connections through the edge; what autocannon counted. */
async function burst(edgePort: number, hostname: string) {
  const result = await autocannon({
    url: `http://127.0.0.1:${edgePort}/`,
    headers: { host: hostname },
    connections: 16,
    amount: BURST,
    // A request held longer than this is a timeout (a stalled channel), however loaded the
    // machine is: nothing else in the chain waits.
    timeout: 5,
  });
  return {
    ok: result['2xx'],
    other: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}

/** Expects a burst in which every request was answered 200. */
function servedInFull(counted: Awaited<ReturnType<typeof burst>>, what: string) {
  expect(counted, what).toEqual({ ok: BURST, other: 0, errors: 0, timeouts: 0 });
}

describe('the edge: keep-alive channels to an agent whose server closes idle connections', () => {
  const ctx = useTestService(undefined, { EDGE_RESPONSE_TIMEOUT_MS: String(TIMEOUT_MS) });
  const agents: SshAgent[] = [];
  const servers: Server[] = [];
  let raw: RawUpstream;
  let events: () => any[];

  /** A Node server answering `ok`, closing connections idle for `keepAliveTimeout` ms. */
  async function nodeServer(keepAliveTimeout: number): Promise<{ server: Server; port: number }> {
    const server = createServer((_request, response) => response.end('ok'));
    server.keepAliveTimeout = keepAliveTimeout;
    // Node waits a second more than it announces; not here, to keep the test short.
    server.keepAliveTimeoutBuffer = 0;
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as AddressInfo).port };
  }

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    events = await trafficEvents(ctx, 'keepalive');
    // Answers with the connection's number and the body it received; but /drop… and /hang
    // close, unanswered, a connection that already carried a request, and /hang on a new one
    // never answers.
    raw = await startRawUpstream((request, connection) => {
      const droppable = request.path.startsWith('/drop') || request.path === '/hang';
      if (droppable && connection.requests > 1) return connection.socket.destroy();
      if (request.path === '/hang') return;
      connection.socket.write(
        rawAnswer('200 OK', JSON.stringify({ connection: connection.id, body: request.body })),
      );
    });
    agents.push(await boundAgent(ctx, `raw.${DOMAIN}`, raw.port));
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    for (const server of servers) server.close();
    raw?.close();
  });

  it('serves bursts 2.5 s apart to a Node server whose keep-alive (2 s) ends in between, five times', async () => {
    // Node's default is 5 s (and 8 s between bursts); 2 s keeps the test short, same mechanism:
    // it announces `Keep-Alive: timeout=2` and closes connections idle for 2 s.
    const local = await nodeServer(2000);
    const hostname = `node.${DOMAIN}`;
    agents.push(await boundAgent(ctx, hostname, local.port));
    for (let round = 1; round <= 5; round++) {
      servedInFull(await burst(ctx.service.edgePort!, hostname), `round ${round}, first burst`);
      await sleep(2500);
      servedInFull(await burst(ctx.service.edgePort!, hostname), `round ${round}, second burst`);
    }
  }, 60_000);

  it('serves a burst right after a server that announces no keep-alive timeout closed every idle connection, five times', async () => {
    // As uvicorn, gunicorn or Go do: no Keep-Alive header, so only the close itself tells.
    const local = await nodeServer(0);
    const hostname = `silent.${DOMAIN}`;
    agents.push(await boundAgent(ctx, hostname, local.port));
    for (let round = 1; round <= 5; round++) {
      servedInFull(await burst(ctx.service.edgePort!, hostname), `round ${round}, first burst`);
      local.server.closeIdleConnections();
      await sleep(200);
      servedInFull(await burst(ctx.service.edgePort!, hostname), `round ${round}, second burst`);
    }
  }, 60_000);

  /** Sends one request through the edge on a new connection; its answer. */
  async function send(method: string, path: string, body?: string) {
    const connection = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
    const length: Record<string, number> =
      body === undefined ? {} : { 'content-length': Buffer.byteLength(body) };
    connection.send(requestHead(method, path, { host: `raw.${DOMAIN}`, ...length }) + (body ?? ''));
    const answer = await connection.response(0, 10_000);
    connection.destroy();
    return answer;
  }

  it('retries once on a fresh channel a GET and a PUT whose reused channel closed unanswered', async () => {
    const before = raw.connections.length;
    // The first request opens a channel (a connection to the server) that the pool keeps.
    expect(JSON.parse((await send('GET', '/drop/first')).body).connection).toBe(before + 1);
    const got = await send('GET', '/drop/get');
    expect(got.status).toBe(200);
    expect(JSON.parse(got.body).connection).toBe(before + 2);
    // A PUT's body is sent again, whole, on the fresh channel.
    expect((await send('GET', '/drop/pooled')).status).toBe(200);
    const put = await send('PUT', '/drop/put', 'the document, in full');
    expect(put.status).toBe(200);
    expect(JSON.parse(put.body)).toEqual({ connection: before + 4, body: 'the document, in full' });
    const [getEvent] = await eventsOf(events, '/drop/get');
    expect(getEvent.backend.connection_reused).toBe(false);
    expect(getEvent.http.response.status_code).toBe(200);
    const [putEvent] = await eventsOf(events, '/drop/put');
    expect(putEvent.backend.connection_reused).toBe(false);
  });

  it('answers 502 for a POST whose reused channel closed after it was sent, without sending it twice', async () => {
    expect((await send('GET', '/drop/before-post')).status).toBe(200);
    const posted = await send('POST', '/drop/post', 'charge the card once');
    expect(posted.status).toBe(502);
    expect(raw.received.filter(({ request }) => request.path === '/drop/post')).toHaveLength(1);
    const [event] = await eventsOf(events, '/drop/post');
    expect(event.http.response.status_code).toBe(502);
    expect(event.backend.connection_reused).toBe(true);
  });

  it('retries a POST whose reused channel closed before any of it was sent', async () => {
    expect((await send('GET', '/idle/before-post')).status).toBe(200);
    const pooled = raw.connections.at(-1)!;
    // The head goes to the edge, which takes the pooled channel; the body waits.
    const connection = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
    connection.send(
      requestHead('POST', '/idle/post', { host: `raw.${DOMAIN}`, 'content-length': 4 }),
    );
    await sleep(200);
    // The server ends the idle connection under the waiting request; a fresh channel follows.
    pooled.socket.end();
    await eventually(
      () => (raw.connections.length > pooled.id ? true : undefined),
      'a fresh connection',
    );
    connection.send('body');
    const answer = await connection.response(0, 10_000);
    connection.destroy();
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ connection: pooled.id + 1, body: 'body' });
  });

  it('reports a reused channel as reused, and a fresh one as not', async () => {
    await send('GET', '/reuse/first');
    await send('GET', '/reuse/second');
    const [first] = await eventsOf(events, '/reuse/first');
    const [second] = await eventsOf(events, '/reuse/second');
    expect([first.backend.connection_reused, second.backend.connection_reused]).toEqual([
      false,
      true,
    ]);
  });

  it('answers 504 within EDGE_RESPONSE_TIMEOUT_MS of the request, retry included', async () => {
    expect((await send('GET', '/before-hang')).status).toBe(200);
    const started = Date.now();
    // The pooled channel is dropped at the request, the fresh one never answers.
    const answer = await curl(ctx.service.edgePort!, `raw.${DOMAIN}`, '/hang');
    const waited = Date.now() - started;
    expect(answer.status).toBe(504);
    expect(waited).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(waited).toBeLessThan(TIMEOUT_MS + 1000);
  });
});
