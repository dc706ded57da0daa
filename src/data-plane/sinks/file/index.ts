import { normalize } from 'node:path';
import type { SinkKind } from '../types.ts';
import { FILE_SETTINGS, type FileSinkConfig, parseFileSinkConfig } from './config.ts';

/** The file sink: NDJSON files in a directory of the account's, rotated by size and age. */
export const FILE_SINK: SinkKind<FileSinkConfig> = {
  kind: 'file',
  doc: "NDJSON files in a directory inside the account's directory",
  settings: FILE_SETTINGS,
  parse: parseFileSinkConfig,
  // One spelling per directory ("a/./b/" is "a/b"), so the store can keep paths unique.
  canonical: (settings) => ({
    ...settings,
    path: normalize(settings.path as string).replace(/\/+$/, ''),
  }),
  async create(config, { logger }) {
    const { createFileSink } = await import('./sink.ts');
    return createFileSink({ config, logger });
  },
};
