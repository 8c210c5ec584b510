import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, getJson, postJson } from '../api.ts';
import { formatBytes, when } from '../format.ts';
import { Link } from '../router.tsx';
import type { FileEntry, Job } from '../types.ts';

// What a job's page offers beside its facts: more time, suspending and resuming, cancelling, and
// its output files.

const EXTENSIONS = [1, 4, 12, 24];

export function Extend({ job, onDone }: { job: Job; onDone: (message: string) => void }) {
  const [hours, setHours] = useState('1');
  if (job.status.state !== 'RUNNING' && job.status.state !== 'IN_QUEUE') return null;
  const extend = async () => {
    try {
      await postJson('/api/jobs/extend', {
        items: [{ jobId: job.id, requestedTime: { hours: Number(hours), minutes: 0, seconds: 0 } }],
      });
      const updated = await getJson<Job>('/api/jobs/retrieve', { id: job.id });
      const ends = updated.status.expiresAt;
      onDone(ends !== undefined ? `Extended: the job now ends at ${when(ends)}.` : `Extended by ${hours} h.`);
    } catch (e) {
      onDone(e instanceof ApiError ? `Not extended: ${e.message}` : String(e));
    }
  };
  return (
    <span class="extend">
      <label>
        Extend by{' '}
        <select value={hours} onChange={(e) => setHours(e.currentTarget.value)}>
          {EXTENSIONS.map((h) => (
            <option key={h} value={h}>
              {h} h
            </option>
          ))}
        </select>
      </label>
      <button type="button" onClick={() => void extend()}>
        Extend
      </button>
    </span>
  );
}

export function Cancel({ id, onDone }: { id: string; onDone: (message: string) => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const cancel = async () => {
    dialog.current?.close();
    try {
      await postJson('/api/jobs/terminate', { items: [{ id }] });
      onDone('The job is being cancelled.');
    } catch (e) {
      onDone(`Not cancelled: ${(e as Error).message}`);
    }
  };
  return (
    <>
      <button type="button" class="danger" onClick={() => dialog.current?.showModal()}>
        Cancel job
      </button>
      <dialog ref={dialog} aria-labelledby="cancel-title">
        <h2 id="cancel-title">Cancel this job?</h2>
        <p>Its processes are stopped; the output written so far is kept.</p>
        <div class="actions">
          <button type="button" class="danger" onClick={() => void cancel()}>
            Yes, cancel the job
          </button>
          <button type="button" onClick={() => dialog.current?.close()}>
            Keep it running
          </button>
        </div>
      </dialog>
    </>
  );
}

/**
 * Suspend (a queued or running job: its processes stop, the job and its folder stay) or Resume (a
 * suspended one: back in the queue), where the job's state allows it as the API does. A refusal
 * (an owner over its storage quota: 402 with what to delete) is shown in the server's words.
 */
export function SuspendResume({ job, onDone }: { job: Job; onDone: (message: string) => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const { state } = job.status;
  const ask = async (path: string, done: string, refused: string) => {
    dialog.current?.close();
    try {
      await postJson(path, { items: [{ id: job.id }] });
      onDone(done);
    } catch (e) {
      onDone(`${refused}: ${(e as Error).message}`);
    }
  };
  if (state === 'SUSPENDED') {
    return (
      <button
        type="button"
        onClick={() => void ask('/api/jobs/unsuspend', 'The job is back in the queue.', 'Not resumed')}
      >
        Resume
      </button>
    );
  }
  if (state !== 'RUNNING' && state !== 'IN_QUEUE') return null;
  return (
    <>
      <button type="button" onClick={() => dialog.current?.showModal()}>
        Suspend
      </button>
      <dialog ref={dialog} aria-labelledby="suspend-title">
        <h2 id="suspend-title">Suspend this job?</h2>
        <p>
          Its processes are stopped and its machine freed; the job, its folder and its output are kept, and
          nothing is charged while it is suspended. Resume puts it back in the queue, where its program starts
          again.
        </p>
        <div class="actions">
          <button
            type="button"
            onClick={() => void ask('/api/jobs/suspend', 'The job is suspended.', 'Not suspended')}
          >
            Yes, suspend the job
          </button>
          <button type="button" onClick={() => dialog.current?.close()}>
            Keep it as it is
          </button>
        </div>
      </dialog>
    </>
  );
}

export function OutputFiles({ folder, refresh }: { folder: string; refresh: number }) {
  const [entries, setEntries] = useState<FileEntry[] | null>(null);
  useEffect(() => {
    getJson<{ items: FileEntry[] }>('/api/files/browse', { path: folder, itemsPerPage: 200 })
      .then((page) => setEntries(page.items))
      .catch(() => setEntries(null));
  }, [folder, refresh]);
  return (
    <>
      <h2>Output</h2>
      <p>
        <Link href={`/files?path=${encodeURIComponent(folder)}`}>{folder}</Link>
      </p>
      {entries !== null && (
        <ul class="listing">
          {entries.map((e) => (
            <li key={e.path}>
              {e.type === 'file' ? (
                <a href={`/api/files/download?path=${encodeURIComponent(e.path)}`} download={e.name}>
                  {e.name}
                </a>
              ) : (
                <Link href={`/files?path=${encodeURIComponent(e.path)}`}>{e.name}/</Link>
              )}{' '}
              <span class="muted">{e.type === 'file' ? formatBytes(e.size) : ''}</span>
            </li>
          ))}
        </ul>
      )}
    </>
  );
}
