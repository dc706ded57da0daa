import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestService } from '../helpers/service.ts';
import type { SshAgent } from './agents-helpers.ts';
import {
  boundAgent,
  eventsOf,
  type RawConnection,
  type RawUpstream,
  rawAnswer,
  startRawUpstream,
  trafficEvents,
} from './edge-helpers.ts';

// The edge reads the agent's answers itself (agent-exchange.ts): every way HTTP/1.1 frames an
// answer's body, through a real `ssh -R` agent whose local server writes its bytes by hand, in
// pieces the edge must put together. Each answer must reach the client whole, and the channel
// must be reused after it exactly when HTTP lets it (the next request's connection says which).

const DOMAIN = 'edge-framing.example.com';
const HOST = `raw.${DOMAIN}`;

/** Writes `pieces` one after another, `gapMs` apart (separate SSH packets). */
async function writeApart(connection: RawConnection, pieces: string[], gapMs = 30) {
  for (const piece of pieces) {
    connection.socket.write(piece);
    await sleep(gapMs);
  }
}

const ANSWERS: Record<string, (connection: RawConnection) => void | Promise<void>> = {
  '/chunked': (c) =>
    writeApart(c, [
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Mixed-Case: Kept\r\n\r\n5',
      ';ext=1\r\nhel',
      'lo\r\n6\r\n world\r\n0\r\n',
      'X-Trailer: dropped\r\n\r\n',
    ]),
  '/head': (c) => void c.socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n'),
  '/no-content': (c) => void c.socket.write('HTTP/1.1 204 No Content\r\nx-seen: 1\r\n\r\n'),
  '/not-modified': (c) =>
    void c.socket.write('HTTP/1.1 304 Not Modified\r\netag: "v1"\r\ncontent-length: 50\r\n\r\n'),
  '/interim': (c) =>
    writeApart(c, [
      'HTTP/1.1 100 Continue\r\n\r\n',
      'HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n',
      rawAnswer('200 OK', 'after the interim answers'),
    ]),
  '/split-head': (c) =>
    writeApart(c, ['HTTP/1.1 200 O', 'K\r\ncontent-len', 'gth: 5\r\n\r', '\nsp', 'lit']),
  '/until-close': async (c) => {
    await writeApart(c, ['HTTP/1.1 200 OK\r\nx-framing: none\r\n\r\nup to ', 'the close']);
    c.socket.end();
  },
  '/cut-chunked': async (c) => {
    await writeApart(c, [
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n',
      'a\r\n0123456789\r\n',
    ]);
    c.socket.end();
  },
  '/connection-close': (c) =>
    void c.socket.write(rawAnswer('200 OK', 'bye', ['connection: close'])),
  '/http-1.0': (c) => void c.socket.write('HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok'),
  '/beyond': (c) => void c.socket.write(`${rawAnswer('200 OK', 'mine')}HTTP/1.1 200 OK\r\n\r\n`),
  '/keep-alive-1s': (c) =>
    void c.socket.write(rawAnswer('200 OK', 'ok', ['keep-alive: timeout=1'])),
};

interface Answer {
  status: number;
  rawHeaders: string[];
  body: string;
  complete: boolean;
}

describe("the edge: an agent's answer framed every way HTTP/1.1 frames one", () => {
  // A framing misread shows as a 504, soon.
  const ctx = useTestService(undefined, { EDGE_RESPONSE_TIMEOUT_MS: '5000' });
  let agent: SshAgent;
  let raw: RawUpstream;
  let events: () => any[];

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    events = await trafficEvents(ctx, 'framing');
    raw = await startRawUpstream((request, connection) => {
      const answer = ANSWERS[request.path] ?? ((c) => c.socket.write(rawAnswer('200 OK', 'ok')));
      void answer(connection);
    });
    agent = await boundAgent(ctx, HOST, raw.port);
  });
  afterAll(async () => {
    await agent?.kill();
    raw?.close();
  });

  /** One request to the edge on a connection of its own; the answer as the client got it. */
  function send(path: string, method = 'GET'): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const port = ctx.service.edgePort!;
      const outgoing = httpRequest({ port, path, method, headers: { host: HOST }, agent: false });
      outgoing.on('error', reject);
      outgoing.on('response', (response) => {
        let body = '';
        response.setEncoding('latin1');
        response.on('data', (chunk: string) => {
          body += chunk;
        });
        const done = () =>
          resolve({
            status: response.statusCode!,
            rawHeaders: response.rawHeaders,
            body,
            complete: response.complete,
          });
        response.on('end', done);
        response.on('error', done);
      });
      outgoing.end();
    });
  }

  /** The upstream connection that got the last request to `path`. */
  function connectionOf(path: string): number {
    return raw.received.findLast(({ request }) => request.path === path)!.connection;
  }

  /** Asserts whether the request after `path` went on the same agent-side connection. */
  async function expectReuse(path: string, reused: boolean) {
    const next = `/after${path}`;
    expect((await send(next)).body).toBe('ok');
    expect(connectionOf(next) === connectionOf(path), `reused after ${path}`).toBe(reused);
    const [event] = await eventsOf(events, next);
    expect(event.backend.connection_reused).toBe(reused);
  }

  it('reads a chunked answer in pieces (a size line split, extensions, trailers) and reuses the channel', async () => {
    await send('/warm-up');
    const answer = await send('/chunked');
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('hello world');
    expect(answer.complete).toBe(true);
    expect(answer.rawHeaders).toContain('X-Mixed-Case');
    expect(answer.rawHeaders).not.toContain('X-Trailer');
    const [event] = await eventsOf(events, '/chunked');
    expect(event.http.response.body_length).toBe(11);
    await expectReuse('/chunked', true);
  });

  it('reads no body after the answer to a HEAD, whatever its Content-Length says', async () => {
    const answer = await send('/head', 'HEAD');
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('');
    await expectReuse('/head', true);
  });

  it('reads no body after a 204 or a 304', async () => {
    const noContent = await send('/no-content');
    expect([noContent.status, noContent.body]).toEqual([204, '']);
    await expectReuse('/no-content', true);
    const notModified = await send('/not-modified');
    expect([notModified.status, notModified.body]).toEqual([304, '']);
    await expectReuse('/not-modified', true);
  });

  it('passes over interim 1xx answers to the final one', async () => {
    const answer = await send('/interim');
    expect([answer.status, answer.body]).toEqual([200, 'after the interim answers']);
    await expectReuse('/interim', true);
  });

  it('reads a head that comes in several pieces', async () => {
    const answer = await send('/split-head');
    expect([answer.status, answer.body]).toEqual([200, 'split']);
    await expectReuse('/split-head', true);
  });

  it('reads an answer without framing up to the close, and never reuses its channel', async () => {
    const answer = await send('/until-close');
    expect([answer.status, answer.body, answer.complete]).toEqual([200, 'up to the close', true]);
    await expectReuse('/until-close', false);
  });

  it("cuts the client's response short when a chunked answer is cut short", async () => {
    const answer = await send('/cut-chunked');
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('0123456789');
    expect(answer.complete).toBe(false);
    await expectReuse('/cut-chunked', false);
  });

  it('does not reuse a channel after Connection: close, HTTP/1.0, or bytes beyond the answer', async () => {
    expect((await send('/connection-close')).body).toBe('bye');
    await expectReuse('/connection-close', false);
    expect((await send('/http-1.0')).body).toBe('ok');
    await expectReuse('/http-1.0', false);
    expect((await send('/beyond')).body).toBe('mine');
    await expectReuse('/beyond', false);
  });

  it('does not pool a channel whose server keeps it only 1 s (Keep-Alive: timeout=1)', async () => {
    expect((await send('/keep-alive-1s')).body).toBe('ok');
    await expectReuse('/keep-alive-1s', false);
  });

  it('does not reuse a pooled channel whose server closed it, and serves on a new one', async () => {
    await send('/before-close');
    const pooled = raw.connections.find(({ id }) => id === connectionOf('/before-close'))!;
    pooled.socket.end();
    await sleep(200);
    await expectReuse('/before-close', false);
  });
});
