import type { Catalog } from '../catalog/catalog.ts';
import { licenseAddressIn } from '../catalog/invocation.ts';
import { jinjaCommand, jinjaTemplate } from '../catalog/jinja-script.ts';
import { checkParameters } from '../catalog/parameters.ts';
import { type Application, durationMillis } from '../model/application.ts';
import type { ResolvedPipelineConfig } from '../model/config.ts';
import { IssueList, ValidationError } from '../model/errors.ts';
import { JobSpecification } from '../model/job.ts';
import { type Owner, ownerDrive } from '../model/owner.ts';
import type { AppParameterValue } from '../model/parameter-value.ts';
import { normalisePath } from '../model/paths.ts';
import type { Product } from '../model/product.ts';
import { parser } from '../model/validate.ts';
import type { PreparedJob } from '../plugins/plugin.ts';
import { drivesOf } from '../storage/files.ts';
import type { EntryKind, InputStorage } from '../storage/job-storage.ts';
import type { UserStore } from '../store/users.ts';
import type { LargestMachine } from './backend.ts';

const jobSpecification = parser(JobSpecification);

/** What a job is checked against: the catalogue, the products and the configuration. */
export interface JobEnvironment {
  catalog: Catalog;
  products: readonly Product[];
  config: ResolvedPipelineConfig;
}

export interface JobIdentity {
  id: string;
  owner: Owner;
  createdAt: number;
  /**
   * The drives the creator may take files and folders from (their home, their projects'):
   * without it, the owner's drive only.
   */
  drives?: readonly string[];
}

/**
 * What the kernel can pass to a program: no argument holds a NUL byte or more than
 * MAX_ARG_STRLEN (32 pages, 128 KiB with its terminating NUL), and arguments and environment
 * together stay within ARG_MAX (a quarter of the 8 MiB stack: 2 MiB). Half of that is left to the
 * image's own environment and the invocation's fixed words.
 */
const MAX_ARGUMENT_BYTES = 128 * 1024 - 1;
const MAX_ARGUMENTS_TOTAL_BYTES = 1024 * 1024;

/** Issues for parameter values no exec can carry, each naming its parameter. */
function unpassableValues(parameters: Record<string, AppParameterValue>, issues: IssueList): void {
  let total = 0;
  for (const [name, value] of Object.entries(parameters)) {
    const path = `specification.parameters.${name}`;
    for (const [field, text] of Object.entries(value)) {
      if (field === 'type' || typeof text !== 'string') continue;
      const bytes = Buffer.byteLength(text);
      total += bytes;
      if (bytes > MAX_ARGUMENT_BYTES) {
        issues.add(path, `is ${bytes} bytes; one program argument holds at most ${MAX_ARGUMENT_BYTES}`);
      }
    }
  }
  if (total > MAX_ARGUMENTS_TOTAL_BYTES) {
    issues.add(
      'specification.parameters',
      `hold ${total} bytes together; a job's arguments and environment hold at most ${MAX_ARGUMENTS_TOTAL_BYTES}`,
    );
  }
}

/** A code point that UTF-8 cannot carry: half of a UTF-16 surrogate pair, alone. */
const LONE_SURROGATE = /\p{Cs}/u;

/** What no text of a job can hold, in words: undefined when nothing. */
function textProblem(text: string): string | undefined {
  if (text.includes('\0')) return 'contains a NUL byte';
  if (LONE_SURROGATE.test(text)) return 'contains a character that is not valid Unicode (a lone surrogate)';
  return undefined;
}

/**
 * Issues for text anywhere in a specification (names of fields too) that a job cannot hold: a
 * NUL byte or a lone surrogate. No program argument, environment variable or file name carries
 * them (UTF-8 has no lone surrogates: they would arrive as U+FFFD), and PostgreSQL's jsonb refuses
 * both (`\u0000`, `\ud800` in the JSON kept): one such job would fail every search of its owner's
 * jobs there. A parameter's value is named by the parameter, as its other limits are.
 */
function unholdableText(spec: JobSpecification, issues: IssueList): void {
  const walk = (value: unknown, path: string, what: string): void => {
    if (typeof value === 'string') {
      const problem = textProblem(value);
      if (problem) issues.add(path, `${problem}, which ${what}`);
    } else if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) walk(v, `${path}[${i}]`, what);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, v] of Object.entries(value)) {
        const problem = textProblem(key);
        if (problem) issues.add(path, `the name of one of its fields ${problem}, which ${what}`);
        else walk(v, `${path}.${key}`, what);
      }
    }
  };
  const { parameters = {}, ...rest } = spec;
  walk(rest, 'specification', "a job's specification cannot hold");
  for (const [name, value] of Object.entries(parameters)) {
    const problem = textProblem(name);
    if (problem) {
      issues.add('specification.parameters', `the name of a parameter ${problem}`);
      continue;
    }
    for (const [field, v] of Object.entries(value)) {
      if (field === 'value') walk(v, `specification.parameters.${name}`, 'no program argument can carry');
      else walk(v, `specification.parameters.${name}.${field}`, "a job's specification cannot hold");
    }
  }
}

/**
 * The longest time a job of this product may be given, in total with its extensions: the
 * product's own maximum or the operator's, whichever is shorter; null when neither sets one.
 */
export function maxTimeAllocationMillis(product: Product, config: ResolvedPipelineConfig): number | null {
  const hours = [product.maxTimeAllocationHours, config.maxTimeAllocationHours ?? undefined].filter(
    (h) => h !== undefined,
  );
  return hours.length > 0 ? Math.min(...hours) * 3_600_000 : null;
}

/** The drives a job's creator may take files and folders from: their home, their projects' drives. */
export async function creatorDrives(
  users: Pick<UserStore, 'memberships'>,
  username: string,
): Promise<string[]> {
  return drivesOf(
    username,
    (await users.memberships(username)).map((m) => m.projectId),
  );
}

export function findProduct(products: readonly Product[], id: string, category: string): Product | undefined {
  return products.find((p) => p.id === id && p.category === category);
}

/**
 * Validates a job specification for an owner: its shape, application, product, replicas, ssh,
 * time allocation and every parameter. Throws one ValidationError naming every bad field.
 */
export function prepareJob(specification: unknown, identity: JobIdentity, env: JobEnvironment): PreparedJob {
  const spec = jobSpecification.parse(specification, 'specification');
  const issues = new IssueList();
  // Before anything reads it: the issues' paths and messages would carry the text.
  unholdableText(spec, issues);
  issues.throwIfAny();

  const resolved = env.catalog.find(spec.application.name, spec.application.version);
  if (!resolved) {
    const versions = env.catalog.versions(spec.application.name);
    issues.add(
      'specification.application',
      versions.length > 0
        ? `${spec.application.name} has no version ${spec.application.version} (there is ${versions.join(', ')})`
        : `names no application in the catalogue (${spec.application.name})`,
    );
  }
  const product = findProduct(env.products, spec.product.id, spec.product.category);
  if (!product) {
    issues.add('specification.product', `names no product (${spec.product.id} in ${spec.product.category})`);
  }
  if (spec.product.provider !== undefined && spec.product.provider !== env.config.provider) {
    issues.add('specification.product.provider', `must be ${env.config.provider}`);
  }
  issues.throwIfAny();
  const { application, tool } = resolved!;
  const invocation = application.invocation;

  const replicas = spec.replicas ?? 1;
  if (replicas > 1 && !invocation.allowMultiNode) {
    issues.add(
      'specification.replicas',
      `must be 1: ${application.metadata.name} does not run on several nodes`,
    );
  }
  // Root in the container is the operator's to allow (SPEC §6), never a user's.
  if (invocation.container.runAsRoot && !env.config.security.allowRootApps) {
    issues.add(
      'specification.application',
      `${application.metadata.name} runs as root (runAsRoot), which this provider's configuration does not allow: ` +
        'its root would be root on the node (set kubernetes.userNamespaces where the cluster supports user namespaces, or security.allowRootApps)',
    );
  }
  // As UCloud: ssh where the application offers it, and always where it requires it.
  const sshMode = invocation.ssh.mode;
  if (spec.sshEnabled === true && sshMode === 'DISABLED') {
    issues.add('specification.sshEnabled', `${application.metadata.name} does not offer ssh`);
  }
  const sshEnabled = sshMode === 'MANDATORY' || (sshMode === 'OPTIONAL' && spec.sshEnabled === true);

  const maximum = product ? maxTimeAllocationMillis(product, env.config) : null;
  let timeAllocationMillis: number | null = null;
  if (spec.timeAllocation !== undefined && spec.timeAllocation !== null) {
    timeAllocationMillis = durationMillis(spec.timeAllocation);
    if (timeAllocationMillis <= 0) issues.add('specification.timeAllocation', 'must be longer than zero');
  } else if (spec.timeAllocation === undefined) {
    // Not asked for: the tool's default within the maximum, else the maximum (none without one).
    const byDefault = tool.defaultTimeAllocation && durationMillis(tool.defaultTimeAllocation);
    timeAllocationMillis = byDefault ? Math.min(byDefault, maximum ?? byDefault) : maximum;
  }

  if (maximum !== null && (timeAllocationMillis === null || timeAllocationMillis > maximum)) {
    issues.add(
      'specification.timeAllocation',
      `must be at most ${maximum / 3_600_000} hours, the maximum for ${product!.id}`,
    );
  }
  unpassableValues(spec.parameters ?? {}, issues);

  let parameters: PreparedJob['parameters'] | undefined;
  try {
    parameters = checkParameters(application, spec, {
      drives: identity.drives ?? [ownerDrive(identity.owner)],
      licenseServers: new Set(env.config.licenseServers.map((s) => s.id)),
      sessionDrives: [ownerDrive(identity.owner)],
    });
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    issues.addAll(e.issues);
  }
  if (parameters && product) {
    const failure = jinjaFailure(
      application,
      { id: identity.id, replicas, product, values: parameters.values },
      env,
    );
    if (failure !== undefined) issues.add('specification.application', failure);
  }
  issues.throwIfAny();

  const { drives: _drives, ...ids } = identity;
  return {
    ...ids,
    specification: spec,
    application,
    tool,
    product: product!,
    replicas,
    parameters: parameters!,
    timeAllocationMillis,
    sshEnabled,
  };
}

/**
 * Why the application's Jinja invocation (`application: v2`) does not render for this job, if it
 * does not (a syntax error, a function ucompute does not offer such as `dynamicInterface`, a
 * script too long): found when the job is created, not when it is submitted.
 */
function jinjaFailure(
  application: Application,
  job: { id: string; replicas: number; product: Product; values: Record<string, AppParameterValue> },
  env: JobEnvironment,
): string | undefined {
  const template = jinjaTemplate(application, job.values);
  if (template === undefined) return undefined;
  try {
    jinjaCommand(
      template,
      { ...job, application },
      { licenseAddress: licenseAddressIn(env.config.licenseServers) },
    );
    return undefined;
  } catch (e) {
    // Nunjucks says where on a line of its own: one line, as every issue is.
    const why = (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, ' ');
    return `${application.metadata.name}'s invocation does not render for this job: ${why}`;
  }
}

const INPUT_KINDS: Record<string, EntryKind> = { input_file: 'file', input_directory: 'folder' };

/** The drive a normalised storage path lies in: its first two names (`/home/alice`, `/projects/p1`). */
const driveOf = (path: string): string => path.split('/').slice(0, 3).join('/');

/**
 * Issues for input files and folders, and additional folders, that are not there, or not of
 * their parameter's kind, as `sbatch` refuses a missing script: found now, not when the job
 * starts. Nothing is created.
 */
export async function checkInputs(job: PreparedJob, storage: InputStorage, issues: IssueList): Promise<void> {
  const wanted: { field: string; path: string; kinds: readonly EntryKind[] }[] = [];
  for (const parameter of job.application.invocation.parameters) {
    const kind = INPUT_KINDS[parameter.type];
    const value = job.parameters.values[parameter.name];
    if (kind === undefined || value?.type !== 'file') continue;
    wanted.push({ field: `specification.parameters.${parameter.name}`, path: value.path, kinds: [kind] });
  }
  for (const [i, resource] of (job.specification.resources ?? []).entries()) {
    if (resource.type !== 'file') continue;
    const path = normalisePath(resource.path) ?? resource.path;
    wanted.push({ field: `specification.resources[${i}]`, path, kinds: ['folder', 'file'] });
  }
  await Promise.all(
    wanted.map(async ({ field, path, kinds }) => {
      const drive = driveOf(path);
      const found = await storage.entryKind(path, drive);
      if (kinds.includes(found)) return;
      if (found === 'missing') issues.add(field, `${path} does not exist`);
      else if (found === 'outside') issues.add(field, `${path} leads out of ${drive} through a link`);
      else
        issues.add(
          field,
          `${path} is not a ${kinds.join(' or ')}${found === 'other' ? '' : ` (it is a ${found})`}`,
        );
    }),
  );
}

const GIB = 2 ** 30;
const cpus = (millis: number) => `${+(millis / 1000).toFixed(2)} CPU${millis === 1000 ? '' : 's'}`;
const gibs = (bytes: number) => `${+(bytes / GIB).toFixed(2)} GiB of memory`;

/**
 * Issues for a job no machine of the backend can ever hold, as `sbatch` refuses a job larger than
 * every node: it would otherwise wait or fail later. Nothing is said when the machine is unknown.
 */
export function checkFits(job: PreparedJob, machine: LargestMachine | null, issues: IssueList): void {
  if (machine === null) return;
  const { product, replicas } = job;
  const together = machine.holdsEveryReplica && replicas > 1;
  const count = together ? replicas : 1;
  const need = { cpuMillis: product.cpu * 1000 * count, memoryBytes: product.memoryInGigs * GIB * count };
  const what = together ? `${replicas} replicas of ${product.id} need` : `${product.id} needs`;
  const where = together
    ? 'together on the one machine here, which has'
    : 'per replica; the largest machine here has';
  const path = together ? 'specification.replicas' : 'specification.product';
  if (need.cpuMillis > machine.cpuMillis) {
    issues.add(path, `${what} ${cpus(need.cpuMillis)} ${where} ${cpus(machine.cpuMillis)}`);
  }
  if (need.memoryBytes > machine.memoryBytes) {
    issues.add(path, `${what} ${gibs(need.memoryBytes)} ${where} ${gibs(machine.memoryBytes)}`);
  }
}
