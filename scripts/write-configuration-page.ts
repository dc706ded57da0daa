import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configurationPage } from '../src/config/describe.ts';

// `npm run docs:config`: writes docs/configuration.md from the settings table.
const path = join(import.meta.dirname, '..', 'docs', 'configuration.md');
writeFileSync(path, configurationPage());
process.stdout.write(`wrote ${path}\n`);
