import type { Kind } from './kinds.ts';
import { type Plane, SETTINGS } from './settings.ts';

// The settings for people, from the same table the parser reads: `npm start -- --help` and
// docs/configuration.md (written by `npm run docs:config`; a test fails when it differs).

interface Described {
  env: string;
  planes: readonly Plane[];
  kind: Kind<unknown>;
  meaning: string;
}

const SETTING_LIST: Described[] = Object.values(SETTINGS);

/** The page's and the help's sections: settings several planes read first, then each plane's. */
const SECTIONS: { title: string; holds: (planes: readonly Plane[]) => boolean }[] = [
  { title: 'Shared by the planes', holds: (planes) => planes.length > 1 },
  { title: 'Data plane', holds: (planes) => planes.length === 1 && planes[0] === 'data' },
  { title: 'Control plane', holds: (planes) => planes.length === 1 && planes[0] === 'control' },
  { title: 'Agent plane', holds: (planes) => planes.length === 1 && planes[0] === 'agent' },
];

function sections(): { title: string; settings: Described[] }[] {
  return SECTIONS.map(({ title, holds }) => ({
    title,
    settings: SETTING_LIST.filter((setting) => holds(setting.planes)),
  }));
}

/** "the data and control planes" */
function readBy(planes: readonly Plane[]): string {
  if (planes.length === 3) return 'every plane';
  return `the ${planes.slice(0, -1).join(', ')} and ${planes.at(-1)} planes`;
}

/** The default as the variable carries it, with what it means for people: "4194304 (4 MiB)". */
function defaultText(
  { default: value, note }: Kind<unknown>,
  code: (text: string) => string,
  unset: string,
) {
  const shown = value === undefined ? unset : code(value);
  return note === undefined ? shown : `${shown} (${note})`;
}

/** Words wrapped to `width` columns, each line indented by `indent`. */
function wrap(text: string, indent: string, width = 100): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  return [...lines, indent + line];
}

/** What `npm start -- --help` prints: every setting with its default and meaning. */
export function helpText(): string {
  const lines = [
    'Usage: npm start              start the service (node src/main.ts)',
    '       npm start -- --help    print this and exit',
    '',
    'Every setting is an environment variable; a wrong value stops the start with one line on',
    'stderr and exit code 78. The same list, with more words: docs/configuration.md',
  ];
  for (const { title, settings } of sections()) {
    lines.push('', `${title}:`);
    for (const { env, kind, meaning, planes } of settings) {
      const shared = planes.length > 1 ? `; read by ${readBy(planes)}` : '';
      lines.push(
        `  ${env}  default ${defaultText(kind, (text) => text, 'unset')}`,
        ...wrap(`${meaning} Accepts ${kind.accepts}${shared}.`.replaceAll('`', ''), '      '),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

/** A table cell: pipes escaped, so `region=ip|ip` stays one cell. */
const cell = (text: string) => text.replaceAll('|', '\\|');

const PAGE_HEADER = `# Configuration

<!-- Generated from src/config/settings.ts by \`npm run docs:config\`; edit the table there, not
this page (test/unit/configuration-page.test.ts fails when the two differ). -->

Every setting is an environment variable, read once at start. A value the service cannot use stops
the start with one line on stderr naming the variable (\`invalid configuration: PORT must be a
whole number, got "eighty"\`) and exit code 78; so does a setting found wrong only at start (a
\`DATABASE_URL\` that does not connect, a shared store without \`SECRETS_KEY\`, a port another
process holds). Unset and empty are the same, except for lists, where empty means none.
\`npm start -- --help\` prints this list.

**Adding a setting** is one entry in \`SETTINGS\` (\`src/config/settings.ts\`): the name of its
\`Config\` field, its variable (named after the field: \`AGENT_PORT\` for \`agentPort\`; \`_MS\` for
milliseconds, \`_BYTES\` for bytes), the planes that read it, its kind with default and bounds
(\`src/config/kinds.ts\`: \`ms\`, \`bytes\`, \`count\`, \`switchablePort\`, \`optional\`, \`list\`, …),
and its meaning in one sentence. The \`Config\` type, the parser, \`--help\` and this page follow;
run \`npm run docs:config\` to write the page again.
`;

/** docs/configuration.md, every setting by plane. */
export function configurationPage(): string {
  const parts = [PAGE_HEADER];
  for (const { title, settings } of sections()) {
    const shared = title === SECTIONS[0].title;
    parts.push(
      `## ${title}\n`,
      shared
        ? '| Variable | Default | Accepts | Read by | Meaning |\n|---|---|---|---|---|'
        : '| Variable | Default | Accepts | Meaning |\n|---|---|---|---|',
    );
    const rows = settings.map(({ env, kind, meaning, planes }) => {
      const cells = [
        `\`${env}\``,
        defaultText(kind, (text) => `\`${text}\``, '—'),
        kind.accepts,
        ...(shared ? [readBy(planes)] : []),
        meaning,
      ];
      return `| ${cells.map(cell).join(' | ')} |`;
    });
    parts.push(`${rows.join('\n')}\n`);
  }
  return parts.join('\n');
}
