import {
  auditColumns,
  clickhouseColumns,
  isKnownEventType,
  isTrafficType,
} from '../../catalogue/index.ts';
import type { TableTarget } from './encode.ts';

const AUDIT_TABLE: TableTarget = { table: 'audit_events_v0', columns: [...auditColumns()] };
const trafficTables = new Map<string, TableTarget>();

/**
 * The table of each event type, from the catalogue: one per traffic kind
 * (`http_request_complete.v0` ⇒ `http_request_complete_v0`) and one shared by every audit kind.
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
  return isKnownEventType(eventType) ? AUDIT_TABLE : undefined;
}
