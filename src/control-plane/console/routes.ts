import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

// The operator's console at /console: static files only, read once at start and served by the
// service (no CDN, works offline). Preact and htm come from the npm package `htm`, whose
// standalone build bundles both (no build step here). The page signs in with an API key it
// keeps in sessionStorage and calls the REST API itself, so these routes need no key.

const ASSETS = join(import.meta.dirname, 'assets');
// The ES module build (the `import` condition of the package's exports).
const PREACT_HTM = fileURLToPath(import.meta.resolve('htm/preact/standalone'));

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/** Every file the console serves, by URL. */
function files(): Map<string, { body: Buffer; type: string }> {
  const of = (path: string) => ({
    body: readFileSync(path),
    type: TYPES[path.slice(path.lastIndexOf('.')) as keyof typeof TYPES],
  });
  const served = new Map([
    ['/console', of(join(ASSETS, 'index.html'))],
    ['/console/vendor/preact-htm.js', of(PREACT_HTM)],
  ]);
  // Every script and style of the assets directory, by its name.
  for (const name of readdirSync(ASSETS)) {
    if (name !== 'index.html') served.set(`/console/${name}`, of(join(ASSETS, name)));
  }
  return served;
}

// Scripts and styles from this origin only, no inline code, no framing: an injected string
// cannot run, and the key in sessionStorage stays with the page that owns it.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  for (const [url, { body, type }] of files()) {
    app.get(url, async (_request, reply) =>
      reply
        .header('content-type', type)
        .header('content-security-policy', CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .send(body),
    );
  }
  app.get('/console/', async (_request, reply) => reply.redirect('/console'));
}
