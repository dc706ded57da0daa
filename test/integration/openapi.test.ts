import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/service.ts';
import { startTestService } from '../helpers/service.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

describe('the OpenAPI document at GET /openapi.json', () => {
  let store: TestStore;
  let service: Service;
  let document: any;

  beforeAll(async () => {
    store = await pgliteStore();
    service = await startTestService(store);
    const response = await fetch(`${service.url}/openapi.json`);
    expect(response.status).toBe(200);
    document = await response.json();
  });
  afterAll(async () => {
    await service?.close();
    await store?.cleanup();
  });

  it('is served without an API key and validates as OpenAPI 3.1', async () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.servers).toEqual([{ url: service.url }]);
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('has exactly the routes the app serves, path and method', () => {
    const served = service.routes
      .map((route) => `${route.method} ${route.url.replace(/:(\w+)/g, '{$1}')}`)
      .sort();
    const documented = Object.entries(document.paths as Record<string, object>)
      .flatMap(([path, item]) =>
        Object.keys(item)
          .filter((key) => METHODS.includes(key))
          .map((method) => `${method.toUpperCase()} ${path}`),
      )
      .sort();
    expect(served.length).toBeGreaterThan(0);
    expect(documented).toEqual(served);
  });

  it('gives every operation an id, the error body as its default answer, and resolvable refs', () => {
    const ids = new Set<string>();
    const text = JSON.stringify(document);
    for (const item of Object.values(document.paths as Record<string, Record<string, any>>)) {
      for (const operation of Object.values(item)) {
        expect(ids.has(operation.operationId)).toBe(false);
        ids.add(operation.operationId);
        expect(operation.responses.default).toEqual({ $ref: '#/components/responses/Error' });
      }
    }
    for (const [, name] of text.matchAll(/"#\/components\/schemas\/(\w+)"/g)) {
      expect(document.components.schemas).toHaveProperty(name);
    }
    expect(document.components.schemas.Error.properties.error_code.enum).toContain(
      'ERR_UNSUPPORTED_TARGET',
    );
  });
});
