import { readdir, readFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { join } from 'node:path';
import { oomKillCount } from '../cgroups.ts';
import type { ContainerExit, ContainerSpec, RunningContainer } from '../runtime.ts';
import { readSandboxFailure } from '../sandbox-status.ts';
import { type PodContext, type PodRecord, podDir } from './context.ts';
import { isSupervisor, readNumber } from './proc.ts';

/** Bubblewrap's status file in a container's state folder (see sandbox-status.ts). */
export const SANDBOX_STATUS = 'sandbox-status';

/** What a container's state folder keeps: container.json. */
export interface ContainerRecord {
  spec: ContainerSpec;
  /** The pod's OOM-kill count when the container started. */
  oomBase: number;
}

/** What a pod knows of one of its containers. */
export interface ContainerHandle {
  readonly spec: ContainerSpec;
  readonly running: RunningContainer;
  /** The supervisor's pid; null when it is unknown (it never wrote it). */
  readonly pid: number | null;
  readonly ended: boolean;
  /** Resolves `exited` if the container ended (by its exit file, or its supervisor's absence). */
  check(): Promise<void>;
}

/** 128+n is how a shell (and bubblewrap) reports a child ended by signal n, as Kubernetes does. */
function exitFromStatus(status: number, oomKilled: boolean): ContainerExit {
  const name = Object.entries(constants.signals).find(([, n]) => n === status - 128)?.[0] ?? null;
  return { exitCode: status, signal: status > 128 ? name : null, oomKilled };
}

export function containerHandle(
  context: PodContext,
  pod: PodRecord,
  name: string,
  stateDir: string,
  record: ContainerRecord,
  pid: number | null,
): ContainerHandle {
  let resolveExit!: (exit: ContainerExit) => void;
  const exited = new Promise<ContainerExit>((resolve) => {
    resolveExit = resolve;
  });
  let ended = false;
  const handle: ContainerHandle = {
    spec: record.spec,
    running: { name, exited },
    pid,
    get ended() {
      return ended;
    },
    async check() {
      if (ended) return;
      const exitFile = join(stateDir, 'exit');
      let status = await readNumber(exitFile);
      if (status === null) {
        if (pid !== null && (await isSupervisor(pid))) return;
        // It may have written its status just before it ended.
        status = await readNumber(exitFile);
      }
      let exit: ContainerExit;
      if (status !== null) {
        const ooms = context.cgroups ? await oomKillCount(context.cgroups, pod.cgroups) : 0;
        exit = exitFromStatus(status, status === 128 + constants.signals.SIGKILL && ooms > record.oomBase);
        if (context.sandbox.kind === 'bwrap') {
          const failure = await readSandboxFailure(
            status,
            join(stateDir, SANDBOX_STATUS),
            record.spec.stderr,
          );
          if (failure) exit = { ...exit, sandboxFailure: failure };
        }
      } else {
        // The supervisor itself was killed (destroy after its grace, from outside, or the machine restarted).
        exit = { ...exitFromStatus(128 + constants.signals.SIGKILL, false), supervisorLost: true };
      }
      if (ended) return;
      ended = true;
      resolveExit(exit);
    },
  };
  return handle;
}

/** The containers a restarted ucompute finds in a pod's state folder; watches those still running. */
export async function findContainers(
  context: PodContext,
  record: PodRecord,
): Promise<Map<string, ContainerHandle>> {
  const containersDir = join(podDir(context, record.spec.name), 'containers');
  const found = new Map<string, ContainerHandle>();
  let names: string[] = [];
  try {
    names = await readdir(containersDir);
  } catch {
    return found;
  }
  for (const name of names) {
    const stateDir = join(containersDir, name);
    let containerRecord: ContainerRecord;
    try {
      containerRecord = JSON.parse(await readFile(join(stateDir, 'container.json'), 'utf8'));
    } catch {
      continue;
    }
    const pid = await readNumber(join(stateDir, 'pid'));
    const handle = containerHandle(context, record, name, stateDir, containerRecord, pid);
    await handle.check();
    found.set(name, handle);
  }
  return found;
}

/** Polls containers of recovered pods (they are not our children, so no exit event comes). */
export function watchContainers(handles: () => Iterable<ContainerHandle>, intervalMs: number): () => void {
  const timer = setInterval(() => {
    for (const handle of handles()) void handle.check();
  }, intervalMs);
  return () => clearInterval(timer);
}
