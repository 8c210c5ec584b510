import { ownerKey } from '../model/owner.ts';
import { PLUGINS } from '../plugins/index.ts';
import type {
  ActiveJob,
  CreateContext,
  JobBuild,
  JobPlugin,
  LifecycleContext,
  PreparedJob,
} from '../plugins/plugin.ts';
import {
  CREATED_BY_ANNOTATION,
  JOB_ID_LABEL,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  OWNER_LABEL,
  PROJECT_ANNOTATION,
} from '../volcano/labels.ts';
import { labelValue, volcanoJobName } from '../volcano/names.ts';
import type { Logger } from './log.ts';

/** The empty builder every job starts from: its name, where it goes, and how to find it again. */
export function emptyBuild(job: PreparedJob, ctx: CreateContext): JobBuild {
  const owner = ownerKey(job.owner);
  return {
    volcanoJob: {
      apiVersion: 'batch.volcano.sh/v1alpha1',
      kind: 'Job',
      metadata: {
        name: volcanoJobName(job.id),
        namespace: ctx.config.kubernetes.namespace,
        labels: {
          [JOB_ID_LABEL]: job.id,
          [OWNER_LABEL]: labelValue(`${owner.kind === 'user' ? 'u' : 'p'}-${owner.id}`),
          [MANAGED_BY_LABEL]: MANAGED_BY,
        },
        annotations: {
          [CREATED_BY_ANNOTATION]: job.owner.createdBy,
          ...(job.owner.project !== undefined ? { [PROJECT_ANNOTATION]: job.owner.project } : {}),
        },
      },
      spec: { tasks: [] },
    },
    companions: [],
  };
}

/** A plugin's hook failed: which plugin, which hook, and the plugin's own message. */
export class HookError extends Error {
  readonly plugin: string;
  readonly hook: string;
  constructor(plugin: string, hook: string, cause: unknown) {
    super(`${plugin}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.plugin = plugin;
    this.hook = hook;
  }
}

/**
 * JobManagement.create: every plugin's `onCreate`, in the list's order, over one builder. The
 * result is what a backend submits; nothing here talks to a cluster. The first plugin that fails
 * stops the pipeline (the build is half made) with a HookError naming it.
 */
export async function buildJob(
  job: PreparedJob,
  ctx: CreateContext,
  plugins: readonly JobPlugin[] = PLUGINS,
): Promise<JobBuild> {
  const build = emptyBuild(job, ctx);
  for (const plugin of plugins) {
    try {
      const pending = plugin.onCreate?.(ctx, job, build);
      if (pending) await pending;
    } catch (e) {
      throw new HookError(plugin.name, 'onCreate', e);
    }
  }
  return build;
}

/**
 * The one place the six hooks run, each in the list's order, under one rule: a job whose
 * `onCreate` fails has no build, so creation answers the failure for the job to end with; a
 * failure of any later hook (`onJobStart`, `onJobComplete`, `onJobSuspend`, `onCleanup`,
 * `onJobMonitoring`) is logged with its plugin and hook, and the other plugins still run, since
 * the job's state is already decided by then.
 */
export interface PluginHooks {
  create(job: PreparedJob, ctx: CreateContext): Promise<{ build: JobBuild } | { failure: string }>;
  start(ctx: LifecycleContext, job: ActiveJob): Promise<void>;
  complete(ctx: LifecycleContext, job: ActiveJob): Promise<void>;
  suspend(ctx: LifecycleContext, job: ActiveJob): Promise<void>;
  cleanup(ctx: LifecycleContext, jobId: string): Promise<void>;
  monitoring(ctx: LifecycleContext, jobs: readonly ActiveJob[]): Promise<void>;
  /** When a monitoring pass next has something to do for this running job (Infinity: never). */
  monitoringDueAt(ctx: LifecycleContext, job: ActiveJob): number;
  /** Whether any plugin has an onJobStart (when none has, starting jobs need not be read back). */
  readonly hasStart: boolean;
}

export function pluginHooks(plugins: readonly JobPlugin[], log?: Logger): PluginHooks {
  const monitored = plugins.filter((p) => p.onJobMonitoring !== undefined);
  async function each(hook: string, run: (p: JobPlugin) => unknown): Promise<void> {
    for (const plugin of plugins) {
      try {
        await run(plugin);
      } catch (e) {
        log?.error({ err: e, plugin: plugin.name, hook }, 'plugin hook failed');
      }
    }
  }
  return {
    async create(job, ctx) {
      try {
        return { build: await buildJob(job, ctx, plugins) };
      } catch (e) {
        log?.error({ err: e, jobId: job.id, hook: 'onCreate' }, 'plugin hook failed');
        return { failure: (e as Error).message };
      }
    },
    start: (ctx, job) => each('onJobStart', (p) => p.onJobStart?.(ctx, job)),
    complete: (ctx, job) => each('onJobComplete', (p) => p.onJobComplete?.(ctx, job)),
    suspend: (ctx, job) => each('onJobSuspend', (p) => p.onJobSuspend?.(ctx, job)),
    cleanup: (ctx, jobId) => each('onCleanup', (p) => p.onCleanup?.(ctx, jobId)),
    monitoring: (ctx, jobs) => each('onJobMonitoring', (p) => p.onJobMonitoring?.(ctx, jobs)),
    monitoringDueAt(ctx, job) {
      let due = Number.POSITIVE_INFINITY;
      for (const p of monitored) {
        // A plugin that cannot say is due every pass.
        const at = p.monitoringDueAt ? p.monitoringDueAt(ctx, job) : Number.NEGATIVE_INFINITY;
        if (at !== null) due = Math.min(due, at);
      }
      return due;
    },
    hasStart: plugins.some((p) => p.onJobStart !== undefined),
  };
}
