import type { Application, ApplicationParameter } from '../model/application.ts';
import { IssueList, joinPath } from '../model/errors.ts';
import type { AppParameterValue, AppParameterValueOf } from '../model/parameter-value.ts';
import { baseName, isInside, normalisePath, parentPath, pathProblem } from '../model/paths.ts';
import { inRange } from './yaml-v1.ts';

/** A file or folder from storage, mounted into the job at `/work/<name>`. */
export interface MountedFile {
  path: string;
  readOnly: boolean;
  mountPath: string;
}

export interface Peer {
  hostname: string;
  jobId: string;
}

export interface CheckedParameters {
  /** Every parameter that has a value (given or default), normalised. */
  values: Record<string, AppParameterValue>;
  files: MountedFile[];
  peers: Peer[];
  /** `/work/<parent>/<file>` for the file the job was opened with. */
  openedFile?: string;
}

export interface ParameterInput {
  parameters?: Record<string, AppParameterValue> | undefined;
  resources?: AppParameterValue[] | undefined;
  openedFile?: string | undefined;
}

export interface ParameterRules {
  /** Folders the owner's files may come from (`/home/<user>`, `/projects/<id>`). */
  drives: readonly string[];
  licenseServers: ReadonlySet<string>;
  /**
   * Drives mounted read-write at `/work/<name>` in every job of an application that allows
   * additional folders (the sessions' own files: the owner's drive), as if given as resources.
   */
  sessionDrives?: readonly string[];
}

const ACCEPTS: Record<ApplicationParameter['type'], readonly AppParameterValue['type'][]> = {
  input_file: ['file'],
  input_directory: ['file'],
  text: ['text'],
  textarea: ['textarea', 'text'],
  integer: ['integer'],
  floating_point: ['floating_point', 'integer'],
  boolean: ['boolean'],
  enumeration: ['text'],
  peer: ['peer'],
  license_server: ['license_server'],
  ingress: ['ingress'],
  network_ip: ['network'],
};

/**
 * Checks a job's parameter values against its application: mandatory values present, defaults
 * applied, types, ranges and options, files inside the owner's drives, peers with unique
 * host names. Every problem names its parameter (`specification.parameters.<name>`).
 */
export function checkParameters(
  app: Application,
  input: ParameterInput,
  rules: ParameterRules,
): CheckedParameters {
  const issues = new IssueList();
  const values: Record<string, AppParameterValue> = {};
  const given = input.parameters ?? {};
  const known = new Map(app.invocation.parameters.map((p) => [p.name, p]));

  for (const name of Object.keys(given)) {
    if (!known.has(name)) {
      issues.add(joinPath('specification.parameters', name), `is not a parameter of ${app.metadata.name}`);
    }
  }

  for (const parameter of app.invocation.parameters) {
    const path = joinPath('specification.parameters', parameter.name);
    const value = Object.hasOwn(given, parameter.name) ? given[parameter.name] : undefined;
    if (value === undefined) {
      if (parameter.defaultValue !== undefined) values[parameter.name] = parameter.defaultValue;
      else if (!parameter.optional) issues.add(path, `is required (${parameter.title})`);
      continue;
    }
    const checked = checkValue(parameter, value, path, rules, issues);
    if (checked !== undefined) values[parameter.name] = checked;
  }

  const files: MountedFile[] = [];
  const peers: Peer[] = [];
  for (const value of Object.values(values)) {
    if (value.type === 'file') files.push(mountOf(value));
    if (value.type === 'peer') peers.push({ hostname: value.hostname, jobId: value.jobId });
  }

  if (app.invocation.allowAdditionalMounts) {
    for (const drive of rules.sessionDrives ?? [])
      files.push(mountOf({ type: 'file', path: drive, readOnly: false }));
  }

  (input.resources ?? []).forEach((resource, i) => {
    const path = joinPath('specification.resources', i);
    switch (resource.type) {
      case 'file': {
        if (!app.invocation.allowAdditionalMounts) {
          issues.add(path, `${app.metadata.name} does not allow additional folders`);
          return;
        }
        const file = checkFile(resource, path, rules, issues);
        if (file) files.push(mountOf(file));
        return;
      }
      case 'peer':
        if (!app.invocation.allowAdditionalPeers) {
          issues.add(path, `${app.metadata.name} does not allow additional peers`);
          return;
        }
        peers.push({ hostname: resource.hostname, jobId: resource.jobId });
        return;
      case 'network':
      case 'ingress':
        issues.add(joinPath(path, 'type'), `${resource.type} resources are not offered by this provider`);
        return;
      default:
        issues.add(joinPath(path, 'type'), 'must be file, peer, network or ingress');
    }
  });

  let openedFile: string | undefined;
  if (input.openedFile !== undefined) {
    const path = normalisePath(input.openedFile);
    const problem = path !== undefined ? pathProblem(path) : undefined;
    // The parent folder is what gets mounted, so it must lie in a drive too (a drive root's parent is everyone's).
    if (problem !== undefined) {
      issues.add('specification.openedFile', problem);
    } else if (path === undefined || !rules.drives.some((d) => isInside(parentPath(path), d))) {
      issues.add('specification.openedFile', `must be a file inside ${rules.drives.join(' or ')}`);
    } else {
      const folder = mountOf({ type: 'file', path: parentPath(path), readOnly: false });
      files.push(folder);
      openedFile = `${folder.mountPath}/${baseName(path)}`;
    }
  }

  const mounts = new Map<string, string>();
  for (const f of files) {
    const other = mounts.get(f.mountPath);
    if (other !== undefined && other !== f.path) {
      issues.add('specification', `${f.path} and ${other} would both be mounted at ${f.mountPath}`);
    }
    mounts.set(f.mountPath, f.path);
  }
  const hostnames = new Set<string>();
  for (const p of peers) {
    if (hostnames.has(p.hostname)) issues.add('specification', `peer host name ${p.hostname} is used twice`);
    hostnames.add(p.hostname);
  }
  issues.throwIfAny();

  return {
    values,
    files: dedupeMounts(files),
    peers,
    ...(openedFile !== undefined ? { openedFile } : {}),
  };
}

function checkValue(
  parameter: ApplicationParameter,
  value: AppParameterValue,
  path: string,
  rules: ParameterRules,
  issues: IssueList,
): AppParameterValue | undefined {
  const accepted = ACCEPTS[parameter.type];
  if (!accepted.includes(value.type)) {
    issues.add(joinPath(path, 'type'), `must be ${accepted.join(' or ')} for a ${parameter.type} parameter`);
    return undefined;
  }
  const before = issues.issues.length;
  switch (parameter.type) {
    case 'input_file':
    case 'input_directory':
      return checkFile(value as AppParameterValueOf<'file'>, path, rules, issues);
    case 'integer':
    case 'floating_point': {
      const n = (value as AppParameterValueOf<'integer' | 'floating_point'>).value;
      if (!Number.isFinite(n)) {
        issues.add(joinPath(path, 'value'), 'must be a finite number');
        return undefined;
      }
      if (!inRange(parameter, n, joinPath(path, 'value'), issues.issues)) return undefined;
      return parameter.type === 'floating_point' ? { type: 'floating_point', value: n } : value;
    }
    case 'enumeration': {
      const text = (value as AppParameterValueOf<'text'>).value;
      const option =
        parameter.options.find((o) => o.value === text) ?? parameter.options.find((o) => o.name === text);
      if (!option) {
        issues.add(
          joinPath(path, 'value'),
          `must be one of ${parameter.options.map((o) => o.value).join(', ')}`,
        );
        return undefined;
      }
      return { type: 'text', value: option.value };
    }
    case 'license_server': {
      const id = (value as AppParameterValueOf<'license_server'>).id;
      if (!rules.licenseServers.has(id)) issues.add(joinPath(path, 'id'), `names no license server (${id})`);
      break;
    }
    case 'ingress':
    case 'network_ip':
      issues.add(path, `${parameter.type} parameters are not offered by this provider`);
      break;
  }
  return issues.issues.length === before ? value : undefined;
}

function checkFile(
  value: AppParameterValueOf<'file'>,
  path: string,
  rules: ParameterRules,
  issues: IssueList,
): AppParameterValueOf<'file'> | undefined {
  const normalised = normalisePath(value.path);
  if (normalised === undefined) {
    issues.add(joinPath(path, 'path'), 'must be an absolute path without . or .. segments');
    return undefined;
  }
  const problem = pathProblem(normalised);
  if (problem !== undefined) {
    issues.add(joinPath(path, 'path'), problem);
    return undefined;
  }
  if (!rules.drives.some((d) => isInside(normalised, d))) {
    issues.add(joinPath(path, 'path'), `must lie inside ${rules.drives.join(' or ')}`);
    return undefined;
  }
  return { type: 'file', path: normalised, readOnly: value.readOnly ?? false };
}

function mountOf(file: AppParameterValueOf<'file'>): MountedFile {
  return { path: file.path, readOnly: file.readOnly ?? false, mountPath: `/work/${baseName(file.path)}` };
}

/** The same folder given twice is mounted once, writable if either asked for it. */
function dedupeMounts(files: MountedFile[]): MountedFile[] {
  const byPath = new Map<string, MountedFile>();
  for (const f of files) {
    const seen = byPath.get(f.path);
    byPath.set(f.path, seen ? { ...seen, readOnly: seen.readOnly && f.readOnly } : f);
  }
  return [...byPath.values()];
}
