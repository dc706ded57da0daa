import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import type { TestServiceContext } from '../helpers/service.ts';
import { eventually, fileEvents, type SshAgent, startSshAgent } from './agents-helpers.ts';

// What the edge's end-to-end tests share: an agent bound to a hostname, the account's traffic
// events, and an agent-side HTTP server written on bare TCP, for answers Node's http would not
// give (a status 000, a connection dropped on its second request, an answer after a delay).

/** Starts `ssh -R <hostname>:80:…:<localPort>` with a new authtoken; resolves once it serves. */
export async function boundAgent(
  ctx: TestServiceContext,
  hostname: string,
  localPort: number,
): Promise<SshAgent> {
  const { token } = (await ctx.api('POST', '/credentials', {})).body;
  const agent = startSshAgent(ctx.service, { user: token, hostname, localPort });
  await eventually(async () => {
    if (agent.child.exitCode !== null) throw new Error(`ssh exited: ${agent.output()}`);
    const list = (await ctx.api('GET', '/tunnel_sessions')).body.tunnel_sessions;
    return list.find((s: { metadata: string }) => s.metadata === hostname);
  }, `a session for ${hostname}`);
  return agent;
}

/** The account's live sessions, by hostname: the id each has now. */
export async function sessionIds(ctx: TestServiceContext): Promise<Record<string, string>> {
  const list = (await ctx.api('GET', '/tunnel_sessions')).body.tunnel_sessions;
  return Object.fromEntries(list.map((s: { metadata: string; id: string }) => [s.metadata, s.id]));
}

/**
 * Subscribes a file destination to every http_request_complete.v0 of the account; returns a
 * reader of its events' objects.
 */
export async function trafficEvents(ctx: TestServiceContext, path: string) {
  const accountId = (await ctx.api('GET', '/account')).body.id;
  const destination = await ctx.api('POST', '/event_destinations', { target: { file: { path } } });
  await ctx.api('POST', '/event_subscriptions', {
    sources: [{ type: 'http_request_complete.v0' }],
    destination_ids: [destination.body.id],
  });
  await ctx.service.pipeline.reload();
  const dir = join(accountEventsDir(ctx.store.env.DATA_DIR, accountId), path);
  return () => fileEvents(dir).map((event) => event.object);
}

/** The events of requests to `path`, once there are `count` of them. */
export function eventsOf(read: () => any[], path: string, count = 1): Promise<any[]> {
  return eventually(() => {
    const found = read().filter((event) => event.http.request.url.path === path);
    return found.length >= count ? found : undefined;
  }, `${count} event(s) for ${path}`);
}

/** A request as the bare server read it (Content-Length bodies only). */
export interface RawRequest {
  method: string;
  path: string;
  /** Names lower-cased. */
  headers: Record<string, string>;
  body: string;
}

/** One connection to the bare server: its number (from 1) and how many requests it carried. */
export interface RawConnection {
  id: number;
  requests: number;
  socket: Socket;
}

/** An agent-side server on bare TCP: `answer` writes whatever it likes to the connection. */
export interface RawUpstream {
  server: Server;
  port: number;
  /** Every request received, in order, with the connection it came on. */
  received: { connection: number; request: RawRequest }[];
  connections: RawConnection[];
  close(): void;
}

export async function startRawUpstream(
  answer: (request: RawRequest, connection: RawConnection) => void,
): Promise<RawUpstream> {
  const upstream = { received: [], connections: [] } as unknown as RawUpstream;
  const server = createServer((socket) => {
    const connection: RawConnection = { id: upstream.connections.length + 1, requests: 0, socket };
    upstream.connections.push(connection);
    socket.on('error', () => {});
    let pending = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      pending += chunk;
      for (;;) {
        const request = takeRequest(pending);
        if (request === undefined) return;
        pending = pending.slice(request.size);
        connection.requests += 1;
        upstream.received.push({ connection: connection.id, request: request.request });
        answer(request.request, connection);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.server = server;
  upstream.port = (server.address() as { port: number }).port;
  upstream.close = () => {
    for (const { socket } of upstream.connections) socket.destroy();
    server.close();
  };
  return upstream;
}

/** The first whole request in `text`, and how many characters it took. */
function takeRequest(text: string): { request: RawRequest; size: number } | undefined {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [line, ...fields] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const field of fields) {
    const colon = field.indexOf(':');
    headers[field.slice(0, colon).trim().toLowerCase()] = field.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  if (text.length < end + 4 + length) return undefined;
  const [method, path] = line.split(' ');
  const body = text.slice(end + 4, end + 4 + length);
  return { request: { method, path, headers, body }, size: end + 4 + length };
}

/** A complete HTTP/1.1 answer with a Content-Length body. */
export function rawAnswer(status: string, body: string, headers: string[] = []): string {
  const head = [`HTTP/1.1 ${status}`, `content-length: ${Buffer.byteLength(body)}`, ...headers];
  return `${head.join('\r\n')}\r\n\r\n${body}`;
}
