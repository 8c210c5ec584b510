import { setTimeout as sleep } from 'node:timers/promises';
import { cgroupPids, removePodCgroups } from '../cgroups.ts';
import type { PodContext, PodRecord } from './context.ts';
import { isAlive, isSupervisor, pidNamespace } from './proc.ts';

/** Stopping a pod's processes, and removing its cgroups once they are empty. */

function signalAll(pids: readonly number[], signal: NodeJS.Signals) {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/**
 * How long killed processes may take to be gone. A killed process stays listed until its exit is
 * through, and its exit tears down its namespaces (a mount namespace waits for the machine's
 * mount lock): on a loaded machine that took over a second, and a destroy that gave up then
 * failed while nothing was wrong.
 */
const KILLED_GONE_WITHIN_MS = 15_000;

/** SIGKILL to the listed processes until none is left; after `patientRounds` rounds of waiting. */
async function killUntilGone(list: () => Promise<number[]>, patientRounds = 0) {
  const deadline = Date.now() + KILLED_GONE_WITHIN_MS;
  for (let round = 0; round < patientRounds + 100 || Date.now() < deadline; round++) {
    const pids = await list();
    if (pids.length === 0) return;
    if (round >= patientRounds) signalAll(pids, 'SIGKILL');
    await sleep(10);
  }
  throw new Error(`processes ${(await list()).join(', ')} survived SIGKILL`);
}

/**
 * Ends the pod's processes: SIGTERM to what runs inside the containers, SIGKILL after the grace
 * period, supervisors last so that they record how their container ended. `supervisors` are the
 * pids of the pod's containers' supervisors.
 */
export async function stopPod(
  context: PodContext,
  record: PodRecord,
  supervisors: ReadonlySet<number>,
  graceMs: number,
): Promise<void> {
  const deadline = Date.now() + graceMs;
  if (record.cgroups.length === 0) return stopGroups(supervisors, deadline);
  const all = () => cgroupPids(record.cgroups);
  const first = await all();
  // The pod whose containers all ended (the most common stop): nothing in its cgroups, and no
  // supervisor left that could still join them (a process enters a pod's cgroups only as a
  // supervisor joining, or born inside). Done at one read of each cgroup.procs, not fifteen.
  if (first.length === 0 && ![...supervisors].some(isAlive)) return;
  const nonSupervisorsOf = (pids: number[]) => pids.filter((p) => !supervisors.has(p));
  const nonSupervisors = async () => nonSupervisorsOf(await all());
  // bubblewrap's own processes die of SIGTERM and would report it for a command that ignores it.
  const ours = await pidNamespace(process.pid);
  const inContainersOf = async (pids: number[]) => {
    if (context.sandbox.kind === 'none') return pids;
    const namespaces = await Promise.all(pids.map(pidNamespace));
    return pids.filter((_, i) => namespaces[i] !== null && namespaces[i] !== ours);
  };
  const inContainers = async () => inContainersOf(await nonSupervisors());
  let targets = await inContainersOf(nonSupervisorsOf(first));
  signalAll(targets, 'SIGTERM');
  while (targets.length > 0 && Date.now() < deadline) {
    await sleep(Math.min(20, Math.max(1, deadline - Date.now())));
    targets = await inContainers();
  }
  // A forking process could escape one round of SIGKILL; the cgroup drains within a few rounds.
  await killUntilGone(nonSupervisors);
  await killUntilGone(all, 50);
  // A supervisor started just before the destroy may not have joined the cgroups yet.
  await killUntilGone(async () => {
    const pids = [...supervisors];
    const alive = await Promise.all(pids.map(isSupervisor));
    return pids.filter((_, i) => alive[i]);
  });
}

/** Without cgroups: the process groups of the supervisors. */
async function stopGroups(supervisors: ReadonlySet<number>, deadline: number) {
  const groups = async () => [...supervisors].filter(isAlive).map((pid) => -pid);
  signalAll(await groups(), 'SIGTERM');
  while ((await groups()).length > 0 && Date.now() < deadline) await sleep(20);
  await killUntilGone(groups);
}

/** Removes the cgroups; a process that joined after the last look (EBUSY) is killed first. */
export async function removeCgroups(record: PodRecord): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await removePodCgroups(record.cgroups);
    } catch (error) {
      if (attempt >= 50) throw error;
      await killUntilGone(() => cgroupPids(record.cgroups));
      await sleep(10);
    }
  }
}
