import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { writeInTurns } from '../../src/shared/net/turn-writes.ts';

// An agent connection's writes of one event-loop turn leave together (src/shared/net/
// turn-writes.ts), over real loopback sockets: held (corked) until the turn's I/O is handled,
// then sent in order; nothing waits past its own turn, and end() sends what is held.

let server: Server | undefined;
afterEach(() => server?.close());

/** A connected client socket and everything the server side reads from it, once it closes. */
async function pair(): Promise<{ socket: Socket; received: Promise<string> }> {
  let resolveReceived: (text: string) => void = () => {};
  const received = new Promise<string>((resolve) => {
    resolveReceived = resolve;
  });
  server = createServer((peer) => {
    let text = '';
    peer.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
    });
    peer.on('end', () => resolveReceived(text));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  await once(socket, 'connect');
  return { socket, received };
}

describe('writes in turns', () => {
  it('holds the writes of one turn and sends them, in order, once the turn is over', async () => {
    const { socket, received } = await pair();
    writeInTurns(socket);
    socket.write('one,');
    socket.write('two,');
    socket.write('three;');
    expect(socket.writableCorked).toBe(1);
    expect(socket.writableLength).toBe('one,two,three;'.length);
    await nextTurn();
    expect(socket.writableCorked).toBe(0);
    expect(socket.writableLength).toBe(0);
    socket.write('next turn');
    expect(socket.writableCorked).toBe(1);
    socket.end();
    expect(await received).toBe('one,two,three;next turn');
  });

  it('calls each write back once its bytes went out', async () => {
    const { socket, received } = await pair();
    writeInTurns(socket);
    const written: string[] = [];
    socket.write('a', () => written.push('a'));
    socket.write('b', () => written.push('b'));
    expect(written).toEqual([]);
    await nextTurn();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(written).toEqual(['a', 'b']);
    socket.end();
    expect(await received).toBe('ab');
  });

  it('sends what is held when the socket ends in the same turn', async () => {
    const { socket, received } = await pair();
    writeInTurns(socket);
    socket.write('last words');
    socket.end();
    expect(await received).toBe('last words');
  });
});
