import dnsPacket from 'dns-packet';
import { startDnsServer } from '../../src/agent-plane/dns/server.ts';
import { createConnectionLimits } from '../../src/shared/http/connection-limits.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createMetrics } from '../../src/shared/metrics.ts';

// A test "parent zone" for the certificate runner's delegation check (DELEGATION_RESOLVER): a DNS
// server of its own saying which domains are delegated to the service's name servers.

const silent = createLogger('silent');

/** The service's name servers, as the tests that issue certificates set NAME_SERVERS. */
export const NAME_SERVERS = ['ns1.agent-ingress.example', 'ns2.agent-ingress.example'];

/** A parent zone answering NS for the domains delegated in `delegated` (NXDOMAIN otherwise). */
export async function startParentZone(delegated: Map<string, string[]>) {
  return startDnsServer({
    host: '127.0.0.1',
    port: 0,
    logger: silent,
    tcp: {
      limit: createConnectionLimits({
        maxConnections: 100,
        listeners: ['dns_tcp'],
        openFiles: undefined,
        metrics: createMetrics(),
        logger: silent,
      }).listener('dns_tcp'),
      idleTimeoutMs: 10_000,
      timeoutMs: 60_000,
    },
    async answer(query) {
      const question = query.questions![0];
      const servers = delegated.get(question.name.toLowerCase());
      return {
        id: query.id,
        type: 'response',
        flags: dnsPacket.AUTHORITATIVE_ANSWER | (servers === undefined ? 3 : 0),
        questions: query.questions,
        answers: (question.type === 'NS' ? (servers ?? []) : []).map((data) => ({
          name: question.name,
          type: 'NS' as const,
          ttl: 1,
          data,
        })),
      };
    },
  });
}
