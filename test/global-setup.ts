import { ensureMigratedStore } from './helpers/store-template.ts';

/** Once per `vitest run`, before any test file: the migrated store test stores start from. */
export default async function setup(): Promise<void> {
  await ensureMigratedStore();
}
