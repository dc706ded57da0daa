import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRaw } from '../helpers/raw-http.ts';
import { useTestService } from '../helpers/service.ts';
import { eventually, type SshAgent } from './agents-helpers.ts';
import { boundAgent, eventsOf, trafficEvents } from './edge-helpers.ts';

// What the agent receives and what the client gets back: the request target's authority wins
// over Host (RFC 9112 §3.2.2), two Host fields are refused, hop-by-hop fields stop at the edge
// both ways (RFC 9110 §7.6.1), and an Upgrade gets the X-Forwarded-* of any request; an agent
// that does not take an Upgrade answers it, and the connection ends there.

const DOMAIN = 'edge-forwarding.example.com';
const HOST = `app.${DOMAIN}`;

/** A request head from its lines (the blank line added). */
function head(...lines: string[]): string {
  return `${lines.join('\r\n')}\r\n\r\n`;
}

describe('the edge: what crosses it, each way', () => {
  const ctx = useTestService();
  const agents: SshAgent[] = [];
  let local: Server;
  let events: () => any[];
  /** The heads of the Upgrade requests the local server received, by path. */
  const upgrades = new Map<string, IncomingHttpHeaders>();
  /** Bytes that reached the local server on a connection after it refused an Upgrade. */
  let afterRefusal = '';

  /** One exchange on a new connection to the edge: the first answer, and the connection. */
  async function exchange(text: string) {
    const connection = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
    connection.send(text);
    return { answer: await connection.response(0, 10_000), connection };
  }

  beforeAll(async () => {
    expect((await ctx.api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
    events = await trafficEvents(ctx, 'forwarding');
    // Echoes what it received as JSON; /hop-by-hop answers with hop-by-hop fields of its own.
    local = createServer((request, response) => {
      request.resume();
      if (request.url === '/hop-by-hop') {
        response.writeHead(
          200,
          [
            ['Connection', 'X-Internal'],
            ['X-Internal', 'secret'],
            ['Keep-Alive', 'timeout=99'],
            ['Proxy-Connection', 'keep-alive'],
            ['Upgrade', 'h2c'],
            ['Proxy-Authenticate', 'Basic realm="inner"'],
            ['X-Kept', 'yes'],
            ['Content-Length', '3'],
          ].flat(),
        );
        return void response.end('hop');
      }
      const { method, url, headers } = request;
      const text = JSON.stringify({ method, url, headers });
      response.writeHead(200, { 'content-length': Buffer.byteLength(text) }).end(text);
    });
    // An echo protocol after a 101 for /echo; a plain 200 for anything else (not upgraded).
    local.on('upgrade', (request, socket) => {
      upgrades.set(request.url ?? '', request.headers);
      if (request.url === '/echo') {
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n',
        );
        return void socket.pipe(socket);
      }
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\nnot upgraded');
      socket.on('data', (chunk: Buffer) => {
        afterRefusal += chunk.toString('latin1');
      });
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    agents.push(await boundAgent(ctx, HOST, (local.address() as AddressInfo).port));
  });
  afterAll(async () => {
    for (const agent of agents) await agent.kill();
    local?.close();
  });

  it('routes an absolute-form request by its authority, and sends the agent origin-form', async () => {
    const { answer } = await exchange(
      head(`GET http://${HOST}/absolute?q=1 HTTP/1.1`, `Host: nobody.${DOMAIN}`),
    );
    expect(answer.status).toBe(200);
    const seen = JSON.parse(answer.body);
    expect(seen).toMatchObject({ url: '/absolute?q=1', headers: { host: HOST } });
    expect(seen.headers['x-forwarded-host']).toBe(HOST);
    const [event] = await eventsOf(events, '/absolute');
    expect(event.http.request.url).toMatchObject({
      host: HOST,
      query: 'q=1',
      raw: `http://${HOST}/absolute?q=1`,
    });
    expect(event.conn.server_name).toBe(HOST);
    // The authority names a host no agent serves: the Host field does not count.
    const other = await exchange(head(`GET http://nobody.${DOMAIN}/ HTTP/1.1`, `Host: ${HOST}`));
    expect(other.answer.status).toBe(502);
    expect(other.answer.body).toContain(`nobody.${DOMAIN}`);
  });

  it('refuses with 400 an absolute-form target that is not http(s) or carries user info', async () => {
    for (const target of [`ftp://${HOST}/`, `http://someone@${HOST}/`, 'http:///no-host']) {
      const { answer } = await exchange(head(`GET ${target} HTTP/1.1`, `Host: ${HOST}`));
      expect(answer.status, target).toBe(400);
    }
  });

  it('refuses with 400 a request with two Host fields, before any agent sees it', async () => {
    const { answer } = await exchange(
      head('GET /two-hosts HTTP/1.1', `Host: ${HOST}`, `Host: nobody.${DOMAIN}`),
    );
    expect(answer.status).toBe(400);
    expect(answer.body).toContain('Host');
  });

  it('removes hop-by-hop fields from the request, the ones Connection names included', async () => {
    const { answer } = await exchange(
      head(
        'GET /request-fields HTTP/1.1',
        `Host: ${HOST}`,
        'Connection: keep-alive, X-Hop',
        'X-Hop: secret',
        'Keep-Alive: timeout=30',
        'Proxy-Connection: keep-alive',
        'Proxy-Authorization: Basic c2VjcmV0',
        'TE: trailers',
        'Trailer: X-Checksum',
        'X-End-To-End: kept',
      ),
    );
    const { headers } = JSON.parse(answer.body);
    for (const name of [
      'x-hop',
      'keep-alive',
      'proxy-connection',
      'proxy-authorization',
      'te',
      'trailer',
    ]) {
      expect(headers, name).not.toHaveProperty(name);
    }
    // The edge's own hop to the agent has its own Connection field.
    expect(headers.connection).not.toMatch(/x-hop/i);
    expect(headers['x-end-to-end']).toBe('kept');
  });

  it('serves a request that announces trailers, and goes on serving', async () => {
    // Node's http client throws on a Trailer field without a chunked body: passed on, it took
    // the whole service down.
    const { answer } = await exchange(
      head('GET /trailers HTTP/1.1', `Host: ${HOST}`, 'TE: trailers', 'Trailer: X-Checksum'),
    );
    expect(answer.status).toBe(200);
    const again = await exchange(head('GET /after-trailers HTTP/1.1', `Host: ${HOST}`));
    expect(again.answer.status).toBe(200);
  });

  it("removes hop-by-hop fields from the agent's answer", async () => {
    const { answer } = await exchange(head('GET /hop-by-hop HTTP/1.1', `Host: ${HOST}`));
    expect(answer.status).toBe(200);
    expect(answer.headers['x-kept']).toBe('yes');
    for (const name of ['x-internal', 'proxy-connection', 'upgrade', 'proxy-authenticate']) {
      expect(answer.headers, name).not.toHaveProperty(name);
    }
    // The edge's connection to its client has its own keep-alive terms, not the agent's.
    expect(answer.headers['keep-alive']).not.toBe('timeout=99');
    expect(answer.headers.connection).not.toMatch(/x-internal/i);
  });

  it('tunnels a 101 with the same X-Forwarded-* as a plain request', async () => {
    const connection = await openRaw(`http://127.0.0.1:${ctx.service.edgePort}`);
    connection.send(
      head(
        'GET /echo HTTP/1.1',
        `Host: ${HOST}`,
        'Upgrade: echo',
        'Connection: Upgrade, X-Hop',
        'X-Hop: secret',
        'Keep-Alive: timeout=30',
        'X-Forwarded-For: 203.0.113.7',
        'X-Forwarded-Host: spoofed.example',
        'X-Forwarded-Proto: https',
      ),
    );
    await eventually(
      () => (connection.received().includes('\r\n\r\n') ? true : undefined),
      'the 101',
    );
    expect(connection.received()).toMatch(/^HTTP\/1\.1 101 /);
    connection.send('ping');
    await eventually(() => (connection.received().endsWith('ping') ? true : undefined), 'the echo');
    connection.destroy();
    const seen = upgrades.get('/echo')!;
    expect(seen).toMatchObject({
      'x-forwarded-for': '203.0.113.7, 127.0.0.1',
      'x-forwarded-host': HOST,
      'x-forwarded-proto': 'http',
      upgrade: 'echo',
    });
    expect(seen.connection?.toLowerCase()).toBe('upgrade');
    expect(seen).not.toHaveProperty('x-hop');
    expect(seen).not.toHaveProperty('keep-alive');
  });

  it('ends the connection after the answer of an agent that does not take an Upgrade', async () => {
    const { answer, connection } = await exchange(
      head('GET /no-upgrade HTTP/1.1', `Host: ${HOST}`, 'Upgrade: echo', 'Connection: Upgrade'),
    );
    expect(answer).toMatchObject({ status: 200, body: 'not upgraded' });
    expect(answer.headers.connection).toBe('close');
    // Nothing the client sends afterwards reaches the agent: no tunnel was left open.
    connection.send(head('GET /smuggled HTTP/1.1', `Host: ${HOST}`));
    await connection.closed;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(afterRefusal).toBe('');
    const [event] = await eventsOf(events, '/no-upgrade');
    expect(event.http.response.status_code).toBe(200);
    expect(events().filter((e) => e.http.request.url.path === '/smuggled')).toEqual([]);
  });
});
