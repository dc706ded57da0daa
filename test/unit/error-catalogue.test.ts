import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AppError, ERROR_CODES, errorBody } from '../../src/shared/errors.ts';

const PAGE = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'rest-api.md'), 'utf8');

describe('error catalogue', () => {
  it.each(Object.entries(ERROR_CODES))(
    'documents %s with its status in docs/rest-api.md',
    (code, { status }) => {
      expect(PAGE).toMatch(new RegExp(`\\| \`${code}\` \\| ${status} \\|`));
    },
  );

  it('documents no code the service does not have: the table of docs/rest-api.md is the catalogue', () => {
    const rows = [...PAGE.matchAll(/^\| `(ERR_[A-Z_]+)` \| (\d{3}) \|/gm)];
    expect(rows.length).toBeGreaterThan(0);
    const documented = Object.fromEntries(rows.map(([, code, status]) => [code, Number(status)]));
    const declared = Object.fromEntries(
      Object.entries(ERROR_CODES).map(([code, { status }]) => [code, status]),
    );
    expect(documented).toEqual(declared);
  });

  it('turns unknown errors into ERR_INTERNAL without their message', () => {
    const error = AppError.from(new Error('password=hunter2 at db.ts:12'));
    expect(errorBody(error, 'op_x')).toEqual({
      error_code: 'ERR_INTERNAL',
      status_code: 500,
      msg: 'internal error',
      details: { operation_id: 'op_x' },
    });
  });
});
