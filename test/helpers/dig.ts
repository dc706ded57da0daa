import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What `dig` printed: the status and the answer/authority records as `name ttl type data`. */
export interface DigResult {
  status: string;
  aa: boolean;
  answers: { name: string; type: string; data: string }[];
  authority: { name: string; type: string; data: string }[];
}

function section(output: string, title: string) {
  const match = new RegExp(`;; ${title} SECTION:\\n([\\s\\S]*?)(?:\\n\\n|$)`).exec(output);
  if (match === null) return [];
  return match[1]
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [name, , , type, ...data] = line.split(/\s+/);
      return { name, type, data: data.join(' ') };
    });
}

/** Asks Debian's dig (bind9-dnsutils) at 127.0.0.1:port, over UDP or TCP. */
export async function dig(
  port: number,
  name: string,
  type: string,
  transport: 'udp' | 'tcp' = 'udp',
): Promise<DigResult> {
  const args = ['@127.0.0.1', '-p', String(port), name, type, '+norec', '+time=2', '+tries=1'];
  if (transport === 'tcp') args.push('+tcp');
  const { stdout } = await run('dig', args);
  const status = /status: ([A-Z]+)/.exec(stdout)?.[1] ?? `no answer: ${stdout}`;
  return {
    status,
    aa: /flags:[^;]*\baa\b/.test(stdout),
    answers: section(stdout, 'ANSWER'),
    authority: section(stdout, 'AUTHORITY'),
  };
}
