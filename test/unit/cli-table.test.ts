import { describe, expect, it } from 'vitest';
import { table } from '../../src/control-plane/cli/table.ts';

// `cli api … -o table`: nested values read as what people look for in them, never as
// `[object Object]`; the answers are shaped as the API answers them.

/** The table's cells by upper-case column, one record per row. */
function parse(text: string): Record<string, string>[] {
  const [header, ...lines] = text.split('\n');
  const starts = [...header.matchAll(/\S+/g)].map((match) => match.index);
  const cut = (line: string) =>
    starts.map((start, i) => line.slice(start, starts[i + 1] ?? undefined).trim());
  const names = cut(header);
  return lines.map((line) => Object.fromEntries(cut(line).map((cell, i) => [names[i], cell])));
}

const health = (status: string, lastError: string | null) => ({
  status,
  last_error: lastError,
  last_error_at: null,
  last_success_at: null,
  backlog: { events: 0, bytes: 0 },
});

describe('cli api tables', () => {
  it("shows a destination's kind and health", () => {
    const text = table({
      event_destinations: [
        {
          id: 'ed_1',
          uri: 'http://x/event_destinations/ed_1',
          created_at: '2026-11-27T13:01:10.112Z',
          description: '',
          metadata: '',
          format: 'JSON',
          target: { kafka: { brokers: ['127.0.0.1:9092'], topic: 't' } },
          health: health('retrying', 'kafka: connection refused'),
        },
        {
          id: 'ed_2',
          uri: 'http://x/event_destinations/ed_2',
          created_at: '2026-11-27T13:01:07.020Z',
          description: '',
          metadata: '',
          format: 'JSON',
          target: { file: { path: 'traffic' } },
          health: health('ok', null),
        },
      ],
      uri: 'http://x/event_destinations',
      next_page_uri: null,
    });
    expect(text).not.toContain('[object Object]');
    expect(parse(text)).toEqual([
      {
        ID: 'ed_1',
        CREATED_AT: '2026-11-27T13:01:10.112Z',
        FORMAT: 'JSON',
        TARGET: 'kafka',
        'HEALTH.STATUS': 'retrying',
        'HEALTH.LAST_ERROR': 'kafka: connection refused',
      },
      {
        ID: 'ed_2',
        CREATED_AT: '2026-11-27T13:01:07.020Z',
        FORMAT: 'JSON',
        TARGET: 'file',
        'HEALTH.STATUS': 'ok',
        'HEALTH.LAST_ERROR': '',
      },
    ]);
  });

  it("shows a session's hostname (its metadata) and its credential's id", () => {
    const text = table({
      tunnel_sessions: [
        {
          id: 'ts_1',
          uri: 'http://x/tunnel_sessions/ts_1',
          agent_version: 'SSH-2.0-OpenSSH_9.2p1',
          credential: { id: 'cr_1', uri: 'http://x/credentials/cr_1' },
          ip: '127.0.0.1',
          metadata: 'app.us.agents.example.com',
          os: '',
          region: 'us',
          started_at: '2026-11-27T13:01:07.020Z',
          transport: 'ssh',
        },
      ],
      uri: 'http://x/tunnel_sessions',
      next_page_uri: null,
    });
    expect(parse(text)).toEqual([
      {
        ID: 'ts_1',
        AGENT_VERSION: 'SSH-2.0-OpenSSH_9.2p1',
        CREDENTIAL: 'cr_1',
        IP: '127.0.0.1',
        METADATA: 'app.us.agents.example.com',
        REGION: 'us',
        STARTED_AT: '2026-11-27T13:01:07.020Z',
        TRANSPORT: 'ssh',
      },
    ]);
  });

  it('joins lists, shows a policy field by field, and clips long cells to one line', () => {
    const text = table({
      id: 'agin_1',
      domain: 'agents.example.com',
      ns_targets: ['ns1.example', 'ns2.example'],
      certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'ecdsa' },
      certificate_management_status: { renews_at: null, provisioning_job: { msg: 'queued' } },
      description: `a description\nover two lines ${'x'.repeat(100)}`,
    });
    expect(text).not.toContain('[object Object]');
    const [row] = parse(text);
    expect(row).toMatchObject({
      ID: 'agin_1',
      NS_TARGETS: 'ns1.example,ns2.example',
      'CERTIFICATE_MANAGEMENT_POLICY.AUTHORITY': 'letsencrypt',
      'CERTIFICATE_MANAGEMENT_POLICY.PRIVATE_KEY_TYPE': 'ecdsa',
    });
    expect(row.DESCRIPTION).toMatch(/^a description over two lines x+…$/);
    expect(row.DESCRIPTION).toHaveLength(48);
    expect(text.split('\n')).toHaveLength(2);
  });
});
