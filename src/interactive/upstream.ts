import { createRequire } from 'node:module';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Pool } from 'undici';
import type { Backend } from '../jobs/backend.ts';

// undici (109 modules, a fifth of serve's start) loads with the first proxied request: most
// services start, and many run, without one.
const require = createRequire(import.meta.url);
let poolClass: typeof Pool | undefined;
const undiciPool = (): typeof Pool => (poolClass ??= (require('undici') as typeof import('undici')).Pool);

// How the proxies reach a job's app: every connection to (job, rank, port) is made by the
// backend (a socket to the pod's address, or a Kubernetes port-forward stream). HTTP requests
// share keep-alive connections, one request at a time on each; upgrades get one of their own.

export type Upstreams = ReturnType<typeof upstreams>;

export function upstreams(backend: Pick<Backend, 'connect'>) {
  /** Pools by job, then by `<rank>/<port>`: a job's all go when it stops running. */
  const pools = new Map<string, Map<string, Pool>>();

  function newPool(jobId: string, rank: number, port: number): Pool {
    // The origin only names the pool: every connection comes from the backend.
    return new (undiciPool())('http://app.invalid', {
      pipelining: 1,
      // Long polls and server-sent events may be quiet for long; the browser decides when to stop.
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: (_options, done) => {
        backend.connect(jobId, rank, port).then(
          (stream) => done(null, socketLike(stream)),
          (err: Error) => done(err, null),
        );
      },
    });
  }

  return {
    /** The keep-alive connections to one job's app at (rank, port). */
    pool(jobId: string, rank: number, port: number): Pool {
      let ofJob = pools.get(jobId);
      if (!ofJob) {
        ofJob = new Map();
        pools.set(jobId, ofJob);
      }
      const key = `${rank}/${port}`;
      let pool = ofJob.get(key);
      if (!pool) {
        pool = newPool(jobId, rank, port);
        ofJob.set(key, pool);
      }
      return pool;
    },

    /** A connection of its own (WebSockets and other upgrades keep theirs to the end). */
    connect: (jobId: string, rank: number, port: number): Promise<Duplex> =>
      backend.connect(jobId, rank, port),

    /** Closes the connections to a job's app: it stopped running. */
    forget(jobId: string): void {
      for (const pool of pools.get(jobId)?.values() ?? []) destroy(pool);
      pools.delete(jobId);
    },

    close(): void {
      for (const ofJob of pools.values()) for (const pool of ofJob.values()) destroy(pool);
      pools.clear();
    },
  };
}

/** Requests still in flight fail with the pool (their callers answer 502 or drop the stream). */
function destroy(pool: Pool): void {
  pool.destroy().catch(() => undefined);
}

/** The connection pool manages sockets; a port-forward stream gets the few socket calls it makes. */
function socketLike(stream: Duplex): Socket {
  // A request's head and body are separate writes: Nagle's algorithm would hold the body back
  // until the app acknowledges the head.
  if (stream instanceof Socket) return stream.setNoDelay(true);
  const s = stream as Duplex & Partial<Socket>;
  s.setKeepAlive ??= () => s as Socket;
  s.setNoDelay ??= () => s as Socket;
  s.setTimeout ??= () => s as Socket;
  s.ref ??= () => s as Socket;
  s.unref ??= () => s as Socket;
  return s as Socket;
}
