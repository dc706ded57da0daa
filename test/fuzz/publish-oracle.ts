import { fromBinary } from '@bufbuild/protobuf';
import { timestampToJson } from '../../src/data-plane/wire-json/to-json.ts';
import {
  type PublishRequest,
  PublishRequestSchema,
} from '../../src/gen/agent_ingress/ingest/v0/ingest_pb.ts';

// What the ingest fuzz suites hold the service's verdicts to: protobuf-es's reading of the bytes
// and the envelope rules of DESIGN.md/README.

/** The Connect error codes a client's mistake may get; `internal` and `unknown` are bugs. */
export const CLIENT_CODES = ['invalid_argument', 'resource_exhausted', 'unauthenticated'];

const EVENT_ID = /^[\x21-\x7e]{1,128}$/;

/** Whether the service must accept a decoded request: the envelope rules of DESIGN.md/README. */
export function acceptable(request: PublishRequest): boolean {
  return request.events.every(
    (e) =>
      e.accountId !== '' &&
      e.accountId.length <= 128 &&
      e.payload.case !== undefined &&
      (e.eventId === '' || EVENT_ID.test(e.eventId)) &&
      (e.eventTimestamp === undefined || timestampToJson(e.eventTimestamp) !== null),
  );
}

/** protobuf-es's reading of the bytes, or undefined when they are not a PublishRequest. */
export function decode(bytes: Uint8Array): PublishRequest | undefined {
  try {
    return fromBinary(PublishRequestSchema, bytes);
  } catch {
    return undefined;
  }
}
