import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Transport } from '@connectrpc/connect';
import {
  compressionGzip,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import { describe, expect, it } from 'vitest';
import { EventSchema, IngestService } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { generateEvents } from '../helpers/events.ts';
import { freePort } from '../helpers/free-port.ts';
import { TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { startTestService, useTestService } from '../helpers/service.ts';
import { pgliteStore } from '../helpers/stores.ts';

const headers = { authorization: `Bearer ${TEST_INGEST_TOKEN}` };
const PUBLISH = '/agent_ingress.ingest.v0.IngestService/Publish';

describe('ingest protocols and their errors', () => {
  const t = useTestService(pgliteStore, {
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    MAX_INGEST_BYTES: '200000',
  });

  // Streaming needs the Connect protocol over HTTP/1.1 (gRPC-Web client streams need HTTP/2).
  const transports = {
    'connect binary': {
      streams: true,
      make: () => createConnectTransport({ baseUrl: t.service.url, httpVersion: '1.1' }),
    },
    'connect JSON': {
      streams: true,
      make: () =>
        createConnectTransport({
          baseUrl: t.service.url,
          httpVersion: '1.1',
          useBinaryFormat: false,
        }),
    },
    'connect binary, gzip': {
      streams: true,
      make: () =>
        createConnectTransport({
          baseUrl: t.service.url,
          httpVersion: '1.1',
          sendCompression: compressionGzip,
        }),
    },
    'gRPC-Web': {
      streams: false,
      make: () => createGrpcWebTransport({ baseUrl: t.service.url, httpVersion: '1.1' }),
    },
  };

  it.each(Object.entries(transports))('publishes over %s', async (_name, transport) => {
    const client = createClient(IngestService, transport.make());
    const events = generateEvents(20, { accounts: ['ac_protocols'], seed: 4 });
    const unary = await client.publish({ events }, { headers });
    expect(unary.accepted).toBe(20);
    expect(unary.eventIds).toHaveLength(20);
    if (!transport.streams) return;
    async function* requests() {
      yield { events: events.slice(0, 5) };
      yield { events: events.slice(5, 12) };
    }
    const streamed = await client.publishStream(requests(), { headers });
    expect(streamed.accepted).toBe(12);
  });

  it('answers the right Connect codes for a bad token, bad bytes, bad JSON, bad events and oversize requests', async () => {
    const post = (body: Uint8Array | string, type: string, token = TEST_INGEST_TOKEN) =>
      fetch(`${t.service.url}${PUBLISH}`, {
        method: 'POST',
        headers: { 'content-type': type, authorization: `Bearer ${token}` },
        body,
      });
    const expectCode = async (response: Response, status: number, code: string) => {
      expect(response.status).toBe(status);
      expect(((await response.json()) as { code: string }).code).toBe(code);
    };
    await expectCode(
      await post(new Uint8Array([8, 1]), 'application/proto', 'wrong-token-0123456789'),
      401,
      'unauthenticated',
    );
    await expectCode(
      await post(new Uint8Array([0xff, 0xff, 0x07]), 'application/proto'),
      400,
      'invalid_argument',
    );
    await expectCode(await post('{"events": [', 'application/json'), 400, 'invalid_argument');
    await expectCode(
      await post('{"events": [{"tcp_connection_closed": {}}]}', 'application/json'),
      400,
      'invalid_argument',
    );
    await expectCode(
      await post(new Uint8Array(300_000), 'application/proto'),
      429,
      'resource_exhausted',
    );

    const client = createClient(
      IngestService,
      createConnectTransport({ baseUrl: t.service.url, httpVersion: '1.1' }),
    );
    const huge = generateEvents(2000, { accounts: ['ac_protocols'], seed: 5 });
    const error = await client
      .publish({ events: huge }, { headers })
      .catch((e) => ConnectError.from(e));
    expect((error as ConnectError).code).toBe(Code.ResourceExhausted);
    expect((await fetch(`${t.service.url}/healthz`)).status).toBe(200);
  });
});

describe('gRPC over HTTP/2 on GRPC_PORT', () => {
  it('publishes unary and streaming requests', async () => {
    const store = await pgliteStore();
    const grpcPort = await freePort();
    const service = await startTestService(store, {
      INGEST_TOKENS: TEST_INGEST_TOKEN,
      GRPC_PORT: String(grpcPort),
    });
    try {
      expect(service.grpcUrl).toBe(`http://127.0.0.1:${grpcPort}`);
      const client = createClient(
        IngestService,
        createGrpcTransport({ baseUrl: service.grpcUrl! }),
      );
      const events = generateEvents(30, { accounts: ['ac_grpc'], seed: 6 });
      expect((await client.publish({ events }, { headers })).accepted).toBe(30);
      async function* requests() {
        yield { events: events.slice(0, 10) };
        yield { events: events.slice(10) };
      }
      expect((await client.publishStream(requests(), { headers })).accepted).toBe(30);
      const denied = await client
        .publish({ events }, { headers: { authorization: 'Bearer nope-nope-nope-nope' } })
        .catch((e) => ConnectError.from(e));
      expect((denied as ConnectError).code).toBe(Code.Unauthenticated);
    } finally {
      await service.close();
      await store.cleanup();
    }
  });
});

describe('one Publish path: the same bad requests get the same answer and metric in every protocol', () => {
  const t = useTestService(pgliteStore, {
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    MAX_INGEST_BYTES: '200000',
    // Bound at random by the service: no port to lose to another process before the bind.
    GRPC_PORT: '0',
  });

  const transports: Record<string, () => Transport> = {
    'connect binary': () => createConnectTransport({ baseUrl: t.service.url, httpVersion: '1.1' }),
    'connect JSON': () =>
      createConnectTransport({
        baseUrl: t.service.url,
        httpVersion: '1.1',
        useBinaryFormat: false,
      }),
    'connect binary, gzip': () =>
      createConnectTransport({
        baseUrl: t.service.url,
        httpVersion: '1.1',
        sendCompression: compressionGzip,
      }),
    'gRPC-Web': () => createGrpcWebTransport({ baseUrl: t.service.url, httpVersion: '1.1' }),
    gRPC: () => createGrpcTransport({ baseUrl: t.service.grpcUrl! }),
  };

  const valid = generateEvents(1, { accounts: ['ac_same'], seed: 9 });
  const badRequests: Record<string, { events: typeof valid; token: string; code: Code }> = {
    'a wrong token': { events: valid, token: 'wrong-token-0123456789', code: Code.Unauthenticated },
    'an event without its fields': {
      events: [create(EventSchema, { payload: { case: 'tcpConnectionClosed', value: {} } })],
      token: TEST_INGEST_TOKEN,
      code: Code.InvalidArgument,
    },
    'more bytes than MAX_INGEST_BYTES': {
      events: generateEvents(2000, { accounts: ['ac_same'], seed: 10 }),
      token: TEST_INGEST_TOKEN,
      code: Code.ResourceExhausted,
    },
  };

  /** agent_ingress_ingest_requests_total by result, as /metrics shows it. */
  async function requestsByResult(): Promise<Record<string, number>> {
    const text = await (await fetch(`${t.service.url}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const match of text.matchAll(
      /^agent_ingress_ingest_requests_total\{result="([^"]+)"\} (\d+)$/gm,
    )) {
      out[match[1]] = Number(match[2]);
    }
    return out;
  }

  function delta(before: Record<string, number>, after: Record<string, number>) {
    return Object.fromEntries(
      Object.entries(after)
        .map(([result, n]) => [result, n - (before[result] ?? 0)] as const)
        .filter(([, n]) => n !== 0),
    );
  }

  it.each(Object.entries(badRequests))('%s', async (_name, bad) => {
    const answers: Record<string, { code: Code; counted: Record<string, number> }> = {};
    const headers = { authorization: `Bearer ${bad.token}` };
    async function* oneMessage() {
      yield { events: bad.events };
    }
    const calls = Object.entries(transports).flatMap(([protocol, transport]) => {
      const client = createClient(IngestService, transport());
      const unary = [protocol, () => client.publish({ events: bad.events }, { headers })] as const;
      // PublishStream where the protocol streams from the client (gRPC-Web needs HTTP/2).
      if (protocol === 'gRPC-Web') return [unary];
      const stream = [
        `${protocol}, PublishStream`,
        () => client.publishStream(oneMessage(), { headers }),
      ] as const;
      return [unary, stream];
    });
    for (const [name, call] of calls) {
      const before = await requestsByResult();
      const error = await call().then(
        () => undefined,
        (e) => ConnectError.from(e),
      );
      answers[name] = {
        code: error?.code ?? Code.Unknown,
        counted: delta(before, await requestsByResult()),
      };
    }
    expect(Object.keys(answers)).toHaveLength(9);
    const first = Object.values(answers)[0];
    expect(first.code).toBe(bad.code);
    expect(Object.keys(first.counted)).toHaveLength(1);
    for (const answer of Object.values(answers)) expect(answer).toEqual(first);
  });
});
