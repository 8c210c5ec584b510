import { readFileSync, readlinkSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { SUPERVISOR_NAME } from '../supervisor.ts';

/**
 * What /proc and small state files tell about processes. The questions asked about every pod
 * (its supervisor's files, its processes) use the synchronous calls, as a job's own files do
 * (see controller/persistence.ts).
 */

/** The number a file holds; null when it is missing or empty. */
export async function readNumber(path: string): Promise<number | null> {
  try {
    const text = readFileSync(path, 'utf8').trim();
    return text === '' ? null : Number(text);
  } catch {
    return null;
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether `pid` is still the supervisor that was recorded (pids are reused). */
export async function isSupervisor(pid: number): Promise<boolean> {
  // Most often asked of a supervisor that has ended: told at once, without a trip through the
  // thread pool and a refused read.
  if (!isAlive(pid)) return false;
  try {
    // In the thread pool: reading another process's command line waits while it execs or exits.
    return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).includes(SUPERVISOR_NAME);
  } catch {
    return false;
  }
}

/** The process's pid namespace; null once it is gone. */
export async function pidNamespace(pid: number): Promise<string | null> {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/** The command under bubblewrap's init below `supervisor`, or null while there is none yet. */
export async function commandProcess(supervisor: number): Promise<number | null> {
  const parents = new Map<number, number[]>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // Ended meanwhile.
    }
  }
  const hostNamespace = await pidNamespace(supervisor);
  // Breadth first: the first process in a new pid namespace is bubblewrap's init, its child the command.
  const queue = [supervisor];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    if ((await pidNamespace(pid)) !== hostNamespace) return parents.get(pid)?.[0] ?? null;
    queue.push(...(parents.get(pid) ?? []));
  }
  return null;
}

/** A process's environment (root reads any). */
export async function processEnvironment(pid: number): Promise<Record<string, string>> {
  const text = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
  const pairs = text.split('\0').filter((entry) => entry.includes('='));
  return Object.fromEntries(
    pairs.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
}
