import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRaw, type RawConnection, requestHead } from '../helpers/raw-http.ts';
import { useTestService } from '../helpers/service.ts';
import { curl, eventually, type SshAgent } from './agents-helpers.ts';
import {
  boundAgent,
  eventsOf,
  type RawUpstream,
  rawAnswer,
  sessionIds,
  startRawUpstream,
  trafficEvents,
} from './edge-helpers.ts';

// One request's failure stays that request's: an agent's answer after the edge's 504, a status
// code HTTP does not have, or a handler that throws never reaches the agent's SSH connection,
// which goes on serving. A client that leaves ends its request's channel at once, even when the
// agent answered before its upload was done.

const DOMAIN = 'edge-faults.example.com';
const TIMEOUT_MS = 2000;
const CHANNELS = 16;

describe('the edge: upstream faults stay with their request', () => {
  const ctx = useTestService(undefined, {
    EDGE_RESPONSE_TIMEOUT_MS: String(TIMEOUT_MS),
    MAX_CHANNELS_PER_SESSION: String(CHANNELS),
  });
  const agents: SshAgent[] = [];
  let local: Server;
  /** The sockets of /slow requests the local server holds, open or closed. */
  const held: Socket[] = [];
  /** The sockets of /early/… uploads the local server answered without reading their bodies. */
  const early: Socket[] = [];
  let raw: RawUpstream;
  /** Set once the raw server wrote its late answer. */
  let lateSent = false;
  let events: () => any[];
  const nodeHost = `node.${DOMAIN}`;
  const rawHost = `raw.${DOMAIN}`;

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    events = await trafficEvents(ctx, 'faults');
    // Node's http: reads bodies whole (an unfinished one gets its 400 when the channel ends),
    // holds /slow, answers /early/… before its body came, answers anything else.
    local = createServer((request, response) => {
      if (request.url === '/slow') return void held.push(request.socket);
      if (request.url!.startsWith('/early/')) {
        early.push(request.socket);
        return void response.end('early');
      }
      request.resume();
      request.on('end', () => response.end('ok'));
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    agents.push(await boundAgent(ctx, nodeHost, (local.address() as AddressInfo).port));
    // Answers /status/<code> with that status line, /late as the edge's timeout expires.
    raw = await startRawUpstream((request, connection) => {
      if (request.path === '/short') {
        // 10 of the 100 bytes announced, then the agent's server closes the connection.
        connection.socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789');
        return void connection.socket.end();
      }
      if (request.path !== '/late') {
        const code = request.path.slice('/status/'.length);
        return void connection.socket.write(rawAnswer(`${code} As Asked`, 'as asked'));
      }
      // The answer leaves just before the edge's timeout, and this process (the edge's too)
      // then stalls past it: when it resumes, libuv runs the edge's expired timer (the 504)
      // before it reads the answer waiting in the SSH connection. Written from the check phase,
      // so that no I/O poll comes between the write and the stall.
      setTimeout(
        () =>
          setImmediate(() => {
            connection.socket.write(rawAnswer('200 OK', 'late'));
            lateSent = true;
            const until = Date.now() + 300;
            while (Date.now() < until);
          }),
        TIMEOUT_MS - 100,
      );
    });
    agents.push(await boundAgent(ctx, rawHost, raw.port));
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    local?.close();
    raw?.close();
  });

  /** The tunnels still serve, on the same SSH connections (the same sessions). */
  async function stillServing(sessions: Record<string, string>) {
    expect((await curl(ctx.service.edgePort!, nodeHost, '/')).status).toBe(200);
    expect((await curl(ctx.service.edgePort!, rawHost, '/status/200')).status).toBe(200);
    for (const agent of agents) expect(agent.child.exitCode).toBeNull();
    expect(await sessionIds(ctx)).toEqual(sessions);
  }

  /**
   * The clients leave; the agent-side connections of their requests (`agentSide`) close well
   * within the timeout, and their channels are free again: the session is under
   * MAX_CHANNELS_PER_SESSION and serves the next request.
   */
  async function leaveAndExpectFreed(clients: RawConnection[], agentSide: Socket[]) {
    const left = Date.now();
    for (const client of clients) client.destroy();
    await eventually(
      () => (agentSide.every((socket) => socket.destroyed) ? true : undefined),
      'the agent-side connections closed',
      TIMEOUT_MS,
    );
    expect(Date.now() - left).toBeLessThan(TIMEOUT_MS / 2);
    expect((await curl(ctx.service.edgePort!, nodeHost, '/')).status).toBe(200);
  }

  it('keeps serving after ten unfinished uploads hit the timeout', async () => {
    const sessions = await sessionIds(ctx);
    const uploads: RawConnection[] = [];
    for (let i = 0; i < 10; i++) {
      const upload = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
      upload.send(requestHead('POST', `/upload/${i}`, { host: nodeHost, 'content-length': 100 }));
      upload.send('7 bytes');
      uploads.push(upload);
    }
    const answers = await Promise.all(uploads.map((upload) => upload.response(0, 10_000)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(504));
    // The agent's server answers each when its channel ends: after the edge did.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await stillServing(sessions);
    for (let i = 0; i < 10; i++) {
      const found = await eventsOf(events, `/upload/${i}`);
      expect(found.map((event) => event.http.response.status_code)).toEqual([504]);
    }
    for (const upload of uploads) upload.destroy();
  });

  it('answers 502 for a status below 100 or above 599, and keeps serving', async () => {
    const sessions = await sessionIds(ctx);
    for (const code of ['000', '099', '600']) {
      const answer = await curl(ctx.service.edgePort!, rawHost, `/status/${code}`);
      expect(answer.status, code).toBe(502);
      expect(answer.body).toContain(`invalid status ${Number(code)}`);
      await stillServing(sessions);
      const [event] = await eventsOf(events, `/status/${code}`);
      expect(event.http.response.status_code).toBe(502);
    }
  });

  it('drops an answer that comes after the edge answered 504, and keeps serving', async () => {
    const sessions = await sessionIds(ctx);
    expect((await curl(ctx.service.edgePort!, rawHost, '/late')).status).toBe(504);
    expect(lateSent).toBe(true);
    // Time for its SSH connection to fail, if it would.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await stillServing(sessions);
    const found = await eventsOf(events, '/late');
    expect(found.map((event) => event.http.response.status_code)).toEqual([504]);
  });

  it("cuts the client's response short when the agent's answer is cut short", async () => {
    const sessions = await sessionIds(ctx);
    const client = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
    client.send(requestHead('GET', '/short', { host: rawHost }));
    await client.closed;
    const received = client.received();
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(received.endsWith('\r\n\r\n0123456789')).toBe(true);
    expect(client.responses()).toEqual([]);
    await stillServing(sessions);
  });

  it('ends the channel of a request whose client left, at once', async () => {
    const clients: RawConnection[] = [];
    for (let i = 0; i < CHANNELS; i++) {
      const client = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
      client.send(requestHead('GET', '/slow', { host: nodeHost }));
      clients.push(client);
    }
    await eventually(() => (held.length === CHANNELS ? true : undefined), 'the held requests');
    await leaveAndExpectFreed(clients, held);
    const found = await eventsOf(events, '/slow', CHANNELS);
    expect(found.map((event) => event.http.response.status_code)).toEqual(
      Array(CHANNELS).fill(499),
    );
  });

  it('ends the channel of an upload whose client left after the agent answered it', async () => {
    const clients: RawConnection[] = [];
    for (let i = 0; i < CHANNELS; i++) {
      const client = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
      const head = { host: nodeHost, 'content-length': 100_000 };
      client.send(requestHead('POST', `/early/${i}`, head));
      client.send('x'.repeat(1000));
      clients.push(client);
    }
    const answers = await Promise.all(clients.map((client) => client.response(0, 10_000)));
    expect(answers.map((answer) => answer.body)).toEqual(Array(CHANNELS).fill('early'));
    // The body will never end: the channels carry nothing more, and no pool may take them.
    await leaveAndExpectFreed(clients, early);
    for (let i = 0; i < CHANNELS; i++) {
      const [event] = await eventsOf(events, `/early/${i}`);
      expect(event.http.response.status_code).toBe(200);
    }
  });
});
