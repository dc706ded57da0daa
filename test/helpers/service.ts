import { afterAll, beforeAll } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { mintApiKey } from '../../src/control-plane/api/api-keys/mint.ts';
import { type Service, startService } from '../../src/service.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createAccount } from '../../src/store/accounts.ts';
import { onFreePort } from './free-port.ts';
import { pgliteStore, type TestStore } from './stores.ts';

/** The bootstrap token every test service gets, so tests know their first key. */
export const TEST_BOOTSTRAP_KEY = 'test_bootstrap_key_0123456789abcdef';

/**
 * Starts the real service on a random port against a test store. Its port is picked before the
 * start (PUBLIC_URL names it), so another process may bind it first: then it starts again on
 * another. Other ports a test gives in `env` are the test's; `GRPC_PORT: '0'` binds a random
 * one with no such race (read `service.grpcUrl`).
 */
export async function startTestService(
  store: TestStore,
  env: Record<string, string> = {},
): Promise<Service> {
  return onFreePort((port) => startOnPort(port, store, env));
}

async function startOnPort(
  port: number,
  store: TestStore,
  env: Record<string, string>,
): Promise<Service> {
  const config = loadConfig({
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    LOG_LEVEL: 'silent',
    BOOTSTRAP_API_KEY: TEST_BOOTSTRAP_KEY,
    // Suites drive hundreds of requests a second with one key; the rate limit has its own test.
    RATE_LIMIT_PER_SECOND: '100000',
    RATE_LIMIT_BURST: '100000',
    // Random ports: suites run in parallel, and the defaults (2222, 4443, 8088, 8443) would clash.
    SSH_PORT: '0',
    AGENT_PORT: '0',
    EDGE_HTTP_PORT: '0',
    EDGE_HTTPS_PORT: '0',
    // No certificate runner: it would ask real resolvers and Let's Encrypt; its tests start one.
    CERT_POLL_MS: '0',
    ...store.env,
    ...env,
  });
  return startService(config, createLogger(config.logLevel));
}

/** A response: status, parsed JSON body (or null; an event stream's text), headers. */
export interface ApiResponse {
  status: number;
  body: any;
  headers: Headers;
}

/** A small JSON client bound to a base URL and a bearer token. */
export function apiClient(baseUrl: string, token?: string) {
  return async function call(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiResponse> {
    const init: RequestInit = { method, headers: { ...headers } };
    if (token !== undefined)
      (init.headers as Record<string, string>).authorization = `Bearer ${token}`;
    if (body !== undefined) {
      (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
    }
    const response = await fetch(`${baseUrl}${path}`, init);
    const text = await response.text();
    // An event stream (a tap, read to its end) is its text; anything else is JSON.
    const stream = response.headers.get('content-type')?.startsWith('text/event-stream');
    return {
      status: response.status,
      body: stream ? text : text === '' ? null : JSON.parse(text),
      headers: response.headers,
    };
  };
}

/** The API client type. */
export type ApiClient = ReturnType<typeof apiClient>;

/** The store, service and API client one describe block tests against. */
export interface TestServiceContext {
  readonly store: TestStore;
  readonly service: Service;
  /** A client holding the bootstrap key. */
  readonly api: ApiClient;
  /** Stops the service and starts it again on the same store (a restart). */
  restart(): Promise<void>;
}

/**
 * Starts a store (`open`, PGlite unless given) and the real service on it (with `env`, or what
 * an async `env` gives, e.g. a free port) before the block's tests, and stops both after them. Read the fields inside tests: they are set in beforeAll.
 */
export function useTestService(
  open: () => Promise<TestStore> = pgliteStore,
  env: Record<string, string> | (() => Promise<Record<string, string>>) = {},
): TestServiceContext {
  let settled: Record<string, string> | undefined;
  const start = async () => {
    settled ??= typeof env === 'function' ? await env() : env;
    context.service = await startTestService(context.store, settled);
    context.api = apiClient(context.service.url, TEST_BOOTSTRAP_KEY);
  };
  const context = {
    async restart() {
      await context.service.close();
      await start();
    },
  } as { store: TestStore; service: Service; api: ApiClient; restart(): Promise<void> };
  beforeAll(async () => {
    context.store = await open();
    await start();
  });
  afterAll(async () => {
    await context.service?.close();
    await context.store?.cleanup();
  });
  return context;
}

/** A client of a new, second account (its own API key): what another tenant can do. */
export async function otherAccountClient(service: Service): Promise<ApiClient> {
  const account = await createAccount(service.db);
  const key = await mintApiKey(service.db, { accountId: account }, null, service.url);
  return apiClient(service.url, key.token!);
}

/** The audit events about object `id`, oldest first: their types, objects and envelopes. */
export async function auditEventsOf(service: Service, id: string) {
  const rows = await service.db.query<{ event_type: string; envelope: any }>(
    "SELECT event_type, envelope FROM audit_outbox WHERE envelope->'object'->>'id' = $1 ORDER BY seq",
    [id],
  );
  return rows.rows.map((row) => ({
    type: row.event_type,
    object: row.envelope.object,
    envelope: row.envelope,
  }));
}
