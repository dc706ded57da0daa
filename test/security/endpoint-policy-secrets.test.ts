import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { accountEventsDir } from '../../src/data-plane/sinks/file/layout.ts';
import { type Service, startService } from '../../src/service.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { curl, eventually, fileEvents } from '../e2e/agents-helpers.ts';
import { freePort } from '../helpers/free-port.ts';
import { type ApiClient, apiClient, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { STORES, type TestStore } from '../helpers/stores.ts';

// An endpoint's policy holds secrets (a basic-auth password, an OIDC client_secret, a webhook
// secret): the owner reads the policy back and the edge enforces it, yet no secret is in the
// store's tables or files, the service's log (at trace), or the audit events a file destination
// received. A policy stored in clear by an earlier version is sealed at the next start.

const unique = (label: string) => `${label}-${randomBytes(9).toString('base64url')}`;
const DOMAIN = 'sealed-policy.example.com';
const HOST = `app.${DOMAIN}`;
const OLD_HOST = `old.${DOMAIN}`;

const PASSWORD = unique('basic-pw');
const PASSWORD_2 = unique('basic-pw2');
const CLIENT_SECRET = unique('oidc-secret');
const WEBHOOK_SECRET = unique('hook-secret');
const REFUSED_PASSWORD = unique('nocolon-pw');
const OLD_PASSWORD = unique('old-pw');

/** A policy whose secrets are `password`'s basic-auth, an OIDC login and a webhook check. */
const policy = (password: string) => `# the staging gate
on_http_request:
  - actions:
      - type: basic-auth
        config:
          credentials: ["ada:${password}"]
  - expressions: ["req.url.path == '/login'"]
    actions:
      - type: openid-connect
        config:
          issuer_url: https://accounts.example.com
          client_id: staging
          client_secret: ${CLIENT_SECRET}
  - expressions: ["req.url.path == '/hook'"]
    actions:
      - type: verify-webhook
        config: {provider: github, secret: "${WEBHOOK_SECRET}"}
  - actions:
      - type: custom-response
        config: {status_code: 200, body: behind the gate}
`;

const basic = (password: string) =>
  `Authorization: Basic ${Buffer.from(`ada:${password}`).toString('base64')}`;

/** Every file under `dir`. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe.each(STORES)(
  "an endpoint's policy secrets on $kind: sealed, redacted, never logged",
  ({ open }) => {
    const secrets = [PASSWORD, PASSWORD_2, CLIENT_SECRET, WEBHOOK_SECRET, REFUSED_PASSWORD];
    const logLines: string[] = [];
    let store: TestStore;
    let service: Service;
    let api: ApiClient;
    let auditDir: string;
    let endpointId: string;

    async function start(): Promise<void> {
      const port = String(await freePort());
      const config = loadConfig({
        PORT: port,
        PUBLIC_URL: `http://127.0.0.1:${port}`,
        LOG_LEVEL: 'trace',
        BOOTSTRAP_API_KEY: TEST_BOOTSTRAP_KEY,
        BATCH_LINGER_MS: '5',
        SSH_PORT: '0',
        AGENT_PORT: '0',
        EDGE_HTTP_PORT: '0',
        EDGE_HTTPS_PORT: '0',
        CERT_POLL_MS: '0',
        ...store.env,
      });
      const capture = new Writable({
        write(chunk, _encoding, done) {
          logLines.push(...String(chunk).split('\n').filter(Boolean));
          done();
        },
      });
      service = await startService(config, createLogger(config.logLevel, capture));
      api = apiClient(service.url, TEST_BOOTSTRAP_KEY);
    }

    /** Every row of every table of the store, as JSON text. */
    async function dump(): Promise<string> {
      const tables = await service.db.query<{ name: string }>(
        "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
      );
      expect(tables.rows.map((t) => t.name)).toContain('account_objects');
      const rows = [];
      for (const { name } of tables.rows) {
        rows.push((await service.db.query(`SELECT * FROM "${name}"`)).rows);
      }
      return JSON.stringify(rows);
    }

    beforeAll(async () => {
      store = await open();
      await start();
      expect((await api('POST', '/agent_ingresses', { domain: DOMAIN })).status).toBe(201);
      const accountId = (await api('GET', '/account')).body.id;
      const destination = await api('POST', '/event_destinations', {
        target: { file: { path: 'audit' } },
      });
      const types = ['endpoint_created.v0', 'endpoint_updated.v0', 'endpoint_deleted.v0'];
      const subscribed = await api('POST', '/event_subscriptions', {
        sources: types.map((type) => ({ type })),
        destination_ids: [destination.body.id],
      });
      expect(subscribed.status).toBe(201);
      await service.pipeline.reload();
      auditDir = join(accountEventsDir(store.env.DATA_DIR, accountId), 'audit');
    }, 60_000);
    afterAll(async () => {
      await service?.close();
      await store?.cleanup();
    });

    it('answers the policy to its owner as written, and the edge enforces its basic-auth', async () => {
      const created = await api('POST', '/endpoints', {
        type: 'cloud',
        url: `http://${HOST}`,
        traffic_policy: policy(PASSWORD),
      });
      expect(created.status).toBe(201);
      expect(created.body.traffic_policy).toBe(policy(PASSWORD));
      endpointId = created.body.id;
      expect((await api('GET', `/endpoints/${endpointId}`)).body.traffic_policy).toBe(
        policy(PASSWORD),
      );
      const listed = (await api('GET', '/endpoints')).body.endpoints;
      expect(listed.find((e: { id: string }) => e.id === endpointId).traffic_policy).toBe(
        policy(PASSWORD),
      );

      const edge = service.edgePort!;
      expect((await curl(edge, HOST, '/')).status).toBe(401);
      expect((await curl(edge, HOST, '/', ['-H', basic('wrong-password')])).status).toBe(401);
      const through = await curl(edge, HOST, '/', ['-H', basic(PASSWORD)]);
      expect(through).toMatchObject({ status: 200, body: 'behind the gate' });

      const updated = await api('PATCH', `/endpoints/${endpointId}`, {
        traffic_policy: policy(PASSWORD_2),
      });
      expect(updated.body.traffic_policy).toBe(policy(PASSWORD_2));
      expect((await curl(edge, HOST, '/', ['-H', basic(PASSWORD)])).status).toBe(401);
      expect((await curl(edge, HOST, '/', ['-H', basic(PASSWORD_2)])).status).toBe(200);
    });

    it('refuses a credential without a colon with a 400 that does not echo it', async () => {
      const bad = policy(PASSWORD).replace(`ada:${PASSWORD}`, REFUSED_PASSWORD);
      for (const [path, body] of [
        ['/endpoints', { type: 'cloud', url: `http://bad.${DOMAIN}`, traffic_policy: bad }],
        ['/endpoints/validate_policy', { traffic_policy: bad }],
      ] as const) {
        const refused = await api('POST', path, body);
        expect(refused.status).toBe(400);
        expect(refused.body.msg).toMatch(/credentials\[0\].*a credential is username:password/);
        expect(JSON.stringify(refused.body)).not.toContain(REFUSED_PASSWORD);
      }
    });

    it('seals the policy in the store, redacts it in audit events, and logs no secret', async () => {
      expect((await api('DELETE', `/endpoints/${endpointId}`)).status).toBe(204);
      const audits = await eventually(() => {
        const found = fileEvents(auditDir);
        return found.length >= 3 ? found : undefined;
      }, 'three endpoint audit events');
      expect(audits.map((e) => e.event_type)).toEqual([
        'endpoint_created.v0',
        'endpoint_updated.v0',
        'endpoint_deleted.v0',
      ]);
      // The policy as written, each secret value redacted (the username kept), comments kept.
      const redacted = audits.map((e) => e.object.traffic_policy);
      expect(redacted[0]).toBe(
        policy('[redacted]')
          .replace(CLIENT_SECRET, '"[redacted]"')
          .replace(`"${WEBHOOK_SECRET}"`, '"[redacted]"'),
      );
      expect(redacted[1]).toBe(redacted[0]);

      const row = await service.db.query<{ secret: string }>(
        'SELECT secret FROM account_objects WHERE id = $1',
        [endpointId],
      );
      expect(row.rows).toEqual([]); // deleted: its last version was sealed too (files below)
      const stored = await dump();
      const logText = logLines.join('\n');
      // The refused credential's 400 was logged, without the credential (checked below).
      expect(logText).toContain('a credential is username:password');
      const files = filesUnder(store.env.DATA_DIR).map((path) => ({
        path,
        text: readFileSync(path).toString('latin1'),
      }));
      const leaks: string[] = [];
      for (const secret of secrets) {
        if (stored.includes(secret)) leaks.push(`store: ${secret}`);
        if (logText.includes(secret)) leaks.push(`log: ${secret}`);
        if (JSON.stringify(audits).includes(secret)) leaks.push(`audit events: ${secret}`);
        for (const { path, text } of files) if (text.includes(secret)) leaks.push(`${path}`);
      }
      expect(leaks).toEqual([]);
    });

    it('seals at start a policy an earlier version stored in clear; the edge still enforces it', async () => {
      const created = await api('POST', '/endpoints', {
        type: 'cloud',
        url: `http://${OLD_HOST}`,
        traffic_policy: policy(OLD_PASSWORD),
      });
      expect(created.status).toBe(201);
      const id = created.body.id;
      const sealed = async () =>
        (
          await service.db.query<{ secret: string | null; fields: Record<string, unknown> }>(
            'SELECT secret, fields FROM account_objects WHERE id = $1',
            [id],
          )
        ).rows[0];
      expect((await sealed()).secret).toMatch(/^enc:v1:/);
      // As earlier versions stored it: in the fields, in clear.
      await service.db.query(
        `UPDATE account_objects SET secret = NULL,
         fields = jsonb_set(fields, '{traffic_policy}', to_jsonb($2::text)) WHERE id = $1`,
        [id, policy(OLD_PASSWORD)],
      );
      expect(await dump()).toContain(OLD_PASSWORD);
      await service.close();
      await start();

      const now = await sealed();
      expect(now.secret).toMatch(/^enc:v1:/);
      expect(now.fields).not.toHaveProperty('traffic_policy');
      expect(await dump()).not.toContain(OLD_PASSWORD);
      expect((await api('GET', `/endpoints/${id}`)).body.traffic_policy).toBe(policy(OLD_PASSWORD));
      const edge = service.edgePort!;
      expect((await curl(edge, OLD_HOST, '/')).status).toBe(401);
      expect((await curl(edge, OLD_HOST, '/', ['-H', basic(OLD_PASSWORD)])).status).toBe(200);
      expect(logLines.join('\n')).not.toContain(OLD_PASSWORD);
    }, 60_000);
  },
);
