import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clientHelloServerName } from '../../src/agent-plane/edge/client-hello.ts';
import { fuzzParams } from '../helpers/fuzz.ts';

// The edge's ClientHello reader (tls-passthrough.ts reads it before TLS starts, from any client)
// under hostile bytes: nothing may throw, and a well-formed ClientHello with any extensions
// around its server name gives that name back. FUZZ_SEED=<n> replays a run.

/** `body` behind a big-endian length of `bytes` bytes. */
function vector(bytes: 1 | 2 | 3, body: Buffer): Buffer {
  const length = Buffer.alloc(bytes);
  length.writeUIntBE(body.length, 0, bytes);
  return Buffer.concat([length, body]);
}

/** One extension: its type and data. */
const extension = (type: number, data: Buffer) =>
  Buffer.concat([Buffer.from([type >> 8, type & 0xff]), vector(2, data)]);

/** A TLS record holding a ClientHello with `extensions`. */
function clientHello(extensions: Buffer[]): Buffer {
  const hello = Buffer.concat([
    Buffer.from([3, 3]),
    Buffer.alloc(32, 7),
    vector(1, Buffer.alloc(32, 1)),
    vector(2, Buffer.from([0x13, 0x01, 0x13, 0x02])),
    vector(1, Buffer.from([0])),
    vector(2, Buffer.concat(extensions)),
  ]);
  const handshake = Buffer.concat([Buffer.from([1]), vector(3, hello)]);
  return Buffer.concat([Buffer.from([22, 3, 1]), vector(2, handshake)]);
}

const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?$/);
const hostname = fc.array(label, { minLength: 2, maxLength: 5 }).map((l) => l.join('.'));
const otherExtension = fc
  .record({ type: fc.integer({ min: 1, max: 65535 }), data: fc.uint8Array({ maxLength: 300 }) })
  .map(({ type, data }) => extension(type, Buffer.from(data)));

describe('the ClientHello reader under hostile bytes', () => {
  it('never throws, whatever follows a handshake record header', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), (bytes) => {
        const record = Buffer.concat([Buffer.from([22, 3, 1]), vector(2, Buffer.from(bytes))]);
        expect(() => clientHelloServerName(record)).not.toThrow();
        expect(() => clientHelloServerName(Buffer.from(bytes))).not.toThrow();
      }),
      fuzzParams(2000),
    );
  });

  it('finds the host_name among any other extensions', () => {
    fc.assert(
      fc.property(
        hostname,
        fc.array(otherExtension, { maxLength: 6 }),
        fc.array(otherExtension, { maxLength: 6 }),
        (name, before, after) => {
          const list = vector(2, Buffer.concat([Buffer.from([0]), vector(2, Buffer.from(name))]));
          const record = clientHello([...before, extension(0, list), ...after]);
          expect(clientHelloServerName(record)).toBe(name);
        },
      ),
      fuzzParams(500),
    );
  });
});
