import {
  SINKS,
  sinkKind,
  type TargetSettings,
  targetKind,
} from '../../../data-plane/sinks/index.ts';
import {
  keepSecrets,
  present,
  type Settings,
  SinkConfigError,
} from '../../../data-plane/sinks/settings.ts';
import type { SinkKind } from '../../../data-plane/sinks/types.ts';
import { AppError } from '../../../shared/errors.ts';
import { checkShape, objectWith } from '../validate.ts';
import { TARGET_SHAPES } from './resource.ts';

// A destination's `target`: exactly one of the kinds this deployment delivers to (src/data-plane/sinks/).
// The request's JSON shape is checked against the sink's settings schema; whether the values
// make a usable target is for the sink's own parser, so the API and the pipeline agree on what
// is valid. Secrets (the schema's writeOnly settings) are stored for the pipeline, never shown:
// responses say `<name>_set` instead.

/** The target kinds this deployment delivers to. */
const SUPPORTED_TARGETS = SINKS.map((sink) => sink.kind);
/** AWS targets and the rest of ngrok's model, recognised for a clear "not supported". */
const UNSUPPORTED_TARGETS = [
  'firehose',
  'kinesis',
  'cloudwatch_logs',
  'datadog',
  'azure_logs_ingestion',
] as const;

/** A target as the request gave it: shape-checked, secrets possibly omitted (kept on PATCH). */
export interface TargetInput {
  sink: SinkKind;
  settings: Settings;
}

function invalid(field: string, message: string): AppError {
  return new AppError('ERR_INVALID_TARGET', message, { field });
}

const TARGET_CODES = { invalid: 'ERR_INVALID_TARGET', missing: 'ERR_INVALID_TARGET' } as const;

/**
 * Reads a request's `target`: unknown keys at any depth are ERR_UNKNOWN_FIELD, the unsupported
 * kinds are ERR_UNSUPPORTED_TARGET, and anything but exactly one supported kind (or a value of
 * the wrong type) is ERR_INVALID_TARGET. Values are checked later by completeTarget.
 */
export function readTarget(value: unknown): TargetInput {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalid('target', '"target" must be an object');
  }
  const body = objectWith(value, [...SUPPORTED_TARGETS, ...UNSUPPORTED_TARGETS], 'target');
  const supported = `supported: ${SUPPORTED_TARGETS.join(', ')}`;
  for (const kind of UNSUPPORTED_TARGETS) {
    if (body[kind] !== undefined) {
      throw new AppError(
        'ERR_UNSUPPORTED_TARGET',
        `target "${kind}" is not supported by this deployment; ${supported}`,
        { field: `target.${kind}` },
      );
    }
  }
  const kinds = SUPPORTED_TARGETS.filter((kind) => body[kind] !== undefined);
  if (kinds.length !== 1) {
    throw invalid(
      'target',
      kinds.length === 0
        ? `"target" must name exactly one kind of target; ${supported}`
        : `"target" must name exactly one kind of target, got ${kinds.join(' and ')}`,
    );
  }
  const kind = kinds[0];
  checkShape(body[kind], TARGET_SHAPES[kind], `target.${kind}`, TARGET_CODES);
  return { sink: sinkKind(kind) as SinkKind, settings: body[kind] as Settings };
}

// Runs the sink's own parser: its SinkConfigError names the bad setting and becomes a 400; any
// other exception is a bug and stays one.
function check(sink: SinkKind, settings: Settings, accountDir: string): void {
  try {
    sink.parse(settings, { accountDir });
  } catch (error) {
    if (!(error instanceof SinkConfigError)) throw error;
    const field = `target.${sink.kind}${error.setting === undefined ? '' : `.${error.setting}`}`;
    throw invalid(field, error.message);
  }
}

/**
 * The target to store: a secret the request omitted is kept from `previous` when the target
 * kind is unchanged (so a PATCH need not resend it); then the sink's parser checks the values.
 * A file path names a directory of its own inside `accountDir` (DATA_DIR/events/<account_id>).
 */
export function completeTarget(
  input: TargetInput,
  previous: TargetSettings | undefined,
  accountDir: string,
): TargetSettings {
  const { sink } = input;
  const settings = keepSecrets(sink.settings, input.settings, previous?.[sink.kind]);
  check(sink, settings, accountDir);
  return { [sink.kind]: sink.canonical?.(settings) ?? settings };
}

/**
 * The target as responses and audit events show it: secrets replaced by `<name>_set`, keys in
 * the schema's order (the store's jsonb does not keep the order they were given in).
 */
export function presentTarget(target: TargetSettings) {
  const { sink, settings } = targetKind(target);
  return { [sink.kind]: present(sink.settings, settings) };
}
