import { describe, expect, it } from 'vitest';
import { encodeNdjson } from '../../src/sinks/file/encode.ts';
import type { EventRecord } from '../../src/sinks/types.ts';

const record = (json: string): EventRecord => ({
  eventId: 'ev_1',
  eventType: 'tcp_connection_closed.v0',
  accountId: 'ac_1',
  partitionKey: 'k',
  json,
});

describe('encodeNdjson', () => {
  const records = ['{"a":1}', '{"é":"€ multi-byte"}', '{"emoji":"😀"}'].map(record);
  const expected = `${records.map((r) => r.json).join('\n')}\n`;
  const exact = records.reduce((n, r) => n + Buffer.byteLength(r.json), 0);

  it('writes each record as one UTF-8 line', () => {
    expect(encodeNdjson({ records, bytes: exact }).toString('utf8')).toBe(expected);
  });

  it('is still right when the batch byte count is wrong either way', () => {
    for (const bytes of [0, exact - 1, exact - 3, exact + 1, exact * 2]) {
      expect(encodeNdjson({ records, bytes }).toString('utf8')).toBe(expected);
    }
  });
});
