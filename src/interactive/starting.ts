import type { Backend } from '../jobs/backend.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import type { JobState } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import { type AppProtocol, appAnswers } from './readiness.ts';
import type { Sessions } from './sessions.ts';

// What a "starting…" page waits for: the job running, and its app answering in its own protocol.
// The wait is a long poll: one request waits up to a bound, probing every so often, so that the
// page learns of the answer at once without hammering the server.

export interface Readiness {
  state: JobState;
  /** The job runs and what its session opens answers: a web app's HTTP, a desktop's RFB, a shell's pod. */
  ready: boolean;
  /** What the session opens: the app's page, its desktop, or a terminal. */
  sessionType: 'WEB' | 'VNC' | 'SHELL';
  /** The job's latest word (its queue position, why it ended). */
  status?: string;
}

const PROBE_EVERY_MS = 250;
export const MAX_WAIT_MS = 20_000;

export interface ReadinessDeps {
  service: JobService;
  sessions: Pick<Sessions, 'portOf'>;
  backend: Pick<Backend, 'connect'>;
  now?: () => number;
}

export function sessionReadiness(deps: ReadinessDeps) {
  const now = deps.now ?? Date.now;
  /** Aborted when the server closes: waits answer at once rather than hold its closing up. */
  const closing = new AbortController();
  const pause = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, PROBE_EVERY_MS);
      function done() {
        clearTimeout(timer);
        closing.signal.removeEventListener('abort', done);
        resolve();
      }
      closing.signal.addEventListener('abort', done);
    });

  /** The job's readiness now (one probe). */
  async function check(caller: Caller, id: string, rank: number): Promise<Readiness> {
    const job = await deps.service.retrieve(caller, id, { includeApplication: true });
    const replicas = job.specification.replicas ?? 1;
    if (rank >= replicas)
      throw new ServiceError(400, `rank: must be a rank of the job, 0 to ${replicas - 1}`);
    const type = job.status.resolvedApplication?.invocation.applicationType;
    const sessionType = type === 'WEB' || type === 'VNC' ? type : 'SHELL';
    const status = job.updates.findLast((u) => u.status !== undefined)?.status;
    const answer = {
      state: job.status.state,
      sessionType,
      ...(status !== undefined ? { status } : {}),
    } as const;
    if (job.status.state !== 'RUNNING') return { ...answer, ready: false };
    if (sessionType === 'SHELL') return { ...answer, ready: true };
    const port = await deps.sessions.portOf(id, sessionType);
    const protocol: AppProtocol = sessionType === 'WEB' ? 'http' : 'rfb';
    const ready = port !== undefined && (await appAnswers(deps.backend, { jobId: id, rank, port }, protocol));
    return { ...answer, ready };
  }

  return {
    /**
     * Answers once the job is ready, has ended, or `waitMs` (at most MAX_WAIT_MS) has passed,
     * whichever comes first. Others' jobs are 404, as everywhere.
     */
    async wait(caller: Caller, id: string, rank: number, waitMs: number): Promise<Readiness> {
      const until = now() + Math.min(Math.max(0, waitMs), MAX_WAIT_MS);
      let readiness = await check(caller, id, rank);
      for (let probe = 1; probe <= MAX_WAIT_MS / PROBE_EVERY_MS; probe++) {
        const over = now() + PROBE_EVERY_MS >= until || closing.signal.aborted;
        if (readiness.ready || isFinal(readiness.state) || over) break;
        await pause();
        readiness = await check(caller, id, rank);
      }
      return readiness;
    },

    /** Ends every wait (the server is closing). */
    close(): void {
      closing.abort();
    },
  };
}
