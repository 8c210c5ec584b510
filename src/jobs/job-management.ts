import { ownerKey } from '../model/owner.ts';
import { PLUGINS } from '../plugins/index.ts';
import type { CreateContext, JobBuild, JobPlugin, PreparedJob } from '../plugins/plugin.ts';
import {
  CREATED_BY_ANNOTATION,
  JOB_ID_LABEL,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  OWNER_LABEL,
  PROJECT_ANNOTATION,
} from '../volcano/labels.ts';
import { labelValue, volcanoJobName } from '../volcano/names.ts';

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

/**
 * JobManagement.create: every plugin's `onCreate`, in the list's order, over one builder. The
 * result is what a backend submits; nothing here talks to a cluster.
 */
export async function buildJob(
  job: PreparedJob,
  ctx: CreateContext,
  plugins: readonly JobPlugin[] = PLUGINS,
): Promise<JobBuild> {
  const build = emptyBuild(job, ctx);
  for (const plugin of plugins) {
    const pending = plugin.onCreate?.(ctx, job, build);
    if (pending) await pending;
  }
  return build;
}
