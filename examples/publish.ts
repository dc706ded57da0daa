import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { IngestService } from '../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

// Publishes one traffic event as an edge proxy would (README "Publishing traffic"):
//
//   AGENT_INGRESS_API_KEY=<API key token> INGEST_TOKEN=<a token of INGEST_TOKENS> \
//     npm run example:publish
//
// The account the event belongs to is the API key's (GET /account). AGENT_INGRESS_URL is the
// service (default http://127.0.0.1:8080); Publish over HTTP/1.1 is served on PORT.

const baseUrl = process.env.AGENT_INGRESS_URL || 'http://127.0.0.1:8080';
const apiKey = process.env.AGENT_INGRESS_API_KEY;
const ingestToken = process.env.INGEST_TOKEN;
if (!apiKey || !ingestToken) {
  process.stderr.write('set AGENT_INGRESS_API_KEY and INGEST_TOKEN\n');
  process.exit(64);
}

// Which account this API key belongs to: the account_id every published event must carry.
const whoami = await fetch(`${baseUrl}/account`, {
  headers: { authorization: `Bearer ${apiKey}` },
});
if (!whoami.ok) throw new Error(`GET /account answered ${whoami.status}: ${await whoami.text()}`);
const account = (await whoami.json()) as { id: string };

const client = createClient(IngestService, createConnectTransport({ baseUrl, httpVersion: '1.1' }));
const { eventIds } = await client.publish(
  {
    events: [
      {
        accountId: account.id,
        payload: {
          case: 'tcpConnectionClosed',
          value: { conn: { clientIp: '203.0.113.7', serverPort: 22, bytesIn: 512n } },
        },
      },
    ],
  },
  { headers: { authorization: `Bearer ${ingestToken}` } },
);
process.stdout.write(`${JSON.stringify({ account_id: account.id, event_ids: eventIds })}\n`);
