import { ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { IngestService } from '../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

// Publishes one traffic event as an edge proxy would (docs/publishing.md):
//
//   AGENT_INGRESS_API_KEY=<API key token> INGEST_TOKEN=<a token of INGEST_TOKENS> \
//     npm run example:publish [-- <service URL>]
//
// The account the event belongs to is the API key's (GET /account). The service is the URL
// given, else AGENT_INGRESS_URL, else http://127.0.0.1:8080; Publish over HTTP/1.1 is served on
// PORT. A failure is one line on stderr (what failed, and what to check), never a stack trace.

const USAGE = 'usage: npm run example:publish [-- <service URL>]';
const baseUrl = process.argv[2] || process.env.AGENT_INGRESS_URL || 'http://127.0.0.1:8080';
const apiKey = process.env.AGENT_INGRESS_API_KEY;
const ingestToken = process.env.INGEST_TOKEN;
if (!apiKey || !ingestToken || !URL.canParse(baseUrl) || process.argv.length > 3) {
  fail(`set AGENT_INGRESS_API_KEY and INGEST_TOKEN, and give the service's URL; ${USAGE}`, 64);
}

/** One line on stderr and the exit code (sysexits: 64 usage, 69 unreachable, 1 refused). */
function fail(line: string, code: number): never {
  process.stderr.write(`example:publish: ${line}\n`);
  process.exit(code);
}

/** The API error body's `msg`, or the body as it came (another server answered). */
function messageOf(body: string): string {
  try {
    return (JSON.parse(body) as { msg?: string }).msg ?? body;
  } catch {
    return body.replace(/\s+/g, ' ').slice(0, 200);
  }
}

/** Which account this API key belongs to: the account_id every published event must carry. */
async function accountOf(key: string): Promise<string> {
  const whoami = await fetch(new URL('/account', baseUrl), {
    headers: { authorization: `Bearer ${key}` },
  }).catch((error: Error) => {
    const why = (error.cause as Error | undefined)?.message ?? error.message;
    return fail(`cannot reach the service at ${baseUrl} (${why}): is it running there?`, 69);
  });
  if (!whoami.ok) {
    const why = messageOf(await whoami.text());
    fail(`GET /account answered ${whoami.status}: ${why} (AGENT_INGRESS_API_KEY)`, 1);
  }
  return ((await whoami.json()) as { id: string }).id;
}

const accountId = await accountOf(apiKey!);
const client = createClient(IngestService, createConnectTransport({ baseUrl, httpVersion: '1.1' }));
const { eventIds } = await client
  .publish(
    {
      events: [
        {
          accountId,
          payload: {
            case: 'tcpConnectionClosed',
            value: { conn: { clientIp: '203.0.113.7', serverPort: 22, bytesIn: 512n } },
          },
        },
      ],
    },
    { headers: { authorization: `Bearer ${ingestToken}` } },
  )
  .catch((error: unknown) => fail(`Publish failed: ${ConnectError.from(error).message}`, 1));
process.stdout.write(`${JSON.stringify({ account_id: accountId, event_ids: eventIds })}\n`);
