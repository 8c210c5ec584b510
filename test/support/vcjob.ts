/** Volcano Jobs for the local backend's tests: tasks that run a shell script. */
import type { TaskSpec, VolcanoJob } from '../../src/volcano/api/types.ts';

export interface ShellTaskOptions {
  cpu?: string;
  memory?: string;
  /** Task fields besides name, replicas and template (policies, maxRetry, minAvailable). */
  extra?: Partial<TaskSpec>;
}

/** A task whose one container runs `sh -c script` (remember: `$$` is Kubernetes' escaped `$`). */
export function shellTask(
  name: string,
  replicas: number,
  script: string,
  o: ShellTaskOptions = {},
): TaskSpec {
  return {
    name,
    replicas,
    template: {
      spec: {
        restartPolicy: 'Never',
        containers: [
          {
            name,
            image: 'debian',
            command: ['sh', '-c', script],
            resources: { limits: { cpu: o.cpu ?? '100m', memory: o.memory ?? '64Mi' } },
          },
        ],
      },
    },
    ...o.extra,
  };
}

export function vcjob(name: string, tasks: TaskSpec[], spec: Partial<VolcanoJob['spec']> = {}): VolcanoJob {
  return {
    apiVersion: 'batch.volcano.sh/v1alpha1',
    kind: 'Job',
    metadata: { name },
    spec: { tasks, ...spec },
  };
}
