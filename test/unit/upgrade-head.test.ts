import { describe, expect, it } from 'vitest';
import { parseResponseHead } from '../../src/edge/upgrade-tunnel.ts';

// The agent's answer head to an Upgrade, as the edge reads it for the WebSocket's event.

describe('parseResponseHead', () => {
  it('reads the status and headers of a 101, names lower-cased, repeats kept', () => {
    const head = [
      'HTTP/1.1 101 Switching Protocols',
      'Upgrade: websocket',
      'Connection: Upgrade',
      'Set-Cookie: a=1',
      'set-cookie: b=2',
      'Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=',
    ].join('\r\n');
    expect(parseResponseHead(head)).toEqual({
      statusCode: 101,
      headers: {
        upgrade: 'websocket',
        connection: 'Upgrade',
        'set-cookie': ['a=1', 'b=2'],
        'sec-websocket-accept': 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=',
      },
    });
  });

  it('reads a refusal, and says 0 for a status line that is not HTTP', () => {
    expect(parseResponseHead('HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0')).toEqual({
      statusCode: 426,
      headers: { 'content-length': '0' },
    });
    expect(parseResponseHead('SSH-2.0-OpenSSH_9.2')).toEqual({ statusCode: 0, headers: {} });
  });
});
