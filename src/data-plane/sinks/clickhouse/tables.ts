import { DESTINATION_TEST_EVENT_TYPE } from '../../../catalogue/event-types.ts';
import {
  auditColumns,
  clickhouseColumns,
  isKnownEventType,
  isTrafficType,
} from '../../../catalogue/index.ts';
import type { TableTarget } from './encode.ts';

const AUDIT_TABLE: TableTarget = { table: 'audit_events_v0', columns: [...auditColumns()] };
const trafficTables = new Map<string, TableTarget>();

/**
 * The table of each event type, from the catalogue: one per traffic kind
 * (`http_request_complete.v0` ⇒ `http_request_complete_v0`) and one shared by every audit kind.
 * A destination's test event has the audit envelope and lands in the audit table too: without a
 * table it would be a permanent error and park the destination it was meant to check.
 */
export function tableForEventType(eventType: string): TableTarget | undefined {
  if (isTrafficType(eventType)) {
    let target = trafficTables.get(eventType);
    if (target === undefined) {
      target = { table: eventType.replace('.', '_'), columns: [...clickhouseColumns(eventType)] };
      trafficTables.set(eventType, target);
    }
    return target;
  }
  const audit = isKnownEventType(eventType) || eventType === DESTINATION_TEST_EVENT_TYPE;
  return audit ? AUDIT_TABLE : undefined;
}
