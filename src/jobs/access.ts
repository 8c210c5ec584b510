import { type UsageBucket, type UsageSum, usageBuckets } from '../accounting/usage.ts';
import { ValidationError } from '../model/errors.ts';
import type { Job, JobState, JobStatus } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import { type OutcomeKind, presentOutcome } from '../model/outcome.ts';
import { accountOf, type Owner } from '../model/owner.ts';
import type { AllocationRecord } from '../store/accounting.ts';
import type { JobRecord, JobVisibility } from '../store/jobs.ts';
import type { StoreParts } from '../store/store.ts';
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

/** An owner's credits in a category from its allocations valid now: what they grant less what was drawn. */
export function walletOf(owner: string, category: string, active: readonly AllocationRecord[]): Wallet {
  const allocated = active.reduce((sum, a) => sum + a.credits, 0);
  const used = active.reduce((sum, a) => sum + a.used, 0);
  return { owner, category, allocated, used, balance: allocated - used };
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

export function ownerOf(record: Pick<JobRecord, 'createdBy' | 'project'>): Owner {
  return { createdBy: record.createdBy, ...(record.project !== null ? { project: record.project } : {}) };
}

export type JobAccess = ReturnType<typeof jobAccess>;

export function jobAccess(store: StoreParts) {
  async function visibility(caller: Caller): Promise<JobVisibility> {
    const memberships = await store.users.memberships(caller.username);
    return {
      username: caller.username,
      allOf: memberships.filter((m) => m.role !== 'USER').map((m) => m.projectId),
      ownOf: memberships.filter((m) => m.role === 'USER').map((m) => m.projectId),
    };
  }

  async function canSee(caller: Caller, job: Pick<JobRecord, 'createdBy' | 'project'>): Promise<boolean> {
    if (caller.admin) return true;
    if (job.project === null) return job.createdBy === caller.username;
    const memberships = await store.users.memberships(caller.username);
    const role = memberships.find((m) => m.projectId === job.project)?.role;
    return role === 'PI' || role === 'ADMIN' || (role === 'USER' && job.createdBy === caller.username);
  }

  /** The job if the caller may see it; otherwise 404, so that others' ids reveal nothing. */
  async function visibleJob(caller: Caller, id: string): Promise<JobRecord> {
    const job = typeof id === 'string' ? await store.jobs.get(id) : undefined;
    if (!job || !(await canSee(caller, job))) throw notFound(`job ${id}`);
    return job;
  }

  async function toJob(record: JobRecord): Promise<Job> {
    return {
      id: record.id,
      owner: ownerOf(record),
      specification: record.specification,
      status: statusOf(record),
      updates: await store.jobs.updatesOf(record.id),
      createdAt: record.createdAt,
      output: record.outputFolder !== null ? { outputFolder: record.outputFolder } : {},
      billing: { creditsCharged: record.creditsCharged, pricePerUnit: record.pricePerUnit },
    };
  }

  /**
   * The accounts whose credits a caller sees: their own, and the projects they lead; in a
   * project's workspace, that project's (every member may see what the project has left).
   */
  async function accountsOf(caller: Caller): Promise<string[]> {
    if (caller.project !== undefined)
      return [accountOf({ createdBy: caller.username, project: caller.project })];
    return [
      accountOf({ createdBy: caller.username }),
      ...(await store.users.memberships(caller.username))
        .filter((m) => m.role !== 'USER')
        .map((m) => accountOf({ createdBy: caller.username, project: m.projectId })),
    ];
  }

  /** What an owner has left in a category: its valid allocations less what was drawn from them. */
  /** The account's credits in a category; read through `parts` inside a transaction. */
  async function wallet(
    account: string,
    category: string,
    at: number,
    parts: StoreParts = store,
  ): Promise<Wallet> {
    return walletOf(account, category, await parts.accounting.activeAllocations(account, category, at));
  }

  return {
    canSee,
    visibleJob,
    toJob,
    accountsOf,
    wallet,

    /** Credits charged to the caller's accounts, per bucket and category. */
    async usage(caller: Caller, q: UsageQuery, now: number): Promise<Usage> {
      const to = q.to ?? now;
      const from = q.from ?? Math.max(0, to - 30 * DAY);
      const bucket = q.bucket ?? 'day';
      if (from >= to) throw new ValidationError([{ path: 'from', message: 'must be before to' }]);
      const charges = await Promise.all(
        (await accountsOf(caller)).map(
          async (a) => [a, await store.accounting.charges(a, from, to)] as const,
        ),
      );
      return { from, to, bucket, items: usageBuckets(charges, bucket) };
    },

    async wallets(caller: Caller, at: number): Promise<Wallet[]> {
      const wallets: Wallet[] = [];
      for (const account of await accountsOf(caller)) {
        const categories = new Set((await store.accounting.allocations(account)).map((a) => a.category));
        for (const category of categories) wallets.push(await wallet(account, category, at));
      }
      return wallets;
    },

    async browse(
      caller: Caller,
      o: BrowseOptions,
      provider: string,
    ): Promise<{ items: Job[]; next: string | null; itemsPerPage: number }> {
      const limit = pageSize(o.itemsPerPage);
      // Every job here is this provider's container job: other providers and VMs have none.
      const elsewhere =
        (o.filterProvider !== undefined && o.filterProvider !== provider) ||
        o.hideProvider === provider ||
        o.filterType === 'VMS_ONLY';
      if (elsewhere) return { items: [], next: null, itemsPerPage: limit };
      const optional = <K extends string, V>(key: K, value: V | undefined) =>
        (value !== undefined ? { [key]: value } : {}) as Partial<Record<K, V>>;
      const records = await store.jobs.browse({
        visibility: caller.admin ? 'all' : await visibility(caller),
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
        items: await Promise.all(page.map(toJob)),
        next: records.length > limit ? (page.at(-1)?.id ?? null) : null,
        itemsPerPage: limit,
      };
    },
  };
}
