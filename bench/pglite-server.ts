import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';

// The start-up benchmark's baseline: PGlite alone opening DATA_DIR/store (initdb on an empty
// dir, as the service's first start does), one query, then a bare HTTP server listening. The
// service cannot listen before its embedded store is open, so this is its floor.

const dir = join(process.env.DATA_DIR ?? '', 'store');
mkdirSync(dir, { recursive: true });
const db = new PGlite(dir);
await db.query('SELECT 1');
const server = createServer((_request, response) => response.end('ok'));
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () =>
  process.stdout.write(`pglite listening on port ${process.env.PORT}\n`),
);
process.on('SIGTERM', () => server.close(() => db.close().then(() => process.exit(0))));
