import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_FILE_AGE_MS,
  DEFAULT_MAX_FILE_BYTES,
  parseFileSinkConfig,
} from '../../src/data-plane/sinks/file/config.ts';
import { createFileSink, fileSinkError } from '../../src/data-plane/sinks/file/sink.ts';
import { batchOf, type EventRecord, RecordBlock } from '../../src/data-plane/sinks/record-block.ts';
import { SinkConfigError } from '../../src/data-plane/sinks/settings.ts';

const logger = pino({ level: 'silent' });

function batch(from: number, n: number): RecordBlock {
  const records: EventRecord[] = [];
  for (let i = from; i < from + n; i++) {
    records.push({
      eventId: `ev_${i}`,
      eventType: 'tcp_connection_closed.v0',
      accountId: 'ac_1',
      partitionKey: 'host-a',
      json: JSON.stringify({
        event_id: `ev_${i}`,
        object: { conn: { bytes_in: i, note: 'a\nb' } },
      }),
    });
  }
  return RecordBlock.of(records);
}

const NAME_RE = /^events-\d{8}T\d{6}Z-\d{6}\.ndjson(\.open)?$/;

async function readEvents(dir: string, includeOpen = true): Promise<string[]> {
  const names = (await readdir(dir)).filter((n) => includeOpen || !n.endsWith('.open')).sort();
  const ids: string[] = [];
  for (const name of names) {
    const text = await readFile(join(dir, name), 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    for (const line of text.split('\n').slice(0, -1)) ids.push(JSON.parse(line).event_id);
  }
  return ids;
}

describe('file sink config', () => {
  it('fills defaults and resolves a relative path under the base', () => {
    const c = parseFileSinkConfig({ path: 'events/a' }, { accountDir: '/srv/data' });
    expect(c).toEqual({
      root: '/srv/data',
      dir: '/srv/data/events/a',
      maxFileBytes: DEFAULT_MAX_FILE_BYTES,
      maxFileAgeMs: DEFAULT_MAX_FILE_AGE_MS,
    });
    expect(parseFileSinkConfig({ path: 'a/../b' }, { accountDir: '/srv/data' }).dir).toBe(
      '/srv/data/b',
    );
    expect(parseFileSinkConfig({ path: '..x' }, { accountDir: '/srv/data' }).dir).toBe(
      '/srv/data/..x',
    );
  });

  it('refuses paths that escape the base, and absolute ones', () => {
    const base = { accountDir: '/srv/data' };
    expect(() => parseFileSinkConfig({ path: '../etc' }, base)).toThrow(SinkConfigError);
    expect(() => parseFileSinkConfig({ path: 'a/../../x' }, base)).toThrow(/escapes/);
    expect(() => parseFileSinkConfig({ path: '' }, base)).toThrow(/non-empty/);
    expect(() => parseFileSinkConfig({ path: '/var/events' }, base)).toThrow(/relative/);
    expect(() => parseFileSinkConfig({ path: '/srv/data/x' }, base)).toThrow(/relative/);
    expect(() => parseFileSinkConfig({ path: 'a/..' }, base)).toThrow(/not itself/);
    expect(() => parseFileSinkConfig({ path: 'x', max_file_bytes: 0 }, base)).toThrow(
      /max_file_bytes/,
    );
    expect(() => parseFileSinkConfig({ path: 'x', max_file_age_ms: 1.5 }, base)).toThrow(
      /max_file_age_ms/,
    );
  });
});

describe('file sink', () => {
  let base: string;
  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), 'file-sink-'));
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('writes valid NDJSON, readable from disk as soon as write() resolves', async () => {
    const config = parseFileSinkConfig({ path: 'out' }, { accountDir: base });
    const sink = createFileSink({ config, logger });
    await sink.write(batch(0, 3));
    // Content is on disk (fsync'd) before close: the active file carries the `.open` suffix.
    const names = await readdir(config.dir);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(NAME_RE);
    expect(names[0].endsWith('.open')).toBe(true);
    expect(await readEvents(config.dir)).toEqual(['ev_0', 'ev_1', 'ev_2']);
    await sink.write(batch(3, 2));
    await sink.close();
    const closed = await readdir(config.dir);
    expect(closed.every((n) => !n.endsWith('.open'))).toBe(true);
    expect(await readEvents(config.dir)).toEqual(['ev_0', 'ev_1', 'ev_2', 'ev_3', 'ev_4']);
  });

  it('writes a batch of many blocks whole and in order, past the OS limit of one writev', async () => {
    const config = parseFileSinkConfig({ path: 'out' }, { accountDir: base });
    const sink = createFileSink({ config, logger });
    // 1,500 blocks (IOV_MAX is 1,024 on Linux), some of them empty.
    const blocks = Array.from({ length: 1500 }, (_, i) => batch(2 * i, i % 7 === 0 ? 0 : 2));
    await sink.write(batchOf(blocks));
    await sink.write(batchOf([batch(3000, 1), batch(3001, 2)]));
    await sink.close();
    const expected = blocks.flatMap((b) => b.records().map((r) => r.eventId));
    expect(await readEvents(config.dir)).toEqual([...expected, 'ev_3000', 'ev_3001', 'ev_3002']);
  });

  it('rotates by size, never splitting a batch, and keeps order across files', async () => {
    const one = batch(0, 10).bytes + 10; // a 10-record batch plus newlines
    const config = parseFileSinkConfig(
      { path: 'out', max_file_bytes: one * 2 + 100 },
      { accountDir: base },
    );
    const sink = createFileSink({ config, logger });
    for (let i = 0; i < 50; i += 10) await sink.write(batch(i, 10));
    const names = (await readdir(config.dir)).sort();
    expect(names.length).toBe(3);
    expect(names.filter((n) => n.endsWith('.open'))).toHaveLength(1);
    expect(names.every((n) => NAME_RE.test(n))).toBe(true);
    const ids = await readEvents(config.dir, false);
    expect(ids).toEqual(Array.from({ length: 40 }, (_, i) => `ev_${i}`));
    await sink.close();
    expect(await readEvents(config.dir)).toHaveLength(50);
  });

  it('rotates by age even when no more writes arrive', async () => {
    const config = parseFileSinkConfig({ path: 'out', max_file_age_ms: 50 }, { accountDir: base });
    const sink = createFileSink({ config, logger });
    await sink.write(batch(0, 1));
    await new Promise((r) => setTimeout(r, 120));
    const names = await readdir(config.dir);
    expect(names).toHaveLength(1);
    expect(names[0].endsWith('.open')).toBe(false);
    await sink.write(batch(1, 1));
    expect(await readdir(config.dir)).toHaveLength(2);
    await sink.close();
    expect(await readEvents(config.dir)).toEqual(['ev_0', 'ev_1']);
  });

  it('finishes a file left open by a crash, dropping its partial last line', async () => {
    const config = parseFileSinkConfig({ path: 'out' }, { accountDir: base });
    const crashed = createFileSink({ config, logger });
    await crashed.write(batch(0, 2));
    const [left] = await readdir(config.dir);
    await writeFile(join(config.dir, left), '{"event_id":"ev_partial', { flag: 'a' });
    const restarted = createFileSink({ config, logger });
    await restarted.write(batch(2, 1));
    await restarted.close();
    expect(await readEvents(config.dir)).toEqual(['ev_0', 'ev_1', 'ev_2']);
  });

  it('maps permission errors to permanent SinkErrors and disk-full to retriable', async () => {
    const perm = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
    const full = Object.assign(new Error('ENOSPC: no space left'), { code: 'ENOSPC' });
    expect(fileSinkError(perm).retriable).toBe(false);
    expect(fileSinkError(full).retriable).toBe(true);
    await writeFile(join(base, 'not-a-dir'), 'x');
    const config = parseFileSinkConfig({ path: 'not-a-dir/out' }, { accountDir: base });
    const sink = createFileSink({ config, logger });
    await expect(sink.write(batch(0, 1))).rejects.toMatchObject({
      name: 'SinkError',
      retriable: false,
    });
  });
});
