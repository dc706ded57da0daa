import { defineConfig } from 'vitest/config';

/**
 * Files that drive ngrok's SDK (@ngrok/ngrok, a native module): its state is the process's, not
 * the file's (ngrok.kill() ends every session of the process, loggingCallback stays set), so
 * each of these runs in a process of its own.
 */
const NGROK_SDK_FILES = [
  'test/e2e/edge-internal-endpoints.test.ts',
  'test/e2e/instances-relay-endpoints.test.ts',
  'test/e2e/ngrok-*.test.ts',
  'test/integration/ngrok-client*.test.ts',
  'test/integration/source-redaction.test.ts',
  'test/integration/ssh-families.test.ts',
  'test/integration/x509-ngrok-client.test.ts',
  'test/unit/ngrok-bind-options.test.ts',
];

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    projects: [
      {
        // One module registry per worker, not a new process importing src/ again for each of
        // the ~160 files: that import was a fifth of the suite's time (12 service files: 87 s →
        // 56 s; test/unit: 80 s → 62 s). These files share no state but what they start and
        // stop themselves (services, stores, servers).
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: NGROK_SDK_FILES,
          isolate: false,
        },
      },
      { test: { name: 'ngrok-sdk', include: NGROK_SDK_FILES, isolate: true } },
    ],
  },
});
