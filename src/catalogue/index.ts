// The event catalogue, derived from the proto descriptors in src/gen (docs/decisions.md#catalogue): the one
// place the rest of the service learns event kinds, fields, JSON shape and columns from.

export { auditColumns, clickhouseColumns } from './columns.ts';
export {
  AGENT_SESSION_EVENT_TYPES,
  AUDIT_ACTIONS,
  AUDIT_EVENT_TYPES,
  AUDIT_RESOURCES,
  type AuditAction,
  type AuditResource,
  auditEventType,
  EVENT_TYPES,
  isKnownEventType,
  isTrafficType,
  TRAFFIC_EVENT_TYPES,
  type TrafficEventType,
  trafficEventSchemas,
  trafficSchema,
} from './event-types.ts';
export { fieldKindOf, filterableFields, groupNames, trafficFields } from './fields.ts';
export type { ColumnSpec, FieldKind, FieldSpec } from './types.ts';
