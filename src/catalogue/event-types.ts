import type { DescMessage } from '@bufbuild/protobuf';
import {
  HttpRequestCompleteSchema,
  TcpConnectionClosedSchema,
} from '../gen/agent_ingress/events/v0/traffic_pb.ts';

/** Traffic event kinds and the proto message holding each one's field table (docs/decisions.md#catalogue). */
export const trafficEventSchemas = {
  'http_request_complete.v0': HttpRequestCompleteSchema,
  'tcp_connection_closed.v0': TcpConnectionClosedSchema,
} as const satisfies Record<string, DescMessage>;

/** The name of a traffic event kind; the only kinds that take filters and field selection. */
export type TrafficEventType = keyof typeof trafficEventSchemas;

/** Every traffic event kind, in the specification's order. */
export const TRAFFIC_EVENT_TYPES: readonly TrafficEventType[] = Object.freeze(
  Object.keys(trafficEventSchemas) as TrafficEventType[],
);

/**
 * Account objects whose create, update and delete emit `<resource>_{created,updated,deleted}.v0`:
 * The specification's audit catalogue plus agent_ingress and endpoint (docs/decisions.md#audit-events).
 */
export const AUDIT_RESOURCES = Object.freeze([
  'agent_ingress',
  'api_key',
  'certificate_authority',
  'domain',
  'endpoint',
  'event_destination',
  'event_subscription',
  'ip_policy',
  'ip_policy_rule',
  'ip_restriction',
  'ssh_certificate_authority',
  'ssh_host_certificate',
  'ssh_public_key',
  'ssh_user_certificate',
  'tcp_address',
  'tls_certificate',
  'tunnel_credential',
] as const);

/** An account object kind that has audit events. */
export type AuditResource = (typeof AUDIT_RESOURCES)[number];

/** The three changes every audit resource reports. */
export const AUDIT_ACTIONS = Object.freeze(['created', 'updated', 'deleted'] as const);

/** A change an audit event reports. */
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Audit events that are not about an account object's change. */
export const AGENT_SESSION_EVENT_TYPES = Object.freeze([
  'agent_session_start.v0',
  'agent_session_stop.v0',
] as const);

/** The audit event kind for one change of one resource, e.g. `api_key_created.v0`. */
export function auditEventType(resource: AuditResource, action: AuditAction): string {
  return `${resource}_${action}.v0`;
}

/** Every audit event kind: the resource changes, then the agent session events. */
export const AUDIT_EVENT_TYPES: readonly string[] = Object.freeze([
  ...AUDIT_RESOURCES.flatMap((r) => AUDIT_ACTIONS.map((a) => auditEventType(r, a))),
  ...AGENT_SESSION_EVENT_TYPES,
]);

/** Every event kind the service emits; subscriptions may only name these. */
export const EVENT_TYPES: readonly string[] = Object.freeze([
  ...TRAFFIC_EVENT_TYPES,
  ...AUDIT_EVENT_TYPES,
]);

const known = new Set(EVENT_TYPES);

/** True for the traffic kinds: only they carry proto payloads, filters and field selection. */
export function isTrafficType(type: string): type is TrafficEventType {
  return Object.hasOwn(trafficEventSchemas, type);
}

/** True for any event kind of the catalogue (traffic or audit). */
export function isKnownEventType(type: string): boolean {
  return known.has(type);
}

/** The proto message describing a traffic kind's payload. */
export function trafficSchema(type: TrafficEventType): DescMessage {
  return trafficEventSchemas[type];
}

/**
 * The synthetic event `POST /event_destinations/{id}/test` sends to one destination. Not in
 * EVENT_TYPES on purpose: no subscription can name it, it only ever goes where it was asked to.
 * It has the audit envelope (object `{destination_id, message}`), so sinks store it like one.
 */
export const DESTINATION_TEST_EVENT_TYPE = 'event_destination_test.v0';
