/** The value kinds a catalogue field can have; every consumer (CEL, JSON, ClickHouse) maps from these. */
export type FieldKind =
  | 'string'
  | 'int64'
  | 'int32'
  | 'bool'
  | 'timestamp'
  | 'string_list_map'
  | 'json'
  | 'string_list';

/** One leaf field of an event kind, derived from the proto descriptors (never typed by hand). */
export interface FieldSpec {
  /** Dotted name as in the event tables, e.g. `conn.client_ip`. */
  name: string;
  /** Path in the event's JSON object, e.g. ['conn', 'client_ip']. */
  path: string[];
  kind: FieldKind;
  /** Marked Filterable: usable in CEL filters (docs/decisions.md#filters). */
  filterable: boolean;
}

/** One ClickHouse column: where its value sits in the envelope and what kind it is. */
export interface ColumnSpec {
  /** Column name, e.g. `conn_client_ip`, `event_id`. */
  name: string;
  /** Path in the envelope object, e.g. ['object', 'conn', 'client_ip']. */
  path: string[];
  kind: FieldKind;
}
