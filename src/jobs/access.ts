import { type UsageBucket, type UsageSum, usageBuckets } from '../accounting/usage.ts';
import { ValidationError } from '../model/errors.ts';
import type { Job, JobState, JobStatus } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import { type OutcomeKind, presentOutcome } from '../model/outcome.ts';
import { accountOf, type Owner } from '../model/owner.ts';
import type { JobRecord, JobVisibility, Store } from '../store/store.ts';
import { notFound } from './errors.ts';

// Who sees what: a caller's jobs and accounts, and a job as the API shows it.

export interface Caller {
  username: string;
  admin: boolean;
  /**
   * The project whose workspace the caller works in (UCloud's `Project` header), checked to be
   * one of theirs: browse, wallets and usage show that project only. Absent: everything they see.
   */
  project?: string;
}

/** UCloud's browse request: PaginationRequestV2, JobIncludeFlags' filters and its sort flags. */
export interface BrowseOptions {
  itemsPerPage?: number;
  next?: string;
  filterState?: JobState;
  /** Final jobs that ended this way (an addition to UCloud's filters). */
  filterOutcome?: OutcomeKind;
  filterApplication?: string;
  filterCreatedBy?: string;
  filterCreatedAfter?: number;
  filterCreatedBefore?: number;
  filterProvider?: string;
  filterProductId?: string;
  filterProductCategory?: string;
  /** Only the jobs of this project's workspace (ucompute's own; the caller's workspace by default). */
  filterProject?: string;
  /** Comma-separated job ids. */
  filterIds?: string;
  hideProvider?: string;
  filterType?: 'VMS_ONLY' | 'JOBS_ONLY';
  /** Free text in the job's id, name or application (search). */
  query?: string;
  /** Jobs sort by creation only (`createdAt`, UCloud's default). */
  sortDirection?: 'ascending' | 'descending';
}

/** UCloud's page size: nothing or less than one means 50, and no page holds more than 1000. */
export function pageSize(itemsPerPage: number | undefined): number {
  if (itemsPerPage === undefined || itemsPerPage <= 0) return 50;
  return Math.min(itemsPerPage, 1000);
}

export interface UsageQuery {
  /** Epoch ms; default: 30 days before `to`. */
  from?: number;
  /** Epoch ms, exclusive; default: now. */
  to?: number;
  bucket?: UsageBucket;
}

export interface Usage {
  from: number;
  to: number;
  bucket: UsageBucket;
  items: UsageSum[];
}

const DAY = 86_400_000;

export interface Wallet {
  owner: string;
  category: string;
  allocated: number;
  used: number;
  balance: number;
}

/** A job's status as the API shows it, from its stored record. */
export function statusOf(record: JobRecord): JobStatus {
  return {
    state: record.state,
    ...(record.startedAt !== null ? { startedAt: record.startedAt } : {}),
    ...(record.expiresAt !== null ? { expiresAt: record.expiresAt } : {}),
    ...(record.exitCodes !== null ? { exitCode: record.exitCodes } : {}),
    ...(record.outcome !== null && isFinal(record.state)
      ? { outcome: presentOutcome(record.outcome, record.exitCodes ?? undefined) }
      : {}),
  };
}

export function ownerOf(record: JobRecord): Owner {
  return { createdBy: record.createdBy, ...(record.project !== null ? { project: record.project } : {}) };
}

export type JobAccess = ReturnType<typeof jobAccess>;

export function jobAccess(store: Store) {
  function visibility(caller: Caller): JobVisibility {
    const memberships = store.memberships(caller.username);
    return {
      username: caller.username,
      allOf: memberships.filter((m) => m.role !== 'USER').map((m) => m.projectId),
      ownOf: memberships.filter((m) => m.role === 'USER').map((m) => m.projectId),
    };
  }

  function canSee(caller: Caller, job: Pick<JobRecord, 'createdBy' | 'project'>): boolean {
    if (caller.admin) return true;
    if (job.project === null) return job.createdBy === caller.username;
    const role = store.memberships(caller.username).find((m) => m.projectId === job.project)?.role;
    return role === 'PI' || role === 'ADMIN' || (role === 'USER' && job.createdBy === caller.username);
  }

  /** The job if the caller may see it; otherwise 404, so that others' ids reveal nothing. */
  function visibleJob(caller: Caller, id: string): JobRecord {
    const job = typeof id === 'string' ? store.getJob(id) : undefined;
    if (!job || !canSee(caller, job)) throw notFound(`job ${id}`);
    return job;
  }

  function toJob(record: JobRecord): Job {
    return {
      id: record.id,
      owner: ownerOf(record),
      specification: record.specification,
      status: statusOf(record),
      updates: store.updatesOf(record.id),
      createdAt: record.createdAt,
      output: record.outputFolder !== null ? { outputFolder: record.outputFolder } : {},
      billing: { creditsCharged: record.creditsCharged, pricePerUnit: record.pricePerUnit },
    };
  }

  /**
   * The accounts whose credits a caller sees: their own, and the projects they lead; in a
   * project's workspace, that project's (every member may see what the project has left).
   */
  function accountsOf(caller: Caller): string[] {
    if (caller.project !== undefined)
      return [accountOf({ createdBy: caller.username, project: caller.project })];
    return [
      accountOf({ createdBy: caller.username }),
      ...store
        .memberships(caller.username)
        .filter((m) => m.role !== 'USER')
        .map((m) => accountOf({ createdBy: caller.username, project: m.projectId })),
    ];
  }

  /** What an owner has left in a category: its valid allocations less what was drawn from them. */
  function wallet(account: string, category: string, at: number): Wallet {
    const active = store.activeAllocations(account, category, at);
    const allocated = active.reduce((sum, a) => sum + a.credits, 0);
    const used = active.reduce((sum, a) => sum + a.used, 0);
    return { owner: account, category, allocated, used, balance: allocated - used };
  }

  return {
    canSee,
    visibleJob,
    toJob,
    accountsOf,
    wallet,

    /** Credits charged to the caller's accounts, per bucket and category. */
    usage(caller: Caller, q: UsageQuery, now: number): Usage {
      const to = q.to ?? now;
      const from = q.from ?? Math.max(0, to - 30 * DAY);
      const bucket = q.bucket ?? 'day';
      if (from >= to) throw new ValidationError([{ path: 'from', message: 'must be before to' }]);
      const charges = accountsOf(caller).map((a) => [a, store.charges(a, from, to)] as const);
      return { from, to, bucket, items: usageBuckets(charges, bucket) };
    },

    wallets(caller: Caller, at: number): Wallet[] {
      return accountsOf(caller).flatMap((account) => {
        const categories = new Set(store.allocations(account).map((a) => a.category));
        return [...categories].map((category) => wallet(account, category, at));
      });
    },

    browse(
      caller: Caller,
      o: BrowseOptions,
      provider: string,
    ): { items: Job[]; next: string | null; itemsPerPage: number } {
      const limit = pageSize(o.itemsPerPage);
      // Every job here is this provider's container job: other providers and VMs have none.
      const elsewhere =
        (o.filterProvider !== undefined && o.filterProvider !== provider) ||
        o.hideProvider === provider ||
        o.filterType === 'VMS_ONLY';
      if (elsewhere) return { items: [], next: null, itemsPerPage: limit };
      const optional = <K extends string, V>(key: K, value: V | undefined) =>
        (value !== undefined ? { [key]: value } : {}) as Partial<Record<K, V>>;
      const records = store.browseJobs({
        visibility: caller.admin ? 'all' : visibility(caller),
        ...optional('state', o.filterState),
        ...optional('outcome', o.filterOutcome),
        ...optional('application', o.filterApplication),
        ...optional('createdBy', o.filterCreatedBy),
        ...optional('createdAfter', o.filterCreatedAfter),
        ...optional('createdBefore', o.filterCreatedBefore),
        ...optional('productId', o.filterProductId),
        ...optional('productCategory', o.filterProductCategory),
        ...optional('project', o.filterProject ?? caller.project),
        ...optional(
          'ids',
          o.filterIds?.split(',').map((id) => id.trim()),
        ),
        ...optional('query', o.query),
        ...optional('before', o.next),
        ascending: o.sortDirection === 'ascending',
        limit: limit + 1,
      });
      const page = records.slice(0, limit);
      return {
        items: page.map(toJob),
        next: records.length > limit ? (page.at(-1)?.id ?? null) : null,
        itemsPerPage: limit,
      };
    },
  };
}
