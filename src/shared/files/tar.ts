import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';

// A directory tree as a gzipped ustar archive (POSIX.1-1988: directories and regular files, names
// up to 100 bytes), and back: what the embedded store's pre-initialised cluster is kept as. Only
// what this writes is read back; `tar tzf` lists it.

const BLOCK = 512;

/** One ustar header: name, mode, size, type ('0' file, '5' directory); checksum computed. */
function header(name: string, mode: number, size: number, type: '0' | '5'): Buffer {
  const block = Buffer.alloc(BLOCK);
  if (Buffer.byteLength(name) > 100) throw new Error(`tar: name over 100 bytes: ${name}`);
  const octal = (value: number, at: number, width: number) =>
    block.write(`${value.toString(8).padStart(width - 1, '0')}\0`, at, 'ascii');
  block.write(name, 0, 'utf8');
  octal(mode, 100, 8);
  octal(0, 108, 8); // uid
  octal(0, 116, 8); // gid
  octal(size, 124, 12);
  octal(0, 136, 12); // mtime
  block.write(type, 156, 'ascii');
  block.write('ustar\0' + '00', 257, 'ascii');
  block.fill(' ', 148, 156); // the checksum counts its own field as spaces
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return block;
}

/** The tree under `dir` (relative names, directories first), gzipped. */
export function packTree(dir: string): Buffer {
  const parts: Buffer[] = [];
  const walk = (relative: string) => {
    for (const entry of readdirSync(join(dir, relative), { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const name = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) {
        parts.push(header(`${name}/`, 0o700, 0, '5'));
        walk(name);
      } else if (entry.isFile()) {
        const data = readFileSync(join(dir, name));
        parts.push(header(name, 0o600, data.length, '0'), data);
        parts.push(Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK));
      } else {
        throw new Error(`tar: not a file or directory: ${join(dir, name)}`);
      }
    }
  };
  if (!statSync(dir).isDirectory()) throw new Error(`tar: not a directory: ${dir}`);
  walk('');
  parts.push(Buffer.alloc(2 * BLOCK)); // end of archive
  return gzipSync(Buffer.concat(parts), { level: 9 });
}

/** Writes what packTree packed under `dir` (created; directories 0700, files 0600). */
export function unpackTree(archive: Buffer, dir: string): void {
  const tar = gunzipSync(archive);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (let at = 0; at + BLOCK <= tar.length; ) {
    const block = tar.subarray(at, at + BLOCK);
    const name = block.toString('utf8', 0, 100).replace(/\0.*$/s, '');
    if (name === '') break; // the end-of-archive blocks
    const size = Number.parseInt(block.toString('ascii', 124, 136).replace(/\0.*$/s, ''), 8);
    const type = block.toString('ascii', 156, 157);
    if (name.startsWith('/') || name.split('/').includes('..')) {
      throw new Error(`tar: entry outside the target: ${name}`);
    }
    at += BLOCK;
    if (type === '5') mkdirSync(join(dir, name), { recursive: true, mode: 0o700 });
    else if (type === '0' || type === '\0') {
      writeFileSync(join(dir, name), tar.subarray(at, at + size), { mode: 0o600 });
    } else throw new Error(`tar: entry of unsupported type ${JSON.stringify(type)}: ${name}`);
    at += Math.ceil(size / BLOCK) * BLOCK;
  }
}
