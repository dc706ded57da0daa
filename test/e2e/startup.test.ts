import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { health, route, until } from '../faults/support.ts';
import { LOADED_PACKAGES_HOOK, loadedPackages } from '../helpers/loaded-packages.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';

// What a start costs is mostly what it loads: the service loads a library only when its
// configuration uses it, so a start with no Kafka or ClickHouse destination, on the embedded
// store, pays for neither client nor for the PostgreSQL driver, nor for JSON-schema compilers
// no route needs, nor for the X.509 parser until a certificate is uploaded. The one exception is
// the first start's making of the agent listener's local CA (AGENT_PORT without
// AGENT_TLS_CERT_FILE): later starts read it from DATA_DIR and load no X.509 code. PGlite loads
// in the embedded store's own process, never in the service's.

const UNUSED_AT_START = [
  '@electric-sql/pglite',
  '@platformatic/kafka',
  '@clickhouse/client',
  'pg',
  'ajv',
  '@fastify/ajv-compiler',
  '@peculiar/asn1-x509',
];

describe('start-up', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'agin-e2e-startup-'));
  const services: ServiceProcess[] = [];
  afterAll(async () => {
    await Promise.all(services.filter((s) => s.running()).map((s) => s.stop('SIGKILL')));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("loads a sink kind's client library only once a destination of that kind exists", async () => {
    const first = await startServiceProcess({
      dataDir,
      nodeArgs: ['--import', LOADED_PACKAGES_HOOK],
    });
    services.push(first);
    expect((await first.stop()).code).toBe(0);
    const atStart = loadedPackages(first.stderr());
    expect(atStart).toContain('fastify');
    const madeOnce = (name: string) => name === '@peculiar/asn1-x509';
    expect(atStart.filter((name) => UNUSED_AT_START.includes(name) && !madeOnce(name))).toEqual([]);

    const second = await first.restart();
    services.push(second);
    const [kafkaId] = await route(
      second.api,
      [{ kafka: { brokers: ['127.0.0.1:9'], topic: 'never-written' } }],
      [{ type: 'tcp_connection_closed.v0' }],
    );
    await until('the Kafka destination is open', () => health(second.api, kafkaId), 30_000);
    expect((await second.stop()).code).toBe(0);
    const withKafka = loadedPackages(second.stderr());
    expect(withKafka).toContain('@platformatic/kafka');
    // A restart reads the agent listener's CA from DATA_DIR; the REST call compiled its schemas.
    for (const unused of [
      '@clickhouse/client',
      'pg',
      '@peculiar/asn1-x509',
      '@electric-sql/pglite',
    ]) {
      expect(withKafka).not.toContain(unused);
    }
  });
});
