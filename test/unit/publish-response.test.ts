import { create, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { encodePublishResponse } from '../../src/data-plane/pipeline/publish-response.ts';
import { PublishResponseSchema } from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

describe('encodePublishResponse', () => {
  it('writes the bytes protobuf-es writes, for every size of count and id', () => {
    const cases: [number, string[]][] = [
      [0, []],
      [1, ['ev_01hzzzzzzzzzzzzzzzzzzzzzzz']],
      [3, ['a', '!~x', 'b'.repeat(128)]],
      [300, Array.from({ length: 300 }, (_, i) => `ev_${i}`)],
      [70_000, ['x'.repeat(127)]],
    ];
    for (const [accepted, eventIds] of cases) {
      const expected = toBinary(
        PublishResponseSchema,
        create(PublishResponseSchema, { accepted, eventIds }),
      );
      expect(Buffer.from(encodePublishResponse(accepted, eventIds))).toEqual(Buffer.from(expected));
    }
  });
});
