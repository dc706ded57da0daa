import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICE_DIR, type ServiceProcess } from '../helpers/service-process.ts';
import { until } from './support.ts';

// Kills a piscina worker thread of a running service from outside, with no code in the service
// for it: SIGUSR1 opens the process's inspector (on the `--inspect-port` it was started with),
// the inspector's NodeWorker domain attaches to each worker thread, and a conditional
// breakpoint on the first statement of the route-events task makes its condition run
// `process.exit(70)` in the thread that routes a chosen request. In a worker, process.exit ends
// only that thread (exit code 70), as a crash would, with the task in flight.

const WORKER_SOURCE = 'src/data-plane/workers/route-events.ts';

/** The 0-based line of the task function's first statement (after its signature), where `task` is in scope. */
function taskFirstLine(): number {
  const lines = readFileSync(join(SERVICE_DIR, WORKER_SOURCE), 'utf8').split('\n');
  const start = lines.findIndex((line) => /function routeEvents\(/.test(line));
  if (start < 0) throw new Error(`no routeEvents function in ${WORKER_SOURCE}`);
  let end = start;
  while (end < lines.length && !lines[end].trimEnd().endsWith('{')) end++;
  return end + 1;
}

/** The worker threads of one service process, seen through its inspector. */
export interface WorkerInspector {
  /** Inspector sessions of the worker threads alive now, oldest first. */
  workers(): string[];
  /** Worker threads seen starting / ending since attach (replacements included). */
  attachedCount(): number;
  detachedCount(): number;
  /**
   * Arms every worker alive now: the one that starts routing a task for which `condition` (a JS
   * expression over the task function's parameter `task`) is true exits with `code`.
   * Replacement workers start unarmed.
   */
  exitOnTask(condition: string, code?: number): Promise<void>;
  /** Disarms the workers still alive (their debugger is disabled, breakpoints go with it). */
  disarm(): Promise<void>;
  /** Disconnects; do it before stopping the service. */
  close(): Promise<void>;
}

/**
 * Opens the service's inspector with SIGUSR1 (how one attaches to a running Node.js process;
 * the service must run with `--inspect-port=0` so it listens on a free port) and connects.
 */
export async function inspectWorkers(service: ServiceProcess): Promise<WorkerInspector> {
  const listening = /Debugger listening on (ws:\/\/\S+)/;
  if (!listening.test(service.stderr())) service.child.kill('SIGUSR1');
  const url = await until(
    'the inspector listening',
    () => listening.exec(service.stderr())?.[1],
    10_000,
    50,
  );
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true });
    socket.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)), {
      once: true,
    });
  });
  const alive: string[] = [];
  const armed = new Set<string>();
  let attached = 0;
  let detached = 0;
  let nextId = 0;
  const replies = new Map<number, (message: any) => void>();

  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data));
    if (message.id !== undefined) {
      replies.get(message.id)?.(message);
      replies.delete(message.id);
    } else if (message.method === 'NodeWorker.attachedToWorker') {
      attached++;
      alive.push(message.params.sessionId);
    } else if (message.method === 'NodeWorker.detachedFromWorker') {
      detached++;
      alive.splice(alive.indexOf(message.params.sessionId), 1);
    } else if (message.method === 'NodeWorker.receivedMessageFromWorker') {
      const inner = JSON.parse(message.params.message);
      // Worker replies carry negative ids here, so they never collide with the main session's.
      if (inner.id !== undefined) {
        replies.get(-inner.id)?.(inner);
        replies.delete(-inner.id);
      }
    }
  });

  function call(method: string, params: object = {}): Promise<any> {
    const id = ++nextId;
    return new Promise((resolve) => {
      replies.set(id, resolve);
      socket.send(JSON.stringify({ id, method, params }));
    });
  }
  function callWorker(session: string, method: string, params: object = {}): Promise<any> {
    const id = ++nextId;
    return new Promise((resolve) => {
      replies.set(-id, resolve);
      socket.send(
        JSON.stringify({
          id,
          method: 'NodeWorker.sendMessageToWorker',
          params: { sessionId: session, message: JSON.stringify({ id, method, params }) },
        }),
      );
    });
  }

  await call('NodeWorker.enable', { waitForDebuggerOnStart: false });
  return {
    workers: () => [...alive],
    attachedCount: () => attached,
    detachedCount: () => detached,
    async exitOnTask(condition, code = 70) {
      const line = taskFirstLine();
      for (const session of [...alive]) {
        const enabled = await callWorker(session, 'Debugger.enable');
        if (enabled.error) throw new Error(`Debugger.enable: ${JSON.stringify(enabled.error)}`);
        armed.add(session);
        const set = await callWorker(session, 'Debugger.setBreakpointByUrl', {
          urlRegex: `${WORKER_SOURCE.replace('.', '\\.')}$`,
          lineNumber: line,
          condition: `(${condition}) && process.exit(${code})`,
        });
        if (set.error) throw new Error(`setBreakpointByUrl: ${JSON.stringify(set.error)}`);
        // Piscina loads the task module when the worker starts, so the location resolves now.
        if (set.result.locations.length === 0) {
          throw new Error(`no breakable location at ${WORKER_SOURCE}:${line + 1}`);
        }
      }
    },
    async disarm() {
      for (const session of alive.filter((s) => armed.has(s))) {
        await callWorker(session, 'Debugger.disable');
        armed.delete(session);
      }
    },
    async close() {
      if (socket.readyState === WebSocket.CLOSED) return;
      const closed = new Promise((resolve) => socket.addEventListener('close', resolve));
      socket.close();
      await closed;
    },
  };
}
