import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// `npm run bench:edge` kept from rotting: one short round of every arm (direct, OpenSSH sshd's
// remote forward, `ssh -R` through the service, ngrok's SDK through the service), and the lines
// `npm run bench:all` reads. What it measures is not checked here (a loaded machine says little):
// only that every arm carried requests and each line compares what it says it compares.

const ROOT = join(import.meta.dirname, '..', '..');

describe('bench:edge', () => {
  it('measures every arm in one short run and prints the lines bench:all reads', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['bench/edge.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        BENCH_DURATION_S: '1',
        BENCH_ROUNDS: '1',
        BENCH_WARMUP_S: '1',
        BENCH_CONNECTIONS: '4',
      },
      encoding: 'utf8',
      timeout: 120_000,
    });
    // The table: each arm's row, its req/s (the second column: columns are 2+ spaces apart) above zero.
    const arms = [
      'direct to the local server',
      "OpenSSH sshd's remote forward",
      'edge → ssh -R through the service',
      'edge → ngrok SDK (muxado) through the service',
    ];
    for (const arm of arms) {
      const row = stdout.split('\n').find((line) => line.startsWith(arm));
      expect(row, `${arm} in\n${stdout}`).toBeDefined();
      const [, rps] = row!.split(/\s{2,}/);
      expect(Number(rps.replaceAll(',', ''))).toBeGreaterThan(0);
    }
    const lines = Object.fromEntries(
      stdout
        .split('\n')
        .filter((line) => line.startsWith('{"bench":'))
        .map((line) => JSON.parse(line))
        .map((result) => [result.bench, result]),
    );
    expect(Object.keys(lines).sort()).toEqual(['edge', 'edge-ngrok', 'edge-sshd']);
    // The arms through the service against sshd's; sshd's against direct.
    expect(lines.edge.baseline).toBe(lines['edge-ngrok'].baseline);
    expect(lines['edge-sshd'].value).toBe(lines.edge.baseline);
    for (const result of Object.values(lines) as any[]) {
      expect(result).toMatchObject({ unit: 'req/s', spread: { rounds: 1 } });
      expect(result.value).toBeGreaterThan(0);
      expect(result.baseline).toBeGreaterThan(0);
      expect(result.ratio).toBeCloseTo(result.value / result.baseline, 1);
    }
  }, 150_000);
});
