import { createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { IngestService } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

/** An IngestService client as an edge proxy would use it, with its ingest token. */
export function ingestClient(
  baseUrl: string,
  token: string,
  protocol: 'connect' | 'connect-json' | 'grpc' = 'connect',
) {
  const transport =
    protocol === 'grpc'
      ? createGrpcTransport({ baseUrl })
      : createConnectTransport({
          baseUrl,
          httpVersion: '1.1',
          useBinaryFormat: protocol === 'connect',
        });
  const client = createClient(IngestService, transport);
  const headers = { authorization: `Bearer ${token}` };
  return {
    publish: (events: Parameters<typeof client.publish>[0]['events']) =>
      client.publish({ events }, { headers }),
    publishStream: (
      requests: AsyncIterable<{ events: Parameters<typeof client.publish>[0]['events'] }>,
    ) => client.publishStream(requests, { headers }),
  };
}

/** The ingest token test services accept. */
export const TEST_INGEST_TOKEN = 'test-ingest-token-0123456789';
