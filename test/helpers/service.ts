import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { type Service, startService } from '../../src/service.ts';
import { freePort } from './free-port.ts';
import type { TestStore } from './stores.ts';

/** The bootstrap token every test service gets, so tests know their first key. */
export const TEST_BOOTSTRAP_KEY = 'test_bootstrap_key_0123456789abcdef';

/** Starts the real service on a random port against a test store. */
export async function startTestService(
  store: TestStore,
  env: Record<string, string> = {},
): Promise<Service> {
  const port = String(await freePort());
  const config = loadConfig({
    PORT: port,
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    LOG_LEVEL: 'silent',
    BOOTSTRAP_API_KEY: TEST_BOOTSTRAP_KEY,
    // Suites drive hundreds of requests a second with one key; the rate limit has its own test.
    RATE_LIMIT_PER_SECOND: '100000',
    RATE_LIMIT_BURST: '100000',
    // No certificate runner: it would ask real resolvers and Let's Encrypt; its tests start one.
    CERT_POLL_MS: '0',
    ...store.env,
    ...env,
  });
  return startService(config, createLogger(config.logLevel));
}

/** A response: status, parsed JSON body (or null), headers. */
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
    return {
      status: response.status,
      body: text === '' ? null : JSON.parse(text),
      headers: response.headers,
    };
  };
}

/** The API client type. */
export type ApiClient = ReturnType<typeof apiClient>;
