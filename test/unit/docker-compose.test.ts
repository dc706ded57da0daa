import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/load.ts';

// docker-compose.yml (docs/operations.md): the stack must publish every port the service listens
// on there, or the agent face (SSH, the edge, DNS, TCP endpoints) cannot be reached from the
// host; and the Kafka topic destinations use must exist. No Docker here: this reads the file the
// way Compose does and runs the service's own settings parser on its environment.

const ROOT = join(import.meta.dirname, '..', '..');
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'));
const service = compose.services['agent-ingress'];

/** `"8088:8088"` and `"5353:5353/udp"` as `8088/tcp`, `5353/udp`; ranges one port at a time. */
function published(ports: string[]): Set<string> {
  const out = new Set<string>();
  for (const entry of ports) {
    const [mapping, protocol = 'tcp'] = entry.split('/');
    const [host, container] = mapping.split(':');
    expect(host, `${entry} is published on the same port`).toBe(container);
    const [from, to = from] = container.split('-').map(Number);
    for (let port = from; port <= to; port++) out.add(`${port}/${protocol}`);
  }
  return out;
}

describe('docker-compose.yml', () => {
  // What the user gives `docker compose up` (`${VAR:?…}` in the file), as valid values.
  const given: Record<string, string> = {
    BOOTSTRAP_API_KEY: 'compose-bootstrap-key-0123',
    INGEST_TOKENS: 'compose-ingest-token-0123',
    SECRETS_KEY: Buffer.alloc(32, 1).toString('base64'),
  };
  const env = Object.fromEntries(
    Object.entries(service.environment as Record<string, unknown>).map(([name, value]) => {
      const text = String(value);
      return [name, text.startsWith('${') ? given[name] : text];
    }),
  );
  const config = loadConfig(env);
  const ports = published(service.ports);

  it('publishes every port the service listens on, each on the same host port', () => {
    const listeners = [
      config.port,
      config.grpcPort,
      config.sshPort,
      config.edgeHttpPort,
      config.edgeHttpsPort,
      (config as { agentPort?: number }).agentPort ?? Number(env.AGENT_PORT),
    ];
    for (const port of listeners) {
      expect(port, 'a listener on a fixed port').toBeGreaterThan(0);
      expect([...ports]).toContain(`${port}/tcp`);
    }
    expect(config.dnsPort).toBeGreaterThan(0);
    expect([...ports]).toEqual(
      expect.arrayContaining([`${config.dnsPort}/udp`, `${config.dnsPort}/tcp`]),
    );
    const { first, last } = config.tcpAddrPorts;
    for (let port = first; port <= last; port++) expect([...ports]).toContain(`${port}/tcp`);
    expect(config.host).toBe('0.0.0.0');
  });

  it('creates the Kafka topic of the docs (edge-traffic) before the service starts', () => {
    const topics = compose.services['kafka-topics'];
    expect(topics.image).toBe(compose.services.kafka.image);
    expect(topics.command.join(' ')).toMatch(
      /kafka-topics\.sh --bootstrap-server kafka:9092 --create\s+--if-not-exists --topic edge-traffic /,
    );
    expect(service.depends_on['kafka-topics']).toEqual({
      condition: 'service_completed_successfully',
    });
  });
});
