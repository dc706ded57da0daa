import { describe, expect, it } from 'vitest';
import { generateEvents } from '../helpers/events.ts';
import { ingestClient, TEST_INGEST_TOKEN } from '../helpers/ingest-client.ts';
import { useTestService } from '../helpers/service.ts';
import { pgliteStore } from '../helpers/stores.ts';

/** The value of one Prometheus sample line (`name{labels} value`), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metrics and health', () => {
  const t = useTestService(pgliteStore, { INGEST_TOKENS: TEST_INGEST_TOKEN });

  it('counts received, matched and delivered events, rejected requests and destination states', async () => {
    const account = (await t.service.db.query<{ id: string }>('SELECT id FROM accounts')).rows[0]
      .id;
    const destination = await t.api('POST', '/event_destinations', {
      target: { file: { path: 'metrics' } },
    });
    await t.api('POST', '/event_subscriptions', {
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destination_ids: [destination.body.id],
    });
    await t.service.pipeline.reload();
    const client = ingestClient(t.service.url, TEST_INGEST_TOKEN);
    const events = generateEvents(300, { accounts: [account], tcpShare: 0.5, seed: 9 });
    const tcp = events.filter((e) => e.payload.case === 'tcpConnectionClosed').length;
    await client.publish(events);
    await expect(
      ingestClient(t.service.url, 'not-the-token-0123456').publish(events.slice(0, 1)),
    ).rejects.toThrow(/unauthenticated/);
    await expect(client.publish([{ ...events[0], accountId: '' }])).rejects.toThrow(/account_id/);

    const response = await fetch(`${t.service.url}/metrics`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(sample(text, 'agent_ingress_events_received_total')).toBe(300);
    expect(sample(text, 'agent_ingress_events_matched_total')).toBe(tcp);
    expect(sample(text, 'agent_ingress_sink_records_delivered_total{sink="file"}')).toBe(tcp);
    expect(sample(text, 'agent_ingress_ingest_requests_total{result="ok"}')).toBe(1);
    expect(sample(text, 'agent_ingress_ingest_requests_total{result="ERR_INVALID_EVENTS"}')).toBe(
      1,
    );
    expect(sample(text, 'agent_ingress_ingest_requests_total{result="ERR_UNAUTHORIZED"}')).toBe(1);
    expect(sample(text, 'agent_ingress_destinations{status="ok"}')).toBe(1);
    expect(sample(text, 'agent_ingress_spool_backlog_records')).toBe(0);
    expect(text).toContain('agent_ingress_sink_write_seconds_bucket');
    expect(text).toContain('agent_ingress_nodejs_eventloop_lag_p99_seconds');
  });

  it('answers health and readiness', async () => {
    expect(await (await fetch(`${t.service.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${t.service.url}/readyz`)).json()).toEqual({ status: 'ready' });
  });
});
