import {
  EVENT_TYPES,
  isKnownEventType,
  isTrafficType,
  TRAFFIC_EVENT_TYPES,
} from '../../../catalogue/index.ts';
import {
  compileFilter,
  compileProjection,
  FieldSelectionError,
  FilterError,
} from '../../../data-plane/filter/index.ts';
import { AppError } from '../../../shared/errors.ts';
import type { EventSourceRow } from '../../../store/event-subscriptions.ts';
import { checkShape, FIELD_CODES } from '../validate.ts';
import { SOURCE_SCHEMA, SOURCE_UPDATE_SCHEMA } from './resource.ts';

// A subscription's sources: which event kinds it delivers, each with a CEL filter and a field
// selection (traffic kinds only). Both are compiled here, when the subscription is written, so
// a bad expression is a 400 naming its position and the allowed fields, never an event-time
// failure (docs/decisions.md#filters, #field-selection). Its redaction applies to the one kind
// that carries headers and URLs (docs/security.md#redacted).

/**
 * One source as written: '' filter = every event, [] fields = every field, rate 1 = all kept,
 * [] redact_headers and keep_credentials false = the credentials redacted, nothing more.
 */
export interface SourceInput {
  type: string;
  filter: string;
  fields: string[];
  sample_rate: number;
  /** Lower-case, each once. */
  redact_headers: string[];
  keep_credentials: boolean;
}

/** An event source as the API shows it: its type, filter, field selection, sample rate, redaction, URI. */
export function presentSource(
  source: Pick<
    EventSourceRow,
    | 'subscription_id'
    | 'type'
    | 'filter'
    | 'fields'
    | 'sample_rate'
    | 'redact_headers'
    | 'keep_credentials'
  >,
  publicUrl: string,
) {
  const { subscription_id: id, type, filter, fields, sample_rate } = source;
  const { redact_headers, keep_credentials } = source;
  const uri = `${publicUrl}/event_subscriptions/${id}/sources/${type}`;
  return { type, filter, fields, sample_rate, redact_headers, keep_credentials, uri };
}

/** The kind whose deliveries carry headers and URLs, the only one a source's redaction concerns. */
const REDACTED_TYPE = 'http_request_complete.v0';

function unknownEventType(type: string, field: string): AppError {
  const versioned = `${type}.v0`;
  const hint = isKnownEventType(versioned) ? ` (did you mean "${versioned}"?)` : '';
  const examples = [...TRAFFIC_EVENT_TYPES, 'api_key_created.v0', 'agent_session_start.v0'];
  return new AppError(
    'ERR_UNKNOWN_EVENT_TYPE',
    `unknown event type "${type}"${hint}; valid types include ${examples.join(', ')} (${EVENT_TYPES.length} in all)`,
    { field, type },
  );
}

// The dotted name of `key` inside the object at `where` ('' = the request body itself).
function at(where: string, key: string): string {
  return where === '' ? key : `${where}.${key}`;
}

/**
 * Checks a source's filter and field selection against the catalogue by compiling them. Audit
 * kinds take neither (the compilers' own messages say so when one is given).
 */
export function checkSource(source: SourceInput, where: string): void {
  const traffic = isTrafficType(source.type);
  checkSampleRate(source, traffic, where);
  checkRedaction(source, where);
  if (traffic || source.filter !== '') {
    try {
      compileFilter(source.type, source.filter);
    } catch (error) {
      if (!(error instanceof FilterError)) throw error;
      throw new AppError('ERR_INVALID_FILTER', error.message, {
        field: at(where, 'filter'),
        type: source.type,
        reason: error.code,
        ...(error.position === undefined ? {} : { position: error.position }),
        allowed_fields: error.allowedFields,
      });
    }
  }
  if (traffic || source.fields.length > 0) {
    try {
      compileProjection(source.type, source.fields);
    } catch (error) {
      if (!(error instanceof FieldSelectionError)) throw error;
      throw new AppError('ERR_INVALID_FIELDS', error.message, {
        field: at(where, 'fields'),
        type: source.type,
        invalid_fields: error.invalidNames,
      });
    }
  }
}

/** A rate in (0, 1]; below 1 only for traffic kinds (audit events are few and all kept). */
function checkSampleRate(source: SourceInput, traffic: boolean, where: string): void {
  const rate = source.sample_rate;
  if (!(Number.isFinite(rate) && rate > 0 && rate <= 1)) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"sample_rate" must be a number greater than 0 and at most 1 (1: every event), got ${rate}`,
      { field: at(where, 'sample_rate'), type: source.type },
    );
  }
  if (rate < 1 && !traffic) {
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"sample_rate" applies to traffic events only; ${source.type} events are all delivered`,
      { field: at(where, 'sample_rate'), type: source.type },
    );
  }
}

/** Header names as stored: lower-case (they are case-insensitive), each once. */
function headerNames(names: string[]): string[] {
  return [...new Set(names.map((name) => name.toLowerCase()))];
}

/** Redaction settings only where there are headers and URLs. */
function checkRedaction(source: SourceInput, where: string): void {
  if (source.type === REDACTED_TYPE) return;
  for (const field of ['redact_headers', 'keep_credentials'] as const) {
    const value = source[field];
    if (value === false || (Array.isArray(value) && value.length === 0)) continue;
    throw new AppError(
      'ERR_INVALID_FIELD',
      `"${field}" applies to ${REDACTED_TYPE} sources only; ${source.type} events carry no headers or URLs`,
      { field: at(where, field), type: source.type },
    );
  }
}

/**
 * Reads and checks one source `{type, filter?, fields?, sample_rate?, redact_headers?,
 * keep_credentials?}`; `where` locates it in
 * messages ('' when the source is the whole request body).
 */
export function readSource(value: unknown, where: string): SourceInput {
  checkShape(value, SOURCE_SCHEMA, where, FIELD_CODES);
  const body = value as Partial<SourceInput>;
  const type = body.type!;
  if (!isKnownEventType(type)) throw unknownEventType(type, at(where, 'type'));
  const source = {
    type,
    filter: body.filter ?? '',
    fields: body.fields ?? [],
    sample_rate: body.sample_rate ?? 1,
    redact_headers: headerNames(body.redact_headers ?? []),
    keep_credentials: body.keep_credentials ?? false,
  };
  checkSource(source, where);
  return source;
}

/** Reads a request's `sources` (a list, as declared): each source checked, each event kind at most once. */
export function readSources(value: unknown[]): SourceInput[] {
  const seen = new Set<string>();
  return value.map((item, index) => {
    const source = readSource(item, `sources[${index}]`);
    if (seen.has(source.type)) {
      throw new AppError(
        'ERR_INVALID_FIELD',
        `"sources" names the event type "${source.type}" twice; a subscription has one source per type`,
        { field: `sources[${index}].type`, type: source.type },
      );
    }
    seen.add(source.type);
    return source;
  });
}

/** What PATCH of one source may change. */
export type SourceChanges = Partial<Omit<SourceInput, 'type'>>;

/** Reads a PATCH of one source (any field but `type`); checked later by its type. */
export function readSourceChanges(value: unknown): SourceChanges {
  if (value !== null && typeof value === 'object' && 'type' in value) {
    throw new AppError(
      'ERR_FIELD_NOT_UPDATABLE',
      '"type" of a source cannot be changed; add a source of the new type and delete this one',
      { field: 'type' },
    );
  }
  checkShape(value, SOURCE_UPDATE_SCHEMA, '', FIELD_CODES);
  const changes = value as SourceChanges;
  if (changes.redact_headers === undefined) return changes;
  return { ...changes, redact_headers: headerNames(changes.redact_headers) };
}
