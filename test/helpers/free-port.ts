import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now, for servers that cannot bind port 0 themselves. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() =>
        port > 0 ? resolve(port) : reject(new Error('freePort: no port assigned')),
      );
    });
  });
}
