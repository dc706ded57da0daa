import { access } from 'node:fs/promises';

/** Whether something exists at `path` (a file, directory or link). */
export async function pathExists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
