import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addressInUse, freePort, onFreePort } from '../helpers/free-port.ts';
import { startTestService } from '../helpers/service.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import { pgliteStore } from '../helpers/stores.ts';

// freePort() checks a port is free, then the server binds it: in between another process (a
// parallel test file, another suite on the machine) may take it. The start helpers then start
// again on a fresh port, rather than fail a whole file's beforeAll with EADDRINUSE.

const squatters: Server[] = [];

/** A port some other listener holds, as a racing process would after freePort() checked it. */
async function takenPort(): Promise<number> {
  const port = await freePort();
  const squatter = createServer();
  await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
  squatters.push(squatter);
  return port;
}

/** freePort, except that its first answer is a port another listener already holds. */
function racedPick(): () => Promise<number> {
  let picks = 0;
  return async () => (picks++ === 0 ? takenPort() : freePort());
}

afterEach(async () => {
  for (const squatter of squatters.splice(0)) squatter.close();
});

describe('a start that loses its picked port to another process', () => {
  it('tells a taken picked port from another error or another port', async () => {
    const port = await takenPort();
    const error = await new Promise<Error>((resolve) => {
      const server = createServer();
      server.once('error', resolve);
      server.listen(port, '127.0.0.1');
    });
    expect(addressInUse(error, port)).toBe(true);
    expect(addressInUse(error, port + 1)).toBe(false);
    expect(addressInUse(new Error('listen EACCES: permission denied 127.0.0.1:80'), 80)).toBe(
      false,
    );
    // A child process's start failure carries its output.
    const child = `service exited during start (1)\nError: listen EADDRINUSE: address already in use 127.0.0.1:${port}\n`;
    expect(addressInUse(new Error(child), port)).toBe(true);
    expect(addressInUse(new Error(child), Number(String(port).slice(0, 4)))).toBe(false);
    const own = `cannot listen on 127.0.0.1:${port}: the address is in use; see HOST, PORT`;
    expect(addressInUse(new Error(own), port)).toBe(true);
    const sshd = `sshd exited during start:\nerror: Bind to port ${port} on 127.0.0.1 failed: Address already in use.\nfatal: Cannot bind any address.\n`;
    expect(addressInUse(new Error(sshd), port)).toBe(true);
    expect(addressInUse(new Error(sshd), port + 1)).toBe(false);
  });

  it('starts the in-process service again on a fresh port', async () => {
    const store = await pgliteStore();
    const tried: number[] = [];
    const service = await onFreePort((port) => {
      tried.push(port);
      // PORT given: the helper starts on this pick, as it does on its own freePort() pick.
      return startTestService(store, {
        PORT: String(port),
        PUBLIC_URL: `http://127.0.0.1:${port}`,
      });
    }, racedPick());
    try {
      expect(tried).toHaveLength(2);
      expect(service.url).toBe(`http://127.0.0.1:${tried[1]}`);
      expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
    } finally {
      await service.close();
      await store.cleanup();
    }
  });

  it('gives up on a port the test named', async () => {
    const store = await pgliteStore();
    const port = await takenPort();
    try {
      await expect(startTestService(store, { GRPC_PORT: String(port) })).rejects.toThrow(
        `EADDRINUSE: address already in use 127.0.0.1:${port}`,
      );
    } finally {
      await store.cleanup();
    }
  });

  it('starts a service process again on a fresh port, as a first start (its account line)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'agin-free-port-'));
    const tried: number[] = [];
    let service: ServiceProcess | undefined;
    try {
      service = await onFreePort((port) => {
        tried.push(port);
        return startServiceProcess({ dataDir, port });
      }, racedPick());
      expect(tried).toHaveLength(2);
      expect(service.port).toBe(tried[1]);
      expect(service.accountId).toMatch(/^ac_/);
    } finally {
      if (service?.running()) await service.stop('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
