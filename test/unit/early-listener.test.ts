import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MAX_HELD, openEarlyListener } from '../../src/shared/net/early-listener.ts';

// The agents' ports bound at the process's start (src/main.ts): real sockets, a server that
// echoes what it reads, and clients that connect before it is there.

/** A client that has sent `text` and resolves with what comes back once the server ends it. */
function client(port: number, text: string): { socket: Socket; answer: Promise<string> } {
  const socket = connect(port, '127.0.0.1', () => socket.end(text));
  const answer = new Promise<string>((resolve, reject) => {
    let received = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      received += chunk;
    });
    socket.on('error', reject).on('close', () => resolve(received));
  });
  return { socket, answer };
}

const echo = createServer((socket) => socket.pipe(socket));

describe('an early listener', () => {
  it('holds connections until served, then hands them over unread', async () => {
    const early = await openEarlyListener('127.0.0.1', 0);
    const before = client(early.port, 'held');
    await once(before.socket, 'connect');
    early.serve((socket) => echo.emit('connection', socket));
    const after = client(early.port, 'served');
    expect(await before.answer).toBe('held');
    expect(await after.answer).toBe('served');
    early.close();
  });

  it(`holds at most ${MAX_HELD} connections, closes the others at once`, async () => {
    const early = await openEarlyListener('127.0.0.1', 0);
    const clients = Array.from({ length: MAX_HELD + 1 }, () => client(early.port, 'x'));
    const answers = clients.map((c) => c.answer.catch(() => ''));
    // Before anything is served, the one over the bound is closed unanswered.
    expect(await Promise.race(answers)).toBe('');
    early.serve((socket) => echo.emit('connection', socket));
    const all = await Promise.all(answers);
    expect(all.filter((answer) => answer === 'x')).toHaveLength(MAX_HELD);
    early.close();
  });

  it('closes what it holds and frees the port when closed', async () => {
    const early = await openEarlyListener('127.0.0.1', 0);
    const held = client(early.port, 'held');
    await once(held.socket, 'connect');
    early.close();
    expect(await held.answer.catch(() => '')).toBe('');
    const again = await openEarlyListener('127.0.0.1', early.port);
    again.close();
  });

  it('refuses a port in use as listen does', async () => {
    const early = await openEarlyListener('127.0.0.1', 0);
    await expect(openEarlyListener('127.0.0.1', early.port)).rejects.toMatchObject({
      code: 'EADDRINUSE',
      syscall: 'listen',
      port: early.port,
    });
    early.close();
  });
});
