import type { ASTNode } from '@marcbachmann/cel-js';
import type { CelEnvironment } from './cel-environment.ts';
import { describePosition, FilterError, positionAt } from './filter-error.ts';

// Turns cel-js's parse and type errors into messages an API user can act on: the field they
// wrote in full (`ev.http.request.method`, not cel-js's "No such key: http"), whether it exists
// but is not filterable, where it is, and which fields are allowed.

interface CelError {
  name?: string;
  code?: string;
  summary?: string;
  message?: string;
  range?: { start: number; end: number };
}

/** Builds a FilterError whose message ends with its position (and the filterable fields). */
export function filterError(
  fe: CelEnvironment,
  expression: string,
  code: FilterError['code'],
  what: string,
  offset?: number,
  listFields = false,
): FilterError {
  const position = offset === undefined ? undefined : positionAt(expression, offset);
  const where = position ? ` ${describePosition(expression, position)}` : '';
  const noun = fe.label === 'filter' ? 'filterable fields' : 'variables';
  const fields = listFields ? `; ${noun}: ${fe.allowedFields.join(', ')}` : '';
  return new FilterError(code, `${fe.label}: ${what}${where}${fields}`, fe.allowedFields, position);
}

/** The FilterError for an error thrown by cel-js's parser or returned by its type check. */
export function fromCelError(
  fe: CelEnvironment,
  expression: string,
  err: unknown,
  ast?: ASTNode,
): FilterError {
  const e = (err ?? {}) as CelError;
  const offset = e.range?.start;
  const summary = e.summary ?? e.message ?? String(err);
  if (e.name === 'ParseError') {
    const code = e.code === 'limit_exceeded' ? 'too_complex' : 'syntax';
    const what =
      code === 'too_complex'
        ? `expression is too complex (${summary})`
        : `syntax error: ${summary}`;
    return filterError(fe, expression, code, what, offset);
  }
  if (e.name === 'TypeError') {
    if (
      (e.code === 'no_such_key' || e.code === 'unknown_variable') &&
      ast &&
      offset !== undefined
    ) {
      const ref = fieldReferenceAt(ast, offset);
      if (ref) return unknownField(fe, expression, ref.name, ref.start);
    }
    return filterError(
      fe,
      expression,
      'type',
      `type error: ${summary}`,
      offset,
      e.code === 'no_such_key',
    );
  }
  // Anything else came from the type check (it alone passes the AST): a checker failure, such as
  // cel-js's overload ambiguity on `[].all(e, e > 0)`, is a type error, not a syntax error.
  if (ast !== undefined)
    return filterError(fe, expression, 'type', `type error: ${summary}`, offset);
  return filterError(fe, expression, 'syntax', summary, offset);
}

/** The error for a field reference the environment does not declare (unknown or not filterable). */
export function unknownField(
  fe: CelEnvironment,
  expression: string,
  written: string,
  offset: number,
) {
  const alias = fe.rootAlias === undefined ? undefined : `${fe.rootAlias}.`;
  const name =
    alias !== undefined && written.startsWith(alias) ? written.slice(alias.length) : written;
  const why = fe.unreadable(name, written);
  if (why !== undefined) {
    return filterError(fe, expression, 'not_filterable', why, offset, true);
  }
  const hint = fe.allowedFields.find((f) => f.endsWith(`.${name}`));
  const what = `unknown field '${written}'${hint ? ` (did you mean '${hint}'?)` : ''}`;
  return filterError(fe, expression, 'unknown_field', what, offset, true);
}

interface FieldReference {
  name: string;
  start: number;
}

// The dotted name of a selection chain (`ev.conn.x`, `conn["x"]`), or undefined for anything
// that is not a plain chain of field selections on a variable.
function chainName(node: ASTNode): string | undefined {
  switch (node.op) {
    case 'id':
      return node.args;
    case '.':
    case '.?': {
      const left = chainName(node.args[0]);
      return left === undefined ? undefined : `${left}.${node.args[1]}`;
    }
    case '[]': {
      const key = node.args[1];
      if (key.op !== 'value' || typeof key.args !== 'string') return undefined;
      const left = chainName(node.args[0]);
      return left === undefined ? undefined : `${left}.${key.args}`;
    }
    default:
      return undefined;
  }
}

function chainStart(node: ASTNode): number {
  let n = node;
  while (n.op === '.' || n.op === '.?' || n.op === '[]') n = n.args[0];
  return n.range.start;
}

/** The outermost field chain that contains the offset: what the user wrote, in full. */
export function fieldReferenceAt(ast: ASTNode, offset: number): FieldReference | undefined {
  let found: FieldReference | undefined;
  const visit = (v: unknown): void => {
    if (found || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (const item of v) visit(item);
      return;
    }
    const node = v as ASTNode;
    if (typeof node.op !== 'string') return;
    const name = chainName(node);
    if (name !== undefined) {
      const start = chainStart(node);
      if (offset >= start && offset <= node.range.end) found = { name, start };
      return;
    }
    visit(node.args);
  };
  visit(ast);
  return found;
}
