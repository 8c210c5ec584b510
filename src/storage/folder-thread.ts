import { Worker } from 'node:worker_threads';
import type { FolderAnswer, FolderRequest } from './folder-worker.ts';
import { StorageError } from './folders.ts';

/**
 * Job folders made on one worker thread of the process (./folder-worker.ts), started on first use.
 * The requests made in one turn of the event loop go in one message (a batch of submissions makes
 * its folders together). The thread holds the process open only while a request is under way; if
 * it dies, what it had is refused and the next request starts another.
 */

type Pending = { resolve: (foreign: boolean) => void; reject: (error: Error) => void };

let worker: Worker | undefined;
const pending = new Map<number, Pending>();
let queued: FolderRequest[] = [];
let nextId = 1;

function started(): Worker {
  if (worker) return worker;
  const thread = new Worker(new URL('./folder-worker.ts', import.meta.url));
  thread.unref();
  thread.on('message', (answers: FolderAnswer[]) => {
    for (const answer of answers) {
      const waiting = pending.get(answer.id);
      pending.delete(answer.id);
      if (!waiting) continue;
      if (answer.done) waiting.resolve(answer.foreign);
      else waiting.reject(failure(answer));
    }
    if (pending.size === 0) thread.unref();
  });
  const gone = (error: Error) => {
    if (worker !== thread) return;
    worker = undefined;
    for (const waiting of pending.values()) waiting.reject(error);
    pending.clear();
  };
  thread.on('error', gone);
  thread.on('exit', (code) => gone(new Error(`the job folders' thread ended (code ${code})`)));
  worker = thread;
  return thread;
}

function failure(answer: Extract<FolderAnswer, { done: false }>): Error {
  if (answer.refused)
    return new StorageError(answer.message, answer.code === 'ENOENT' ? 'ENOENT' : 'ENOTDIR');
  return Object.assign(new Error(answer.message), answer.code ? { code: answer.code } : {});
}

function flush(): void {
  const requests = queued;
  queued = [];
  const thread = started();
  thread.ref();
  thread.postMessage(requests);
}

/**
 * Makes `folder` below `root` (missing folders as the owner of the one above) and writes `files`
 * into it as new files renamed over their names. Resolves true when the folder is another owner's:
 * then nothing was written, and the caller writes the files as that owner.
 */
export function makeJobFolder(
  root: string,
  folder: string,
  files: { name: string; content: string }[],
): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    if (queued.length === 0) setImmediate(flush);
    queued.push({ id, root, folder, files });
  });
}
