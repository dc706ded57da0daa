import { expect } from 'vitest';
import type { RawResponse } from './raw-http.ts';
import type { ApiResponse } from './service.ts';

/** Asserts the DESIGN.md §4 error body: code, status, a message, an op_ operation id. */
export function expectError(
  response: ApiResponse,
  status: number,
  code: string,
  msgPart?: string,
): void {
  expect({ status: response.status, code: response.body?.error_code }).toEqual({ status, code });
  expect(response.body.status_code).toBe(status);
  expect(typeof response.body.msg).toBe('string');
  expect(response.body.details.operation_id).toMatch(/^op_[0-9a-z]{26}$/);
  if (msgPart !== undefined) expect(response.body.msg).toContain(msgPart);
  expect(JSON.stringify(response.body)).not.toMatch(/at .*\.ts:\d+/);
}

/** expectError on a response read off a raw socket (test/helpers/raw-http.ts), plus its type. */
export function expectRawError(response: RawResponse, status: number, code: string): void {
  expectError(
    { status: response.status, body: JSON.parse(response.body), headers: new Headers() },
    status,
    code,
  );
  expect(response.headers['content-type']).toMatch(/^application\/json/);
}
