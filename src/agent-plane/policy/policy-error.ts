// Why a Traffic Policy document is refused: raised when it is compiled (an endpoint created or
// updated, an agent binding), never per request. The message says where, as a user would look
// for it: the phase, the rule (index and name), the action (index and type), the field, the
// column in the expression, and the line of the document.

/** Where in a document something is wrong (each part present when known). */
export interface PolicyLocation {
  phase?: string;
  /** 0-based index in its phase, and its name when it has one. */
  rule?: { index: number; name?: string };
  /** 0-based index in its rule, and its type when it has a string one. */
  action?: { index: number; type?: string };
  /** The field within the rule or action, e.g. `expressions[0]` or `config.headers.x-id`. */
  field?: string;
  /** 1-based line and column within the expression or template. */
  position?: { line: number; column: number };
  /** 1-based line of the document where the part starts. */
  line?: number;
  /** 1-based column of the document, when the document itself is wrong (a syntax error). */
  column?: number;
}

/** Stable reasons, for the API's details and tests. */
export type PolicyErrorCode =
  | 'syntax'
  | 'too_large'
  | 'invalid_document'
  | 'unknown_action'
  | 'unsupported_phase'
  | 'invalid_config'
  | 'invalid_expression';

/** A policy that cannot be accepted. */
export class PolicyError extends Error {
  override readonly name = 'PolicyError';
  readonly code: PolicyErrorCode;
  readonly location: PolicyLocation;

  constructor(code: PolicyErrorCode, what: string, location: PolicyLocation = {}) {
    super(`traffic_policy: ${describe(location)}${what}`);
    this.code = code;
    this.location = location;
  }
}

/** "on_http_request rule 0 ("auth") action 1 (basic-auth) config.realm: " — the prefix. */
function describe(where: PolicyLocation): string {
  const parts: string[] = [];
  if (where.phase !== undefined) parts.push(where.phase);
  if (where.rule !== undefined) {
    const name = where.rule.name ? ` (${JSON.stringify(where.rule.name)})` : '';
    parts.push(`rule ${where.rule.index}${name}`);
  }
  if (where.action !== undefined) {
    const type = where.action.type ? ` (${where.action.type})` : '';
    parts.push(`action ${where.action.index}${type}`);
  }
  if (where.field !== undefined) parts.push(where.field);
  if (where.position !== undefined) {
    parts.push(`at line ${where.position.line}, column ${where.position.column}`);
  }
  if (where.line !== undefined) {
    const column = where.column === undefined ? '' : `, column ${where.column}`;
    parts.push(`(document line ${where.line}${column})`);
  }
  return parts.length === 0 ? '' : `${parts.join(' ')}: `;
}
