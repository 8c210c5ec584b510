import type { Application } from '../model/application.ts';
import type { ComputeSupport, ExportedParameters, Job, ResolvedApplication } from '../model/job.ts';
import type { Product } from '../model/product.ts';
import { findProduct, type JobEnvironment } from './prepare.ts';

// A job as UCloud's clients expect to read it: the specification with its defaults filled in, the
// caller's permissions, the exported parameters, and (on request) the resolved application,
// product and support.

/** UCloud's include flags for one job (JobIncludeFlags); the filters are in BrowseOptions. */
export interface IncludeFlags {
  includeApplication?: boolean;
  includeProduct?: boolean;
  includeSupport?: boolean;
}

/** UCloud's JobParameters.json version that this shape follows (UCloud's ExportedParameters). */
const SITE_VERSION = 3;

/** Anyone who sees a job here may also change and end it; there are no access lists. */
const OWNER_PERMISSIONS = ['READ', 'EDIT', 'ADMIN'] as const;

export function computeSupport(product: Product, provider: string): ComputeSupport {
  return {
    product: { id: product.id, category: product.category, provider },
    docker: {
      enabled: true,
      web: true,
      vnc: true,
      logs: true,
      terminal: true,
      peers: true,
      timeExtension: true,
      utilization: true,
    },
    virtualMachine: { enabled: false, suspension: false },
    native: { enabled: false },
  };
}

export function resolvedApplication(
  application: Application,
  tool: ResolvedApplication['invocation']['tool']['tool'],
): ResolvedApplication {
  const { tool: reference, ...invocation } = application.invocation;
  return { metadata: application.metadata, invocation: { ...invocation, tool: { ...reference, tool } } };
}

export function presentJob(job: Job, env: JobEnvironment, flags: IncludeFlags = {}): Job {
  const provider = env.config.provider;
  const given = job.specification;
  const specification = {
    ...given,
    product: { ...given.product, provider: given.product.provider ?? provider },
    replicas: given.replicas ?? 1,
    parameters: given.parameters ?? {},
    resources: given.resources ?? [],
  };
  const product = findProduct(env.products, given.product.id, given.product.category);
  const resolved = env.catalog.find(given.application.name, given.application.version);
  const machine = product ?? { cpu: 0, memoryInGigs: 0, gpu: 0 };
  const jobParametersJson: ExportedParameters = {
    siteVersion: SITE_VERSION,
    request: {
      application: given.application,
      product: specification.product,
      ...(given.name !== undefined ? { name: given.name } : {}),
      replicas: specification.replicas,
      parameters: specification.parameters,
      resources: specification.resources,
      timeAllocation: given.timeAllocation ?? null,
      resolvedProduct: product ?? null,
      allowDuplicateJob: given.allowDuplicateJob ?? false,
      sshEnabled: given.sshEnabled ?? false,
    },
    resolvedResources: { ingress: {} },
    machineType: { cpu: machine.cpu, memoryInGigs: machine.memoryInGigs, gpu: machine.gpu ?? 0 },
  };
  return {
    ...job,
    specification,
    status: {
      ...job.status,
      jobParametersJson,
      ...(flags.includeApplication && resolved
        ? { resolvedApplication: resolvedApplication(resolved.application, resolved.tool) }
        : {}),
      ...(flags.includeProduct && product ? { resolvedProduct: product } : {}),
      ...(flags.includeSupport && product
        ? { resolvedSupport: { product, support: computeSupport(product, provider) } }
        : {}),
    },
    permissions: { myself: [...OWNER_PERMISSIONS], others: [] },
  };
}
