/**
 * The local scheduler: which waiting jobs start now on this machine. A job starts only when its
 * whole gang fits; owners (Volcano queues) share the machine by dominant resource share divided by
 * their weight; and the first job that does not fit holds a reservation that later jobs may not
 * delay (EASY backfill: a job behind it starts only if its time limit ends before the reservation
 * begins, or if it fits in what the reservation leaves over). Owners at equal shares take turns:
 * the one whose job started longest ago goes first.
 */

export interface Resources {
  cpuMillis: number;
  memoryBytes: number;
}

export interface WaitingJob {
  id: string;
  /** The fair-share key: the job's Volcano queue. */
  queue: string;
  weight: number;
  /** What the gang (its minAvailable pods) needs; an elastic job's other pods wait for room once it runs. */
  demand: Resources;
  submittedAt: number;
  /** The job's time limit; null: none (it may run forever). */
  timeLimitMs: number | null;
}

export interface RunningJob {
  id: string;
  queue: string;
  /** What it holds now: its live pods, and its gang's pods not made yet. */
  holds: Resources;
  /** When it ends at the latest; null: no limit. */
  endsAt: number | null;
}

export interface Waiting {
  /** 1-based place in the fair order of waiting jobs (0 for an unschedulable one, which has none). */
  position: number;
  reason: string;
  /** Its gang needs more than the whole machine: it stays Pending, as Volcano keeps such a gang, and waits for no turn. */
  unschedulable?: true;
}

export interface Schedule {
  start: string[];
  waiting: Map<string, Waiting>;
}

export const fits = (need: Resources, free: Resources): boolean =>
  need.cpuMillis <= free.cpuMillis && need.memoryBytes <= free.memoryBytes;
export const minus = (a: Resources, b: Resources): Resources => ({
  cpuMillis: a.cpuMillis - b.cpuMillis,
  memoryBytes: a.memoryBytes - b.memoryBytes,
});
export const plus = (a: Resources, b: Resources): Resources => ({
  cpuMillis: a.cpuMillis + b.cpuMillis,
  memoryBytes: a.memoryBytes + b.memoryBytes,
});
export const NO_RESOURCES: Resources = { cpuMillis: 0, memoryBytes: 0 };

/**
 * The words for the amounts most asked for, kept: each admission pass tells every waiting job what
 * it waits for, and formatting the numbers again was most of a pass over a deep queue (800
 * waiting: ~1 ms a pass, at every submission and every end). Bounded: forgotten when full.
 */
const described = new Map<string, string>();
const DESCRIBED_KEPT = 1024;

export function describe(r: Resources): string {
  const key = `${r.cpuMillis}/${r.memoryBytes}`;
  const kept = described.get(key);
  if (kept !== undefined) return kept;
  const cpus = r.cpuMillis / 1000;
  const gib = r.memoryBytes / 2 ** 30;
  const text = `${+cpus.toFixed(2)} CPU${cpus === 1 ? '' : 's'} and ${+gib.toFixed(2)} GiB of memory`;
  if (described.size >= DESCRIBED_KEPT) described.clear();
  described.set(key, text);
  return text;
}

/** When each queue last had a job started; a queue not in it never had. */
export type LastStarts = ReadonlyMap<string, number>;

/** Waiting jobs in fair order: each next one from the queue with the lowest weighted dominant share. */
export function fairOrder(
  capacity: Resources,
  running: RunningJob[],
  waiting: WaitingJob[],
  lastStarts: LastStarts = new Map(),
): WaitingJob[] {
  const turns = new Map(lastStarts);
  const usage = new Map<string, Resources>();
  for (const r of running) usage.set(r.queue, plus(usage.get(r.queue) ?? NO_RESOURCES, r.holds));
  // Each queue's jobs in order, and the index of its head: linear in the backlog, which is
  // ordered again at every admission pass (a job submitted or ended).
  const byQueue = new Map<string, { jobs: WaitingJob[]; head: number }>();
  for (const w of [...waiting].sort((a, b) => a.submittedAt - b.submittedAt || (a.id < b.id ? -1 : 1))) {
    const queue = byQueue.get(w.queue);
    if (queue) queue.jobs.push(w);
    else byQueue.set(w.queue, { jobs: [w], head: 0 });
  }
  const share = (queue: string, weight: number) => {
    const u = usage.get(queue) ?? NO_RESOURCES;
    return (
      Math.max(
        u.cpuMillis / Math.max(capacity.cpuMillis, 1),
        u.memoryBytes / Math.max(capacity.memoryBytes, 1),
      ) / weight
    );
  };
  const lastTurn = (queue: string) => turns.get(queue) ?? Number.NEGATIVE_INFINITY;
  const before = (a: WaitingJob, sa: number, b: WaitingJob, sb: number) =>
    sa !== sb
      ? sa < sb
      : lastTurn(a.queue) !== lastTurn(b.queue)
        ? lastTurn(a.queue) < lastTurn(b.queue)
        : a.submittedAt < b.submittedAt;
  const order: WaitingJob[] = [];
  let turn = Math.max(0, ...turns.values());
  while (byQueue.size > 0) {
    let best: WaitingJob | undefined;
    let bestShare = Number.POSITIVE_INFINITY;
    for (const [queue, { jobs, head: at }] of byQueue) {
      const head = jobs[at]!;
      const s = share(queue, head.weight);
      if (!best || before(head, s, best, bestShare)) {
        best = head;
        bestShare = s;
      }
    }
    const chosen = best!;
    order.push(chosen);
    const queue = byQueue.get(chosen.queue)!;
    queue.head++;
    if (queue.head === queue.jobs.length) byQueue.delete(chosen.queue);
    usage.set(chosen.queue, plus(usage.get(chosen.queue) ?? NO_RESOURCES, chosen.demand));
    turns.set(chosen.queue, ++turn);
  }
  return order;
}

/**
 * Jobs whose waiting is told in detail (exact position, what is free now). Each change of a status is a
 * stored update: a deep queue told in detail would write one for every job behind whenever the queue
 * moves or a job ends (n²/2 updates for a backlog of n).
 */
export const POSITIONS_SAID = 10;

/** Why a job waits for resources; what is free now only at the head of the queue (see POSITIONS_SAID). */
const waitingFor = (demand: Resources, free: Resources, position: number) =>
  position <= POSITIONS_SAID
    ? `waiting for ${describe(demand)} (${describe(free)} free now)`
    : `waiting for ${describe(demand)}`;

/**
 * Why a gang larger than the machine cannot be scheduled, in the words of Volcano's PodGroup
 * condition and of the scheduler's event on one node ("0/1 nodes are unavailable: 1 Insufficient cpu").
 */
export function unschedulable(demand: Resources, capacity: Resources): string {
  const short = [
    ...(demand.cpuMillis > capacity.cpuMillis ? ['1 Insufficient cpu'] : []),
    ...(demand.memoryBytes > capacity.memoryBytes ? ['1 Insufficient memory'] : []),
  ];
  return `the gang needs ${describe(demand)}; this machine offers ${describe(capacity)} (0/1 nodes are unavailable: ${short.join(', ')})`;
}

/** A waiting job's status: its exact position at the head of the queue only (see POSITIONS_SAID). */
export function queueStatus(waiting: Waiting): string {
  if (waiting.unschedulable) return `Pending, unschedulable: ${waiting.reason}`;
  const where =
    waiting.position <= POSITIONS_SAID
      ? `position ${waiting.position}`
      : `behind ${POSITIONS_SAID} or more jobs`;
  return `In the queue, ${where}: ${waiting.reason}`;
}

export function schedule(
  capacity: Resources,
  running: RunningJob[],
  waiting: WaitingJob[],
  now: number,
  lastStarts: LastStarts = new Map(),
): Schedule {
  let free = running.reduce((f, r) => minus(f, r.holds), capacity);
  const start: string[] = [];
  const queued = new Map<string, Waiting>();
  let reservation: { at: number; spare: Resources } | undefined;
  let position = 0;
  for (const job of fairOrder(capacity, running, waiting, lastStarts)) {
    if (!fits(job.demand, capacity)) {
      // It would hold a reservation no end of a running job ever makes good: it blocks no one.
      queued.set(job.id, { position: 0, reason: unschedulable(job.demand, capacity), unschedulable: true });
      continue;
    }
    if (!reservation && fits(job.demand, free)) {
      start.push(job.id);
      free = minus(free, job.demand);
      continue;
    }
    if (!reservation) {
      reservation = reserve(job, free, running);
      position++;
      queued.set(job.id, { position, reason: waitingFor(job.demand, free, position) });
      continue;
    }
    const endsInTime = job.timeLimitMs !== null && now + job.timeLimitMs <= reservation.at;
    const leavesRoom = fits(job.demand, reservation.spare);
    if (fits(job.demand, free) && (endsInTime || leavesRoom)) {
      start.push(job.id);
      free = minus(free, job.demand);
      if (!endsInTime) reservation.spare = minus(reservation.spare, job.demand);
      continue;
    }
    position++;
    queued.set(job.id, {
      position,
      reason: fits(job.demand, free)
        ? `waiting for ${describe(job.demand)}, behind a larger job that has the next turn`
        : waitingFor(job.demand, free, position),
    });
  }
  return { start, waiting: queued };
}

/** When the blocked job can start as running jobs end at their limits, and what it leaves spare then. */
function reserve(job: WaitingJob, free: Resources, running: RunningJob[]): { at: number; spare: Resources } {
  let available = free;
  const ending = [...running].sort((a, b) => (a.endsAt ?? Infinity) - (b.endsAt ?? Infinity));
  for (const r of ending) {
    available = plus(available, r.holds);
    if (fits(job.demand, available)) {
      return { at: r.endsAt ?? Number.POSITIVE_INFINITY, spare: minus(available, job.demand) };
    }
  }
  return { at: Number.POSITIVE_INFINITY, spare: NO_RESOURCES };
}
