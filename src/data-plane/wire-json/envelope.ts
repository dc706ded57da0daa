import { type DescField, type DescMessage, ScalarType } from '@bufbuild/protobuf';
import { type TrafficEventType, trafficEventSchemas } from '../../catalogue/event-types.ts';
import { fieldKindOf } from '../../catalogue/fields.ts';
import { EventSchema, PublishRequestSchema } from '../../gen/agent_ingress/ingest/v0/ingest_pb.ts';
import { fieldNamed } from './wire-reader.ts';

// The envelope of a PublishRequest as the wire readers (wire-decode.ts, request-text.ts) read
// it: the repeated `events`, and per Event its account_id, event_id, event_timestamp and the
// payload oneof, whose members are matched to the traffic kinds by their message type. Checked
// once against the descriptors, so a change to ingest.proto fails loudly here, not silently in
// a reader.

export interface Envelope {
  events: DescField;
  accountId: DescField;
  eventId: DescField;
  eventTimestamp: DescField & { message: DescMessage };
  /** The payload oneof's members, each with its traffic kind. */
  payloads: { field: DescField & { message: DescMessage }; type: TrafficEventType }[];
}

let envelope: Envelope | undefined;

/** The envelope's fields; throws if PublishRequest/Event no longer have the shape read. */
export function requestEnvelope(): Envelope {
  envelope ??= checkEnvelope();
  return envelope;
}

function checkEnvelope(): Envelope {
  const events = fieldNamed(PublishRequestSchema, 'events');
  const accountId = fieldNamed(EventSchema, 'account_id');
  const eventId = fieldNamed(EventSchema, 'event_id');
  const eventTimestamp = fieldNamed(EventSchema, 'event_timestamp');
  const payload = EventSchema.oneofs.find((o) => o.name === 'payload');
  if (
    events.fieldKind !== 'list' ||
    events.listKind !== 'message' ||
    events.message !== EventSchema ||
    accountId.fieldKind !== 'scalar' ||
    accountId.scalar !== ScalarType.STRING ||
    eventId.fieldKind !== 'scalar' ||
    eventId.scalar !== ScalarType.STRING ||
    eventTimestamp.fieldKind !== 'message' ||
    fieldKindOf(eventTimestamp) !== 'timestamp' ||
    payload === undefined
  ) {
    throw new Error('envelope: PublishRequest/Event no longer have the envelope read here');
  }
  const known = new Set<DescField>([accountId, eventId, eventTimestamp, ...payload.fields]);
  const extra = EventSchema.fields.find((f) => !known.has(f));
  if (extra !== undefined) {
    throw new Error(`envelope: Event.${extra.name} is not read; add it to the wire readers`);
  }
  const payloads = payload.fields.map((member) => {
    const type = (Object.keys(trafficEventSchemas) as TrafficEventType[]).find(
      (t) => member.fieldKind === 'message' && trafficEventSchemas[t] === member.message,
    );
    if (type === undefined || member.fieldKind !== 'message') {
      throw new Error(`envelope: Event.${member.name} is not a traffic kind's payload`);
    }
    return { field: member, type };
  });
  return { events, accountId, eventId, eventTimestamp, payloads };
}
