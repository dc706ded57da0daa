import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESOURCES } from '../../src/control-plane/api/resource-list.ts';
import type { Resource } from '../../src/control-plane/api/resource-types.ts';
import type { Service } from '../../src/service.ts';
import { type ProcessRun, runProcess } from '../helpers/run-process.ts';
import { startTestService, TEST_BOOTSTRAP_KEY } from '../helpers/service.ts';
import { SERVICE_DIR } from '../helpers/service-process.ts';
import { pgliteStore, type TestStore } from '../helpers/stores.ts';

// `npm run cli -- api …` (node src/control-plane/cli/main.ts api …) as a real process against a real service:
// every declared resource's operations, paging, tables, the extra routes and the errors.

let service: Service;
let store: TestStore;

/** The `npm run cli -- api` commands of the "Command line" section of docs/rest-api.md, one per command. */
function readmeCommands(): string[] {
  const readme = readFileSync(join(SERVICE_DIR, 'docs', 'rest-api.md'), 'utf8');
  const section = readme.slice(readme.indexOf('### Command line'), readme.indexOf('### Errors'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)![1];
  return block
    .replaceAll('\\\n', ' ')
    .split('\n')
    .filter((line) => line.startsWith('npm run cli -- api'))
    .map((line) => line.replace(/\s+# .*$/, ''));
}

/** Runs `node src/control-plane/cli/main.ts api …args` with the service's URL and key in the environment. */
function api(args: string[], env: Record<string, string> = {}): Promise<ProcessRun> {
  return runProcess(process.execPath, ['src/control-plane/cli/main.ts', 'api', ...args], {
    AGENT_INGRESS_URL: service.url,
    AGENT_INGRESS_API_KEY: TEST_BOOTSTRAP_KEY,
    ...env,
  });
}

/** Runs a command that must succeed and returns its JSON output. */
async function ok(args: string[]): Promise<any> {
  const run = await api(args);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return run.stdout === '' ? undefined : JSON.parse(run.stdout);
}

beforeAll(async () => {
  store = await pgliteStore();
  service = await startTestService(store);
});

afterAll(async () => {
  await service?.close();
  await store?.cleanup();
});

/** How the first resources are created and changed from the command line, by hand. */
const CASES: Record<string, { create: (n: number) => string[]; update: string[]; check: string }> =
  {
    api_keys: {
      create: (n) => ['--description', `cli key ${n}`, '--metadata', '{"team":"edge"}'],
      update: ['--description', 'renamed'],
      check: 'description',
    },
    agent_ingresses: {
      create: (n) => [
        '--domain',
        `cli-${n}.example.com`,
        '--certificate-management-policy',
        '{"authority":"letsencrypt","private_key_type":"ecdsa"}',
      ],
      update: ['--description', 'renamed'],
      check: 'description',
    },
    event_destinations: {
      create: (n) => ['--target', `{"file":{"path":"cli-${n}"}}`, '--format', 'json'],
      update: ['--description', 'renamed'],
      check: 'description',
    },
    event_subscriptions: {
      create: () => ['--json', '{"sources":[{"type":"http_request_complete.v0"}]}'],
      update: ['--description', 'renamed'],
      check: 'description',
    },
  };

/**
 * The case of a resource without one above: `--json` with its declaration's example, after
 * creating (through the API) one object of each resource the example refers to.
 */
async function exampleCase(resource: Resource) {
  const needed: string[] = [];
  resource.example({
    tag: 'probe',
    idOf: (path) => {
      needed.push(path);
      return '';
    },
  });
  const ids: Record<string, string> = {};
  for (const path of needed) {
    const dependency = RESOURCES.find((r) => r.path === path)!;
    ids[path] = (await ok([path, 'create', ...(await exampleCase(dependency)).create(0)])).id;
  }
  // A resource on one of the account's names (a cloud endpoint) gets an Agent Ingress of its own.
  const held =
    resource.path === 'endpoints'
      ? (await ok(['agent_ingresses', 'create', '--domain', `cli-ep-${Date.now()}.example.com`]))
          .domain
      : undefined;
  return {
    create: (n: number) => [
      '--json',
      JSON.stringify(
        resource.example({ tag: `cli-${n}-${Date.now()}`, idOf: (p) => ids[p], held }),
      ),
    ],
    update: ['--description', 'renamed'],
    check: 'description',
  };
}

describe('cli api', () => {
  it.each(RESOURCES.map((r) => [r.path, r] as const))(
    'creates, gets, lists (paged), updates and deletes %s',
    async (path, resource) => {
      const spec = CASES[path] ?? (await exampleCase(resource));
      const created = [await ok([path, 'create', ...spec.create(1)])];
      created.push(await ok([path, 'create', ...spec.create(2)]));
      for (const object of created) expect(object.id).toMatch(new RegExp(`^${resource.idPrefix}_`));

      // As created, less what only a create shows (a token) or the pipeline adds (health).
      const { token: _token, ...shown } = created[0];
      expect(await ok([path, 'get', created[0].id])).toMatchObject(shown);

      const page = await ok([path, 'list', '--limit', '1']);
      expect(page[resource.listKey]).toHaveLength(1);
      expect(page.next_page_uri).toEqual(expect.any(String));
      const all = await ok([path, 'list', '--limit', '1', '--all']);
      const ids = all[resource.listKey].map((object: { id: string }) => object.id);
      expect(ids).toEqual(expect.arrayContaining(created.map((object) => object.id)));
      expect(new Set(ids).size).toBe(ids.length);
      expect(all.next_page_uri).toBeNull();
      const unpaged = await ok([path, 'list']);
      expect(ids).toEqual(unpaged[resource.listKey].map((object: { id: string }) => object.id));

      const updated = await ok([path, 'update', created[0].id, ...spec.update]);
      expect(updated[spec.check]).toBe('renamed');
      expect((await ok([path, 'get', created[0].id]))[spec.check]).toBe('renamed');

      expect(await ok([path, 'delete', created[0].id])).toBeUndefined();
      const gone = await api([path, 'get', created[0].id]);
      expect(gone.code).toBe(1);
      expect(gone.stderr).toContain('ERR_NOT_FOUND (404)');
    },
  );

  it('takes comma-separated lists and runs the extra routes (destination test, sources)', async () => {
    const a = await ok(['event_destinations', 'create', '--target', '{"file":{"path":"x-a"}}']);
    const b = await ok(['event-destinations', 'create', '--target', '{"file":{"path":"x-b"}}']);
    const tested = await ok(['event_destinations', 'test', a.id]);
    expect(tested).toMatchObject({ delivered: true, status: 'delivered' });

    const sub = await ok([
      'event_subscriptions',
      'create',
      '--destination-ids',
      `${a.id},${b.id}`,
      '--sources',
      '[{"type":"http_request_complete.v0"}]',
    ]);
    expect(sub.destinations.map((d: { id: string }) => d.id)).toEqual([a.id, b.id]);
    const added = await ok([
      'event_subscriptions',
      'sources-create',
      sub.id,
      '--type',
      'tcp_connection_closed.v0',
      '--fields',
      'conn.client_ip,conn.bytes_in',
    ]);
    expect(added).toMatchObject({ fields: ['conn.client_ip', 'conn.bytes_in'] });
    const changed = await ok([
      'event_subscriptions',
      'sources-update',
      sub.id,
      'tcp_connection_closed.v0',
      '--filter',
      'conn.server_port == 443',
    ]);
    expect(changed.filter).toBe('conn.server_port == 443');
    const got = await ok([
      'event_subscriptions',
      'sources-get',
      sub.id,
      'tcp_connection_closed.v0',
    ]);
    expect(got).toEqual(changed);
    await ok(['event_subscriptions', 'sources-delete', sub.id, 'tcp_connection_closed.v0']);
    // A tap prints its events as JSON lines while it runs, and ends at --max-seconds.
    const tap = await api(['event_subscriptions', 'tap', sub.id, '--max-seconds', '1']);
    expect(tap.code).toBe(0);
    expect(
      tap.stdout
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([
      { event: 'open', rate: 10, max_seconds: 1 },
      { event: 'end', reason: 'max_duration', matched: 0, shown: 0 },
    ]);
    const badFilter = await api([
      'filters',
      'preview',
      '--type',
      'http_request_complete.v0',
      '--filter',
      'conn.',
    ]);
    expect(badFilter.code).toBe(1);
    expect(badFilter.stderr).toContain('ERR_INVALID_FILTER (400)');
    expect(badFilter.stderr).toContain('"position"');
    expect(await ok(['pipeline', 'stats'])).toMatchObject({ events_received: expect.any(Number) });
    // --json gives the whole body; DELETE's query parameters are options too.
    const renamed = await ok([
      'event_destinations',
      'update',
      b.id,
      '--json',
      '{"description":"eu"}',
    ]);
    expect(renamed.description).toBe('eu');
    await ok(['event_subscriptions', 'update', sub.id, '--destination-ids', a.id]);
    expect(await ok(['event_destinations', 'delete', b.id, '--discard-backlog', 'true'])).toBe(
      undefined,
    );
    const listed = await ok(['event_subscriptions', 'sources-list', sub.id]);
    expect(listed.sources.map((s: { type: string }) => s.type)).toEqual([
      'http_request_complete.v0',
    ]);
  });

  it('tells the caller its account, the account_id it publishes as (account get)', async () => {
    expect(await ok(['account', 'get'])).toEqual({
      id: service.firstKey!.accountId,
      uri: `${service.url}/account`,
    });
  });

  it('runs every command of the "Command line" section of docs/rest-api.md as written', async () => {
    const commands = readmeCommands();
    expect(commands.length).toBeGreaterThanOrEqual(8);
    const ids: Record<string, string> = {};
    for (const name of ['ED_ID', 'ED_ID2', 'ID']) {
      ids[name] = (
        await ok(['event_destinations', 'create', '--target', `{"file":{"path":"readme-${name}"}}`])
      ).id;
    }
    ids.AGIN_ID = (await ok(['agent_ingresses', 'create', '--domain', 'readme.example.com'])).id;
    for (const command of commands) {
      if (command.includes('<ESB_ID>')) {
        const listed = await ok(['event_subscriptions', 'list']);
        ids.ESB_ID = listed.event_subscriptions[0].id;
      }
      const line = command.replace(/<(\w+)>/g, (_match, name: string) => ids[name]);
      const { code, stderr } = await runProcess('bash', ['-c', line], {
        AGENT_INGRESS_URL: service.url,
        AGENT_INGRESS_API_KEY: TEST_BOOTSTRAP_KEY,
      });
      expect(code, `${line}\n${stderr}`).toBe(0);
    }
  });

  it('prints a compact table for people with --output table', async () => {
    const key = await ok(['api_keys', 'create', '--description', 'for the table']);
    const run = await api(['api_keys', 'list', '--output', 'table']);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const [header, ...rows] = run.stdout.trimEnd().split('\n');
    expect(header.split(/\s+/)).toEqual(
      expect.arrayContaining(['ID', 'CREATED_AT', 'DESCRIPTION']),
    );
    expect(header).not.toContain('URI');
    expect(rows.find((row) => row.startsWith(key.id))).toContain('for the table');
    const every = await api(['api_keys', 'list', '--all', '--limit', '1', '--output', 'table']);
    expect(every.stdout).toContain(key.id);
    expect(every.stdout.trimEnd().split('\n').length).toBeGreaterThan(2);
    const one = await api(['api_keys', 'get', key.id, '-o', 'table']);
    expect(one.stdout.trimEnd().split('\n')).toHaveLength(2);
  });

  it('reports an API error with its code, message and operation id on stderr, exit 1', async () => {
    const run = await api(['agent_ingresses', 'create', '--domain', 'x'.repeat(300)]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^ERR_[A-Z_]+ \(400\): .+/);
    expect(run.stderr).toMatch(/operation id: op_[a-z0-9]+/);
    const missing = await api(['api_keys', 'get', 'ak_doesnotexist']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(
      'ERR_NOT_FOUND (404): API key "ak_doesnotexist" was not found',
    );
  });

  it('exits 64 on a usage error, printing nothing to stdout', async () => {
    for (const args of [
      ['api_keys', 'frobnicate'],
      ['api_keys', 'get'],
      ['api_keys', 'create', '--no-such-field', 'x'],
      ['event_destinations', 'create', '--target', '{not json'],
      ['api_keys', 'create', '--json', '["not", "an object"]'],
      ['api_keys', 'create', '--json', '{'],
      ['api_keys', 'list', '--output', 'yaml'],
    ]) {
      const run = await api(args);
      expect(run.code, args.join(' ')).toBe(64);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/error: /);
    }
  });

  it('exits 78 without AGENT_INGRESS_API_KEY and 69 when the service is unreachable', async () => {
    const keyless = await api(['api_keys', 'list'], { AGENT_INGRESS_API_KEY: '' });
    expect(keyless.code).toBe(78);
    expect(keyless.stderr).toContain('AGENT_INGRESS_API_KEY');
    const away = await api(['api_keys', 'list'], { AGENT_INGRESS_URL: 'http://127.0.0.1:9' });
    expect(away.code).toBe(69);
    expect(away.stderr).toContain('cannot reach http://127.0.0.1:9');
  });

  it('documents every resource, operation and field in --help, exit 0', async () => {
    const top = await api(['--help']);
    expect(top.code).toBe(0);
    for (const resource of RESOURCES) expect(top.stdout).toContain(resource.path);
    const create = await api(['event_destinations', 'create', '--help']);
    expect(create.code).toBe(0);
    expect(create.stdout).toContain('--target <value>');
    expect(create.stdout).toContain('--json <body>');
    const update = await api(['agent_ingresses', 'update', '--help']);
    expect(update.stdout).not.toContain('--domain');
    expect(update.stdout).toContain('--certificate-management-policy');
  });
});
