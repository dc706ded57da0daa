import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';
import { connect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import {
  clientHelloServerName,
  firstRecordSize,
  MAX_RECORD,
} from '../../src/agent-plane/edge/client-hello.ts';

/** The first bytes Node's own TLS client sends for `servername`: a real ClientHello. */
async function realClientHello(servername: string): Promise<Buffer> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const client = connect({ host: '127.0.0.1', port, servername });
  client.on('error', () => {});
  const [socket] = await once(server, 'connection');
  const [hello] = (await once(socket, 'data')) as [Buffer];
  client.destroy();
  socket.destroy();
  server.close();
  return hello;
}

describe('the server name of a ClientHello', () => {
  it("reads Node's ClientHello, and its record's size", async () => {
    const hello = await realClientHello('App.Example.COM');
    expect(firstRecordSize(hello)).toBe(hello.length);
    expect(firstRecordSize(hello.subarray(0, 3))).toBe(MAX_RECORD);
    expect(clientHelloServerName(hello)).toBe('app.example.com');
  });

  it('finds no name, without throwing, in every truncation and corruption of it', async () => {
    const hello = await realClientHello('app.example.com');
    for (let length = 0; length < hello.length; length++) {
      expect(clientHelloServerName(hello.subarray(0, length))).toBeUndefined();
    }
    for (let i = 0; i < hello.length; i++) {
      const corrupt = Buffer.from(hello);
      corrupt[i] ^= 0xff;
      expect(() => clientHelloServerName(corrupt)).not.toThrow();
    }
    expect(firstRecordSize(Buffer.from('GET / HTTP/1.1\r\n'))).toBeUndefined();
    expect(clientHelloServerName(Buffer.from('GET / HTTP/1.1\r\n'))).toBeUndefined();
  });
});
