import { SINKS } from '../../../data-plane/sinks/index.ts';
import type { JsonSchema, Resource } from '../resource-types.ts';
import { COMMON, describedBy, object } from '../resources.ts';

/** The target kinds this deployment delivers to: each sink's own settings schema. */
export const TARGET_SHAPES: Record<string, JsonSchema> = Object.fromEntries(
  SINKS.map((sink) => [sink.kind, { ...sink.settings, description: sink.doc }]),
);

/** Event destinations: where the pipeline delivers events. */
export const EVENT_DESTINATIONS: Resource = {
  path: 'event_destinations',
  title: 'event destination',
  idPrefix: 'ed',
  listKey: 'event_destinations',
  audit: 'event_destination',
  example: ({ tag }) => ({ description: tag, target: { file: { path: `events-${tag}` } } }),
  fields: {
    ...COMMON,
    ...describedBy('maxBytes'),
    format: { schema: { enum: ['JSON', 'json'] }, doc: 'the only format is JSON (any case)' },
    target: {
      schema: {
        ...object(TARGET_SHAPES),
        minProperties: 1,
        maxProperties: 1,
        description: 'exactly one of file, kafka, clickhouse; passwords are write-only',
      },
      required: true,
      checkedByRoute: true,
      doc: 'where events go: file, kafka or clickhouse',
    },
    health: {
      schema: { type: 'object' },
      serverAssigned: true,
      sometimes: true,
      doc: 'delivery health, when the pipeline reports it',
    },
  },
  deleteQuery: { discard_backlog: 'true: drop the events still waiting in its spool' },
  extraRoutes: [
    {
      name: 'test',
      method: 'POST',
      path: '/{id}/test',
      summary: 'Send one test event through the pipeline',
      status: 200,
      response: { type: 'object' },
    },
  ],
};
