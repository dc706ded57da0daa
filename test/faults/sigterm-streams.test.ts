import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Event,
  PublishResponseSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { freePort } from '../helpers/free-port.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { type ServiceProcess, startServiceProcess } from '../helpers/service-process.ts';
import { eventPool, missing, readFileDestination, route, until, waitRouted } from './support.ts';

// SIGTERM while edge proxies hold PublishStreams open (Connect over HTTP/1.1 on PORT, gRPC over
// HTTP/2 on GRPC_PORT): the service ends each stream at once, answering UNAVAILABLE with the ids
// of the events the stream made durable in the error's details, and exits 0 well within
// SHUTDOWN_TIMEOUT_MS instead of waiting for the streams until it times out.

const SHUTDOWN_TIMEOUT_MS = 20_000;

/** A stream that sends `batches` and never ends by itself. */
function openStream(client: ReturnType<typeof ingestClient>, batches: Event[][]) {
  async function* messages() {
    for (const events of batches) yield { events };
    await new Promise(() => {});
  }
  return client.publishStream(messages()).then(
    (response) => response,
    (error: unknown) => ConnectError.from(error),
  );
}

describe('SIGTERM with open PublishStreams', () => {
  let dataDir: string;
  let service: ServiceProcess | undefined;

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'agin-fault-streams-'));
  });
  afterAll(async () => {
    if (service?.running()) await service.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('ends every stream with UNAVAILABLE and its durable ids, and exits 0 promptly', async () => {
    const grpcPort = await freePort();
    service = await startServiceProcess({
      dataDir,
      env: { GRPC_PORT: String(grpcPort), SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) },
    });
    const accountId = service.accountId!;
    const [fileId] = await route(
      service.api,
      [{ file: { path: 'streams' } }],
      [{ type: 'tcp_connection_closed.v0' }],
    );
    const probes = await waitRouted(service.url, service.api, accountId, [fileId]);

    const batches = (seed: number) =>
      [0, 1].map((i) =>
        eventPool(accountId, 20, seed + i).map((event, j) => {
          event.eventId = `stream-${seed + i}-${j}`;
          return event;
        }),
      );
    const sent = { connect: batches(10), grpc: batches(20) };
    const answers = {
      connect: openStream(ingestClient(service.url, TEST_INGEST_TOKEN), sent.connect),
      grpc: openStream(
        ingestClient(`http://127.0.0.1:${grpcPort}`, TEST_INGEST_TOKEN, 'grpc'),
        sent.grpc,
      ),
    };
    // Both streams' messages are durable (in the file) before the signal.
    const all = [...sent.connect, ...sent.grpc].flat().map((e) => e.eventId);
    await until(
      'streamed events in the file',
      () =>
        missing(all, readFileDestination(join(dataDir, 'events', accountId, 'streams')).ids) === '',
      15_000,
      100,
    );

    const { code, signal, ms } = await service.stop('SIGTERM', SHUTDOWN_TIMEOUT_MS + 10_000);
    console.log(`sigterm with open streams: exit ${code ?? signal} after ${ms} ms`);
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(ms).toBeLessThan(5_000);

    for (const [name, answer] of Object.entries(answers)) {
      const error = await answer;
      expect(error, `${name} stream`).toBeInstanceOf(ConnectError);
      const { code: streamCode, message } = error as ConnectError;
      expect(streamCode, `${name}: ${message}`).toBe(Code.Unavailable);
      const [durable] = (error as ConnectError).findDetails(PublishResponseSchema);
      const ids = sent[name as keyof typeof sent].flat().map((e) => e.eventId);
      expect(durable?.eventIds, `${name}: ${message}`).toEqual(ids);
    }
    const file = readFileDestination(join(dataDir, 'events', accountId, 'streams'));
    expect(file.openFiles, 'a clean shutdown finishes the open file').toEqual([]);
    expect(missing([...probes, ...all], file.ids)).toBe('');
  }, 90_000);
});
