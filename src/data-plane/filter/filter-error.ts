// Errors of subscription filters and field selections. They are raised when a subscription is
// created or updated (never per event), and the API turns them into a 400 whose message an API
// user can act on: what is wrong, where, and what is allowed instead.

/** Where in the expression an error sits: 1-based line and column, 0-based offset. */
export interface SourcePosition {
  line: number;
  column: number;
  offset: number;
}

/** Stable reasons a filter is rejected, for the API's error details and for tests. */
export type FilterErrorCode =
  | 'unsupported_event_type'
  | 'too_long'
  | 'too_complex'
  | 'syntax'
  | 'unknown_field'
  | 'not_filterable'
  | 'type'
  | 'not_bool'
  | 'invalid_regex';

/** A CEL filter that cannot be accepted for a subscription. */
export class FilterError extends Error {
  override readonly name = 'FilterError';
  readonly code: FilterErrorCode;
  readonly position: SourcePosition | undefined;
  /** The fields the filter may reference (dotted names; also reachable as `ev.<name>`). */
  readonly allowedFields: readonly string[];

  constructor(
    code: FilterErrorCode,
    message: string,
    allowedFields: readonly string[],
    position?: SourcePosition,
  ) {
    super(message);
    this.code = code;
    this.allowedFields = allowedFields;
    this.position = position;
  }
}

/** A `fields` selection naming something the event kind does not have. */
export class FieldSelectionError extends Error {
  override readonly name = 'FieldSelectionError';
  /** The names that would have been accepted: every leaf and group of the kind. */
  readonly validNames: readonly string[];
  /** The offending names, in the order given. */
  readonly invalidNames: readonly string[];

  constructor(message: string, invalidNames: readonly string[], validNames: readonly string[]) {
    super(message);
    this.invalidNames = invalidNames;
    this.validNames = validNames;
  }
}

/** Converts an offset in the expression to a 1-based line and column. */
export function positionAt(expression: string, offset: number): SourcePosition {
  const clamped = Math.max(0, Math.min(offset, expression.length));
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < clamped; i++) {
    if (expression.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: clamped - lineStart + 1, offset: clamped };
}

/** "at column 7", or "at line 2, column 3" when the expression spans several lines. */
export function describePosition(expression: string, pos: SourcePosition): string {
  return expression.includes('\n')
    ? `at line ${pos.line}, column ${pos.column}`
    : `at column ${pos.column}`;
}
