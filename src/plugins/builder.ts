import type {
  Container,
  PodSpec,
  PodTemplateSpec,
  SecurityContext,
  TaskSpec,
  Volume,
  VolumeMount,
} from '../volcano/api/types.ts';
import { JOB_TASK_NAME, USER_CONTAINER_NAME } from '../volcano/names.ts';
import type { JobBuild } from './plugin.ts';

/** Accessors over the builder for plugins that run after Task, which creates the task. */

export function jobTask(build: JobBuild): TaskSpec {
  const task = build.volcanoJob.spec.tasks.find((t) => t.name === JOB_TASK_NAME);
  if (!task) throw new Error('the Task plugin must run before this plugin');
  return task;
}

export function podTemplate(build: JobBuild): PodTemplateSpec {
  return jobTask(build).template;
}

export function podSpec(build: JobBuild): PodSpec {
  return jobTask(build).template.spec;
}

export function userContainer(build: JobBuild): Container {
  const container = podSpec(build).containers.find((c) => c.name === USER_CONTAINER_NAME);
  if (!container) throw new Error('the Task plugin must run before this plugin');
  return container;
}

export function addVolume(build: JobBuild, volume: Volume): void {
  const spec = podSpec(build);
  spec.volumes = [...(spec.volumes ?? []), volume];
}

export function mount(container: Container, volumeMount: VolumeMount): void {
  container.volumeMounts = [...(container.volumeMounts ?? []), volumeMount];
}

export function setEnv(container: Container, name: string, value: string): void {
  const env = (container.env ?? []).filter((e) => e.name !== name);
  env.push({ name, value });
  container.env = env;
}

export function annotateJob(build: JobBuild, key: string, value: string): void {
  build.volcanoJob.metadata.annotations = { ...build.volcanoJob.metadata.annotations, [key]: value };
}

export function annotatePods(build: JobBuild, key: string, value: string): void {
  const template = podTemplate(build);
  template.metadata = {
    ...template.metadata,
    annotations: { ...template.metadata?.annotations, [key]: value },
  };
}

/** A container's settings under Pod Security "restricted": a non-root uid, no capabilities, no escalation. */
export function restrictedSecurityContext(uid: number): SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: uid,
    runAsGroup: uid,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
  };
}
