import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { type Duplex, pipeline } from 'node:stream';

/** The host ports sshEnabled jobs get, and where they listen. */
export interface SshPorts {
  /** The address the ports are bound on (the server's listen address). */
  listen: string;
  first: number;
  last: number;
}

export interface SshForwardsOptions extends SshPorts {
  /** A stream to port 22 of the job's rank 0. */
  connect(jobId: string): Promise<Duplex>;
  log?: { warn(obj: object, msg?: string): void };
}

const isInUse = (e: unknown) => (e as NodeJS.ErrnoException).code === 'EADDRINUSE';

/**
 * SSH endpoints of the local backend: one host port per job from a configured range, each
 * connection relayed to port 22 of the job's rank 0 (in its network namespace, through
 * Backend.connect as the session proxy reaches pods).
 */
export function sshForwards(o: SshForwardsOptions) {
  const servers = new Map<string, { port: number; server: Server }>();

  function relay(jobId: string, client: Socket): void {
    client.on('error', () => client.destroy());
    o.connect(jobId).then(
      // Both ways until each side ends; an error on either ends both.
      (upstream) => pipeline(client, upstream, client, () => {}),
      (err: unknown) => {
        o.log?.warn({ err, jobId }, 'an ssh connection could not reach its job');
        client.destroy();
      },
    );
  }

  /** Binds `port` for the job; false when something else holds it. */
  async function bind(jobId: string, port: number): Promise<boolean> {
    const server = createServer({ allowHalfOpen: true }, (client) => relay(jobId, client));
    server.listen({ port, host: o.listen, exclusive: true });
    try {
      await Promise.race([once(server, 'listening'), once(server, 'error').then(([e]) => Promise.reject(e))]);
    } catch (e) {
      server.close();
      if (isInUse(e)) return false;
      throw e;
    }
    servers.set(jobId, { port, server });
    return true;
  }

  /** Closes the job's port (its connections end with its pod); a job without one is fine. */
  function close(jobId: string): void {
    const held = servers.get(jobId);
    if (!held) return;
    servers.delete(jobId);
    held.server.close();
  }

  return {
    /**
     * The job's port: the one it has, else `wanted` (its port before a restart of ucompute) when
     * that is free, else the first free one of the range.
     */
    async open(jobId: string, wanted?: number): Promise<number> {
      const held = servers.get(jobId);
      if (held) return held.port;
      if (wanted !== undefined && wanted >= o.first && wanted <= o.last && (await bind(jobId, wanted)))
        return wanted;
      const taken = new Set([...servers.values()].map((s) => s.port));
      for (let port = o.first; port <= o.last; port++) {
        if (!taken.has(port) && (await bind(jobId, port))) return port;
      }
      throw new Error(`no free ssh port in ${o.first}-${o.last}: every one is in use`);
    },

    close,

    closeAll(): void {
      for (const id of [...servers.keys()]) close(id);
    },
  };
}

export type SshForwards = ReturnType<typeof sshForwards>;
