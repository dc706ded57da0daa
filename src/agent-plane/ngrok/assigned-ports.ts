// Which port a TCP tunnel without an address was last given, by account and tunnel Id, so that
// an agent reconnecting with its tunnel Ids gets its URL back while the port is still free. In
// this instance's memory only: after a restart a reconnecting agent gets whichever port is free.

/** The last assigned port of each tunnel, remembered for reconnects. */
export interface AssignedPorts {
  get(accountId: string, tunnelId: string): number | undefined;
  set(accountId: string, tunnelId: string, port: number): void;
}

/** Bounds the tunnels remembered: the oldest is forgotten first. */
const MAX_TUNNELS = 10_000;

export function assignedPortMemory(max = MAX_TUNNELS): AssignedPorts {
  const ports = new Map<string, number>();
  const key = (accountId: string, tunnelId: string) => `${accountId} ${tunnelId}`;
  return {
    get: (accountId, tunnelId) => ports.get(key(accountId, tunnelId)),
    set(accountId, tunnelId, port) {
      ports.delete(key(accountId, tunnelId));
      ports.set(key(accountId, tunnelId), port);
      if (ports.size > max) ports.delete(ports.keys().next().value as string);
    },
  };
}
