import { normalize } from 'node:path';
import { AppError } from '../../errors.ts';
import { parseClickHouseSinkConfig } from '../../sinks/clickhouse/config.ts';
import { parseFileSinkConfig } from '../../sinks/file/config.ts';
import { parseKafkaSinkConfig } from '../../sinks/kafka/config.ts';
import type {
  ClickHouseTarget,
  DestinationTarget,
  FileTarget,
  KafkaTarget,
} from '../../store/event-destinations.ts';
import { TARGET_SHAPES } from '../resources.ts';
import { checkShape, objectWith } from '../validate.ts';

// A destination's `target`: exactly one of the kinds this deployment delivers to. The request's
// JSON shape (known keys, value types) is checked here; whether the values make a usable target
// is for each sink's own config parser, so the API and the pipeline agree on what is valid.
// Secrets (kafka.sasl.password, clickhouse.password) are write-only: stored for the pipeline,
// never shown; responses say `password_set` instead.

/** The target kinds this deployment delivers to. */
const SUPPORTED_TARGETS = ['file', 'kafka', 'clickhouse'] as const;
/** SPEC.md's AWS targets and the rest of ngrok's model, recognised for a clear "not supported". */
const UNSUPPORTED_TARGETS = [
  'firehose',
  'kinesis',
  'cloudwatch_logs',
  'datadog',
  'azure_logs_ingestion',
] as const;

type Sasl = NonNullable<KafkaTarget['sasl']>;

/** A Kafka target as a request gives it: the SASL password may be omitted (kept on PATCH). */
type KafkaInput = Omit<KafkaTarget, 'sasl'> & {
  sasl?: Omit<Sasl, 'password'> & { password?: string };
};

/** A target as the request gave it: shape-checked, secrets possibly omitted (kept on PATCH). */
export type TargetInput =
  | { file: FileTarget }
  | { kafka: KafkaInput }
  | { clickhouse: ClickHouseTarget };

function invalid(field: string, message: string): AppError {
  return new AppError('ERR_INVALID_TARGET', message, { field });
}

const TARGET_CODES = { invalid: 'ERR_INVALID_TARGET', missing: 'ERR_INVALID_TARGET' } as const;

// Keys whose value is undefined are left out, so stored targets hold only what was given.
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Reads a request's `target`: unknown keys at any depth are ERR_UNKNOWN_FIELD, SPEC.md's AWS
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
  return { [kind]: body[kind] } as TargetInput;
}

/** The sink parsers' setting names where they differ from the API's. */
const FILE_SETTING_NAMES: Record<string, string> = {
  maxFileBytes: 'max_file_bytes',
  maxFileAgeMs: 'max_file_age_ms',
};

// Runs a sink's own config parser; its message names the bad setting.
function checkWith(kind: string, parse: () => unknown, rename: Record<string, string> = {}) {
  try {
    parse();
  } catch (error) {
    let message = error instanceof Error ? error.message : String(error);
    for (const [from, to] of Object.entries(rename)) message = message.replaceAll(from, to);
    throw invalid(`target.${kind}`, message);
  }
}

/**
 * The target to store: a secret the request omitted is kept from `previous` when the target
 * kind is unchanged (so a PATCH need not resend it); then each sink's parser checks the values.
 * A file path names a directory of its own inside `accountDir` (DATA_DIR/events/<account_id>).
 */
export function completeTarget(
  input: TargetInput,
  previous: DestinationTarget | undefined,
  accountDir: string,
): DestinationTarget {
  if ('file' in input) {
    const file = input.file;
    checkWith(
      'file',
      () =>
        parseFileSinkConfig(
          {
            path: file.path,
            maxFileBytes: file.max_file_bytes,
            maxFileAgeMs: file.max_file_age_ms,
          },
          { baseDir: accountDir },
        ),
      FILE_SETTING_NAMES,
    );
    // One spelling per directory ("a/./b/" is "a/b"), so the store can keep paths unique.
    const path = normalize(file.path).replace(/\/+$/, '');
    if (path === '.') {
      throw invalid(
        'target.file.path',
        "file destination: path must name a directory inside the account's directory, not the directory itself",
      );
    }
    return { file: { ...file, path } };
  }
  if ('kafka' in input) {
    const { sasl, ...rest } = input.kafka;
    let kafka: KafkaTarget = rest;
    if (sasl !== undefined) {
      const kept = previous !== undefined && 'kafka' in previous ? previous.kafka.sasl : undefined;
      const password = sasl.password ?? kept?.password;
      if (password === undefined) {
        throw invalid('target.kafka.sasl.password', '"target.kafka.sasl.password" is required');
      }
      kafka = { ...rest, sasl: { ...sasl, password } };
    }
    checkWith('kafka', () => parseKafkaSinkConfig(kafka));
    return { kafka: defined(kafka) };
  }
  const kept =
    previous !== undefined && 'clickhouse' in previous ? previous.clickhouse.password : undefined;
  const clickhouse = defined({ ...input.clickhouse, password: input.clickhouse.password ?? kept });
  checkWith('clickhouse', () => parseClickHouseSinkConfig(clickhouse));
  return { clickhouse };
}

/**
 * The target as responses and audit events show it: secrets replaced by `password_set`, keys in
 * a fixed order (the store's jsonb does not keep the order they were given in).
 */
export function presentTarget(target: DestinationTarget) {
  if ('file' in target) {
    const { path, max_file_bytes, max_file_age_ms } = target.file;
    return { file: defined({ path, max_file_bytes, max_file_age_ms }) };
  }
  if ('kafka' in target) {
    const { brokers, topic, client_id, compression, sasl, tls } = target.kafka;
    const shownSasl = sasl && {
      mechanism: sasl.mechanism,
      username: sasl.username,
      password_set: true,
    };
    return { kafka: defined({ brokers, topic, client_id, compression, sasl: shownSasl, tls }) };
  }
  const { url, database, table_prefix, user, password } = target.clickhouse;
  const password_set = password !== undefined && password !== '';
  return { clickhouse: defined({ url, database, table_prefix, user, password_set }) };
}
