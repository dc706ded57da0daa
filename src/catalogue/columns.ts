import type { TrafficEventType } from './event-types.ts';
import { trafficFields } from './fields.ts';
import type { ColumnSpec } from './types.ts';

// ClickHouse columns follow the envelope (docs/decisions.md#envelope): the envelope
// fields first, then one column per catalogue leaf, read from `object`.

/** The envelope columns every event table starts with. */
const ENVELOPE_COLUMNS: readonly ColumnSpec[] = Object.freeze([
  column('event_id', ['event_id'], 'string'),
  column('event_type', ['event_type'], 'string'),
  column('event_timestamp', ['event_timestamp'], 'timestamp'),
  column('account_id', ['account_id'], 'string'),
]);

function column(name: string, path: string[], kind: ColumnSpec['kind']): ColumnSpec {
  return Object.freeze({ name, path: Object.freeze(path) as string[], kind });
}

const trafficCache = new Map<TrafficEventType, readonly ColumnSpec[]>();

/** The columns of a traffic kind's table: envelope, then one per leaf (`conn.client_ip` ⇒ `conn_client_ip`). */
export function clickhouseColumns(type: TrafficEventType): readonly ColumnSpec[] {
  let cols = trafficCache.get(type);
  if (!cols) {
    cols = Object.freeze([
      ...ENVELOPE_COLUMNS,
      ...trafficFields(type).map((f) =>
        column(f.name.replaceAll('.', '_'), ['object', ...f.path], f.kind),
      ),
    ]);
    trafficCache.set(type, cols);
  }
  return cols;
}

const AUDIT_COLUMNS: readonly ColumnSpec[] = Object.freeze([
  ...ENVELOPE_COLUMNS,
  column('principal_id', ['principal', 'id'], 'string'),
  column('object_id', ['object', 'id'], 'string'),
  column('object', ['object'], 'json'),
]);

/**
 * The columns of the single audit table shared by every audit kind: the audited object is kept
 * whole as JSON, since each resource has its own field set.
 */
export function auditColumns(): readonly ColumnSpec[] {
  return AUDIT_COLUMNS;
}
