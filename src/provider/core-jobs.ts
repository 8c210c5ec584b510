import { fromUcloudApplication } from '../catalog/ucloud-application.ts';
import type { ResolvedApplication } from '../model/application.ts';
import { IssueList, ValidationError } from '../model/errors.ts';
import { isJobId } from '../model/ids.ts';
import type { JobSpecification } from '../model/job.ts';
import type { Owner } from '../model/owner.ts';
import type { AppParameterValue } from '../model/parameter-value.ts';

// UCloud Core's Job as it sends it to its provider (`POST /ucloud/<p>/jobs`): the whole Job as Core
// stored it, with the application and product Core resolved (SDU-eScience/UCloud
// `provider-integration/shared/pkg/orchestrators/jobs.go` Job, JobSpecification, JobStatus;
// core2 `core2/pkg/orchestrator/job.go:943`).

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The value types ucompute runs with; the other resource types UCloud has are refused by name. */
const VALUE_TYPES = new Set([
  'file',
  'boolean',
  'text',
  'textarea',
  'integer',
  'floating_point',
  'peer',
  'license_server',
  'network',
  'ingress',
]);
const REFUSED_VALUES: Record<string, string> = {
  private_network: 'private networks are not offered by ucompute',
  block_storage: 'block storage is not offered by ucompute',
  workflow: 'workflows are not offered by ucompute',
  modules: 'software modules are not offered by ucompute',
};

export interface CoreJob {
  id: string;
  owner: Owner;
  createdAt: number;
  specification: JobSpecification;
  application: ResolvedApplication;
  /** Core's view of the job's state, when it sent one. */
  state?: string;
}

/** Only the fields a value of its type has: Core's JSON may carry more (nulls, UI hints). */
function value(raw: unknown, path: string, issues: IssueList): AppParameterValue | undefined {
  if (!isObject(raw) || typeof raw.type !== 'string') {
    issues.add(path, 'must be a value with a type');
    return undefined;
  }
  const refused = REFUSED_VALUES[raw.type];
  if (refused !== undefined || !VALUE_TYPES.has(raw.type)) {
    issues.add(path, `is a ${raw.type}: ${refused ?? 'this type is not offered by ucompute'}`);
    return undefined;
  }
  switch (raw.type) {
    case 'file':
      return { type: 'file', path: String(raw.path), ...(raw.readOnly === true ? { readOnly: true } : {}) };
    case 'peer':
      return { type: 'peer', hostname: String(raw.hostname), jobId: String(raw.jobId) };
    case 'license_server':
    case 'network':
    case 'ingress':
      return { type: raw.type, id: String(raw.id) };
    default:
      return { type: raw.type, value: raw.value } as AppParameterValue;
  }
}

function specificationOf(raw: Json, issues: IssueList): JobSpecification {
  const path = 'specification';
  const app = isObject(raw.application) ? raw.application : {};
  const product = isObject(raw.product) ? raw.product : {};
  const parameters: Record<string, AppParameterValue> = {};
  for (const [name, v] of Object.entries(isObject(raw.parameters) ? raw.parameters : {})) {
    const parsed = value(v, `${path}.parameters.${name}`, issues);
    if (parsed) parameters[name] = parsed;
  }
  const resources = (Array.isArray(raw.resources) ? raw.resources : []).flatMap(
    (v, i) => value(v, `${path}.resources[${i}]`, issues) ?? [],
  );
  const optional = <K extends string>(key: K, v: unknown, keep: boolean) =>
    (keep ? { [key]: v } : {}) as Partial<Record<K, never>>;
  return {
    application: { name: String(app.name ?? ''), version: String(app.version ?? '') },
    product: {
      id: String(product.id ?? ''),
      category: String(product.category ?? ''),
      provider: String(product.provider ?? ''),
    },
    ...optional('name', raw.name, typeof raw.name === 'string' && raw.name !== ''),
    replicas: typeof raw.replicas === 'number' ? raw.replicas : 1,
    parameters,
    resources,
    // Core sends none when the user asked for none (core2 then sets no limit): as a job that asks
    // for no time here, it gets its tool's default within the operator's maximum, else the maximum.
    ...optional(
      'timeAllocation',
      raw.timeAllocation as JobSpecification['timeAllocation'],
      isObject(raw.timeAllocation),
    ),
    ...optional('openedFile', raw.openedFile, typeof raw.openedFile === 'string' && raw.openedFile !== ''),
    ...optional('restartOnExit', raw.restartOnExit, typeof raw.restartOnExit === 'boolean'),
    ...optional('sshEnabled', raw.sshEnabled, typeof raw.sshEnabled === 'boolean'),
    ...optional('allowDuplicateJob', raw.allowDuplicateJob, typeof raw.allowDuplicateJob === 'boolean'),
  };
}

/**
 * Reads one Job from Core; throws a ValidationError naming every field ucompute cannot take (the
 * application's tool backend, a resource type it does not offer, a missing field).
 */
export function readCoreJob(raw: unknown, now: number): CoreJob {
  const issues = new IssueList();
  if (!isObject(raw)) throw new ValidationError([{ path: '', message: 'must be a Job' }]);
  const id = typeof raw.id === 'string' ? raw.id : '';
  if (!isJobId(id)) issues.add('id', 'must be a job id of 1 to 40 lower-case letters and digits');
  const owner = isObject(raw.owner) ? raw.owner : {};
  if (typeof owner.createdBy !== 'string' || owner.createdBy === '')
    issues.add('owner.createdBy', 'is required');
  const project = typeof owner.project === 'string' && owner.project !== '' ? owner.project : undefined;
  const specification = specificationOf(isObject(raw.specification) ? raw.specification : {}, issues);
  const status = isObject(raw.status) ? raw.status : {};
  const { resolved, issues: appIssues } = fromUcloudApplication(status.resolvedApplication);
  for (const issue of appIssues)
    issues.add(`status.resolvedApplication.${issue.path}`.replace(/\.$/, ''), issue.message);
  issues.throwIfAny();
  const { name, version } = resolved!.application.metadata;
  if (name !== specification.application.name || version !== specification.application.version) {
    issues.add('status.resolvedApplication.metadata', `is ${name}@${version}, not the job's application`);
  }
  issues.throwIfAny();
  return {
    id,
    owner: { createdBy: String(owner.createdBy), ...(project !== undefined ? { project } : {}) },
    createdAt: typeof raw.createdAt === 'number' ? raw.createdAt : now,
    specification,
    application: resolved!,
    ...(typeof status.state === 'string' ? { state: status.state } : {}),
  };
}
