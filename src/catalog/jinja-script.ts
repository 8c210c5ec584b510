import type { Application } from '../model/application.ts';
import type { AppParameterValue } from '../model/parameter-value.ts';
import type { Product } from '../model/product.ts';
import { literal, type RenderOptions, renderValue } from './invocation.ts';
import { escapeBash, renderJinja } from './jinja.ts';

/** What a Jinja invocation is rendered from: the job, its values, where it runs. */
export interface JinjaJob {
  id: string;
  replicas: number;
  application: Application;
  product: Product;
  values: Readonly<Record<string, AppParameterValue>>;
}

/** The application's Jinja template, when its invocation is one (`application: v2`). */
export function jinjaTemplate(app: Application): string | undefined {
  const [only, ...rest] = app.invocation.invocation;
  return only?.type === 'jinja' && rest.length === 0 ? only.template : undefined;
}

/**
 * The template's context for one rank, as IM2's handleJinjaInvocation makes it: numbers and
 * booleans as they are, every other value as the text it renders to (a file's path in the job,
 * an option's value, a peer's host name), and `ucloud` with the job, its machine, its number of
 * nodes, the rank and the application.
 */
export function jinjaContext(job: JinjaJob, rank: number, options: RenderOptions): Record<string, unknown> {
  const parameters = new Map(job.application.invocation.parameters.map((p) => [p.name, p]));
  const context: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(job.values)) {
    if (value.type === 'boolean' || value.type === 'integer' || value.type === 'floating_point') {
      context[name] = value.value;
    } else {
      const text = renderValue(parameters.get(name), value, options);
      if (text !== undefined) context[name] = text;
    }
  }
  const { product, application } = job;
  context.ucloud = {
    jobId: job.id,
    machine: {
      name: product.id,
      category: product.category,
      cpu: product.cpu,
      cpuModel: '',
      memoryInGigs: product.memoryInGigs,
      memoryModel: '',
      gpu: product.gpu ?? 0,
      gpuModel: '',
    },
    nodes: job.replicas,
    rank,
    application: { name: application.metadata.name, version: application.metadata.version },
  };
  return context;
}

/**
 * The container's command for a Jinja invocation: bash running the script rendered for the
 * replica's rank (Volcano's `VC_TASK_INDEX`); one script when every rank's is the same. In
 * Kubernetes' expansion syntax, as every container command is (./invocation.ts).
 */
export function jinjaCommand(template: string, job: JinjaJob, options: RenderOptions = {}): string[] {
  const scripts = Array.from({ length: job.replicas }, (_, rank) =>
    renderJinja(template, jinjaContext(job, rank, options)),
  );
  if (scripts.every((s) => s === scripts[0])) return ['bash', '-c', literal(scripts[0] ?? '')];
  const branches = scripts.map((script, rank) => `${rank}) exec bash -c ${escapeBash(script)} ;;`);
  return ['bash', '-c', literal(['case "$VC_TASK_INDEX" in', ...branches, 'esac'].join('\n'))];
}
