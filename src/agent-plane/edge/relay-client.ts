import {
  Agent,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { type Duplex, pipeline, type Readable } from 'node:stream';
import type { Caller } from '../../shared/caller.ts';
import { AppError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { internalEndpointsElsewhere, sessionOfEndpoint } from '../../store/agent-sessions.ts';
import type { Db } from '../../store/db.ts';
import { endpointNameOf } from '../sessions/internal-endpoints.ts';
import type { Peer } from './peer.ts';
import { endToEndFields, endToEndHeaders, responseHead } from './proxy-headers.ts';
import { RELAY_HEADER, type RelayAuth } from './relay-auth.ts';
import { relayPassthrough } from './relay-passthrough.ts';

// The relaying side: a request for a hostname whose session lives on another instance goes to
// that instance's INTERNAL_URL with the client's connection facts in the signed relay header,
// and the answer streams back. The owner serves it as its own (IP restrictions, 504, events):
// the traffic event is the owner's, so it is emitted once. An owner that cannot be reached
// makes a 502 here, without an event (as for a hostname no session serves). The relay is a hop
// like any other: hop-by-hop fields stop here both ways (proxy-headers.ts).

/** Hands a request for a hostname this instance does not serve to the instance that does. */
export interface EdgeRelay {
  /**
   * Relays the request (and answers it); false when no instance serves `host` (a Host, or an
   * internal endpoint's registry key for forward-internal). `body`: the request's body when a
   * policy already read it from `request`.
   */
  request(
    host: string,
    request: IncomingMessage,
    response: ServerResponse,
    peer: Peer,
    body?: Readable,
  ): Promise<boolean>;
  /** The account's internal endpoints other instances serve (forward-internal's targets). */
  internalElsewhere(accountId: string): Promise<ReadonlySet<string>>;
  /** Relays an Upgrade request; false when no instance serves `host`. */
  upgrade(
    host: string,
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    peer: Peer,
  ): Promise<boolean>;
  /**
   * Carries a TLS connection (its ClientHello unshifted) to the instance whose TLS endpoint is
   * `serverName`; false when no other instance has one of that name.
   */
  passthrough(serverName: string, socket: Socket): Promise<boolean>;
}

/**
 * Facts a relayed edge request carries; the request line, Host and declared body length too, so
 * a header fits one request (`length`: its Content-Length, null for a chunked or empty body).
 */
export interface RelayedRequest {
  kind: 'edge';
  peer: Peer;
  method: string;
  target: string;
  host: string;
  length: string | null;
}

/** Facts a relayed stop request carries. */
export interface RelayedStop {
  kind: 'stop';
  session: string;
  principal: Caller;
}

/** An instance as the store names it: its random id and its INTERNAL_URL. */
export interface Owner {
  id: string;
  url: string;
}

/** The path the owner's relay listener takes stop requests on. */
export const STOP_PATH = '/relay/stop';

/** What relaying needs. */
export interface RelayClientDeps {
  db: Db;
  auth: RelayAuth;
  logger: Logger;
  /** This instance's id in the store: its own rows are never relayed to. */
  ownerId: string;
}

/** The request options for `path` at an instance's INTERNAL_URL. */
export function target(ownerUrl: string, path: string) {
  const url = new URL(ownerUrl);
  return { hostname: url.hostname, port: url.port || 80, path };
}

/** A plain-text 502 when the owner cannot be reached. */
function unreachable(response: ServerResponse, host: string): void {
  if (response.headersSent) return void response.destroy();
  response.writeHead(502, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
  response.end(
    `The agent for ${host} is connected to another instance, which cannot be reached.\n`,
  );
}

/** Joins two byte streams both ways; either end closing closes both. */
function splice(a: Duplex, b: Duplex): void {
  a.pipe(b).pipe(a);
  const end = () => {
    a.destroy();
    b.destroy();
  };
  for (const stream of [a, b]) {
    stream.once('close', end);
    stream.on('error', end);
  }
}

/** The edge's relay to other instances, over keep-alive connections. */
export function createRelayClient(deps: RelayClientDeps): EdgeRelay {
  const agent = new Agent({ keepAlive: true });

  /**
   * The instance serving `host` (its store id and INTERNAL_URL) and what it serves there
   * (`proto`); undefined when none other.
   */
  async function ownerOf(host: string): Promise<(Owner & { proto: string }) | undefined> {
    const row = await sessionOfEndpoint(deps.db, host);
    if (row === undefined || row.owner_id === deps.ownerId) return undefined;
    return { id: row.owner_id, url: row.owner_url, proto: row.proto };
  }

  const headers = (
    request: IncomingMessage,
    peer: Peer,
    owner: Owner,
    upgrade = false,
  ): OutgoingHttpHeaders => ({
    ...endToEndHeaders(request.headers, upgrade),
    [RELAY_HEADER]: deps.auth.sign(owner.id, {
      kind: 'edge',
      peer,
      method: request.method ?? '',
      target: request.url ?? '',
      host: request.headers.host ?? '',
      length: request.headers['content-length'] ?? null,
    } satisfies RelayedRequest),
  });

  return {
    // An embedded store is one instance's (store-lock.ts): no other holds an endpoint.
    internalElsewhere: async (accountId) =>
      deps.db.kind === 'pglite'
        ? new Set<string>()
        : internalEndpointsElsewhere(deps.db, accountId, deps.ownerId),

    async request(host, request, response, peer, body) {
      const owner = await ownerOf(host);
      if (owner === undefined) return false;
      const ownerUrl = owner.url;
      if (ownerUrl === '') {
        request.resume();
        unreachable(response, endpointNameOf(host));
        return true;
      }
      const upstream = httpRequest({
        ...target(ownerUrl, request.url ?? '/'),
        agent,
        method: request.method,
        headers: headers(request, peer, owner),
      });
      upstream.on('response', (answer) => {
        response.writeHead(answer.statusCode ?? 502, endToEndFields(answer.rawHeaders));
        pipeline(answer, response, () => {});
      });
      upstream.on('error', (error) => {
        deps.logger.warn({ err: error, host, ownerUrl }, 'edge: relay to the owner failed');
        unreachable(response, endpointNameOf(host));
      });
      // A client that leaves ends the relayed request too (the owner then sees it go).
      response.once('close', () => {
        if (!response.writableFinished) upstream.destroy();
      });
      (body ?? request).pipe(upstream);
      return true;
    },

    async upgrade(host, request, socket, head, peer) {
      const owner = await ownerOf(host);
      if (owner === undefined || owner.url === '') return false;
      const upstream = httpRequest({
        ...target(owner.url, request.url ?? '/'),
        method: request.method,
        headers: headers(request, peer, owner, true),
      });
      upstream.on('upgrade', (answer, ownerSocket, ownerHead) => {
        socket.write(responseHead(answer, endToEndFields(answer.rawHeaders, true)));
        if (ownerHead.length > 0) socket.write(ownerHead);
        if (head.length > 0) ownerSocket.write(head);
        splice(socket, ownerSocket);
      });
      // The agent (or the owner) refused the upgrade: its answer goes back, and the connection
      // ends after it (the owner's does).
      upstream.on('response', (answer) => {
        const fields = endToEndFields(answer.rawHeaders).concat('Connection', 'close');
        socket.write(responseHead(answer, fields));
        pipeline(answer, socket, () => {});
      });
      upstream.on('error', () => socket.destroy());
      socket.once('close', () => upstream.destroy());
      upstream.end();
      return true;
    },

    async passthrough(serverName, socket) {
      const owner = await ownerOf(serverName);
      if (owner?.proto !== 'tls' || owner.url === '') return false;
      relayPassthrough(deps.auth, owner, serverName, socket);
      return true;
    },
  };
}

/** Asks the instance `owner` to stop its session `id`; false when it has none such. */
export async function relayStop(
  auth: RelayAuth,
  owner: Owner,
  id: string,
  principal: Caller,
): Promise<boolean> {
  const facts: RelayedStop = { kind: 'stop', session: id, principal };
  const status = await new Promise<number>((resolve, reject) => {
    const upstream = httpRequest({
      ...target(owner.url, STOP_PATH),
      method: 'POST',
      headers: { [RELAY_HEADER]: auth.sign(owner.id, facts) },
    });
    upstream.on('response', (answer) => {
      answer.resume();
      resolve(answer.statusCode ?? 0);
    });
    upstream.on('error', reject);
    upstream.end();
  }).catch((error: unknown) => {
    throw new AppError(
      'ERR_UNAVAILABLE',
      `the instance serving session ${id} cannot be reached`,
      {
        id,
      },
      { cause: error },
    );
  });
  if (status === 204) return true;
  if (status === 404) return false;
  throw new AppError('ERR_UNAVAILABLE', `the instance serving session ${id} answered ${status}`, {
    id,
  });
}
