import { createServer } from 'node:net';

/** True when `port` can be listened on at 127.0.0.1 right now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port free on 127.0.0.1 right now, for servers that are told their port before they
 * start. It is taken below Linux's ephemeral range (32768 and up): a port from there could be
 * taken, between this check and the server's bind, by any listener on port 0 or any outgoing
 * connection of the tests running in parallel (seen: EADDRINUSE in CI).
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(port)) return port;
  }
  throw new Error('freePort: no free port in 20000-31999');
}

/** `count` consecutive TCP ports free on 127.0.0.1 right now (a TCP_ADDR_PORTS range). */
export async function freePortRange(count: number): Promise<number[]> {
  for (let tries = 0; tries < 100; tries++) {
    const first = await freePort();
    const ports = Array.from({ length: count }, (_, i) => first + i);
    const free = await Promise.all(ports.slice(1).map(canListen));
    if (first + count - 1 <= 31_999 && free.every(Boolean)) return ports;
  }
  throw new Error(`freePortRange: no ${count} consecutive free ports in 20000-31999`);
}

/**
 * `start(port)` on a port freePort() picked, again on a fresh one (three tries in all) when it
 * fails because another process bound that port between the pick and the server's bind (a
 * parallel test file, another checkout's suite on this machine). A port the test itself named
 * is not retried: its EADDRINUSE names another port. `pick` is freePort unless a test of this
 * helper gives one.
 */
export async function onFreePort<T>(
  start: (port: number) => Promise<T>,
  pick: () => Promise<number> = freePort,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const port = await pick();
    try {
      return await start(port);
    } catch (error) {
      if (attempt >= 3 || !addressInUse(error, port)) throw error;
    }
  }
}

/** True when `error` says a listen on `port` found it taken (in-process, or a child's output). */
export function addressInUse(error: unknown, port: number): boolean {
  if ((error as { code?: unknown }).code === 'EADDRINUSE') {
    return (error as { port?: unknown }).port === port;
  }
  const text = error instanceof Error ? error.message : String(error);
  // The service process says it in its own words ("cannot listen on …: the address is in use"),
  // sshd its own ("Bind to port P on 127.0.0.1 failed: Address already in use.").
  return (
    /EADDRINUSE|address (is )?already in use|the address is in use/i.test(text) &&
    new RegExp(`(:|port )${port}\\b`).test(text)
  );
}
