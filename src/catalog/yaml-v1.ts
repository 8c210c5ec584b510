import type { Static } from '@sinclair/typebox';
import type { Application, ApplicationParameter, InvocationParameter, Tool } from '../model/application.ts';
import { type Issue, joinPath } from '../model/errors.ts';
import type { AppParameterValue } from '../model/parameter-value.ts';
import { readLeniently, type SourceText } from './lenient-read.ts';
import {
  RawApplication,
  type RawInvocationItem,
  type RawParameter,
  RawTool,
  rawApplication,
  rawTool,
  VARIABLE_NAME,
} from './yaml-v1-schema.ts';

/**
 * UCloud's YAML v1 documents (`application: v1`, `tool: v1`) translated into the normalised model.
 * What is refused follows UCloud's readers: the Kotlin app store's `ApplicationYaml.V1`/`ToolYaml.V1`
 * and core2's `A1Yaml`/`A1Tool`; ucompute adds only what it needs to run a job safely.
 */

export type V1Document = { kind: 'application'; application: Application } | { kind: 'tool'; tool: Tool };

export interface NormalisedDocument {
  document?: V1Document;
  /** What makes the document unusable. */
  issues: Issue[];
  /** What was ignored, as UCloud ignores it; the document is still used. */
  warnings: Issue[];
}

/**
 * Checks and normalises one YAML document read as UCloud reads it; `sourceText` gives the text of
 * scalars as written. Problems are returned, never thrown.
 */
export function normaliseDocument(doc: unknown, sourceText: SourceText): NormalisedDocument {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    return {
      issues: [{ path: '', message: 'must be a mapping with `application: v1` or `tool: v1`' }],
      warnings: [],
    };
  }
  // An application document also has a `tool` key: the reference to its tool.
  const kind = 'application' in doc ? 'application' : 'tool';
  const version = (doc as Record<string, unknown>)[kind];
  if (version !== undefined && typeof version !== 'object' && version !== 'v1') {
    // Say only this: the rest of the document would be one misleading problem per field.
    const message = `must be v1 (or v2 for an application), not ${JSON.stringify(version)}`;
    return { issues: [{ path: kind, message }], warnings: [] };
  }
  if ('application' in doc) {
    const { value, warnings } = readLeniently(RawApplication, doc, sourceText);
    if (!rawApplication.check(value)) return { issues: rawApplication.issues(value), warnings };
    return { ...normaliseApplication(value), warnings };
  }
  if ('tool' in doc) {
    const { value, warnings } = readLeniently(RawTool, doc, sourceText);
    if (!rawTool.check(value)) return { issues: rawTool.issues(value), warnings };
    return { ...normaliseTool(value), warnings };
  }
  return { issues: [{ path: '', message: 'must have `application: v1` or `tool: v1`' }], warnings: [] };
}

function normaliseTool(raw: Static<typeof RawTool>): { document?: V1Document; issues: Issue[] } {
  const issues: Issue[] = [];
  const image = raw.image ?? raw.container;
  if (raw.backend !== 'DOCKER' && raw.backend !== 'UDOCKER') {
    issues.push({ path: 'backend', message: `ucompute runs containers: must be DOCKER, not ${raw.backend}` });
  } else {
    if (image === undefined) issues.push({ path: 'container', message: 'is required (the container image)' });
    if ((raw.requiredModules ?? []).length > 0) {
      issues.push({ path: 'requiredModules', message: 'is only for the NATIVE backend' });
    }
  }
  if (raw.defaultMaxTime !== undefined && raw.defaultTimeAllocation !== undefined) {
    issues.push({
      path: 'defaultTimeAllocation',
      message: 'give either defaultMaxTime or defaultTimeAllocation',
    });
  }
  if (issues.length > 0 || image === undefined) return { issues };
  const defaultTimeAllocation = raw.defaultTimeAllocation ?? raw.defaultMaxTime;
  const tool: Tool = {
    name: raw.name,
    version: raw.version,
    title: raw.title,
    description: raw.description ?? '',
    authors: raw.authors,
    image,
    backend: 'DOCKER', // UDOCKER is UCloud's old name for it; anything else was refused above
    defaultNumberOfNodes: raw.defaultNumberOfNodes ?? 1,
    ...(defaultTimeAllocation ? { defaultTimeAllocation } : {}),
    ...(raw.license !== undefined ? { license: raw.license } : {}),
  };
  return { document: { kind: 'tool', tool }, issues };
}

function normaliseApplication(raw: RawApplication): { document?: V1Document; issues: Issue[] } {
  const issues: Issue[] = [];
  const applicationType = raw.applicationType ?? 'BATCH';
  const interactive = applicationType !== 'BATCH';

  const parameters: ApplicationParameter[] = [];
  for (const [name, p] of Object.entries(raw.parameters ?? {})) {
    const path = joinPath('parameters', name);
    // Skip the value too: TypeBox's Record key pattern `^(.*)$` misses names with line breaks, so
    // the value under such a name was never checked.
    if (!new RegExp(VARIABLE_NAME).test(name)) {
      issues.push({ path, message: 'must be a name of letters, digits, _ and -' });
      continue;
    }
    if (RESERVED_NAMES.has(name) || name.startsWith(INJECTED_PREFIX)) {
      issues.push({ path, message: `${name} is reserved` });
      continue;
    }
    const parameter = normaliseParameter(name, p, path, issues);
    if (parameter) parameters.push(parameter);
  }
  // Invocations are checked against every declared parameter, so one bad parameter is one problem.
  const byName = new Map(Object.entries(raw.parameters ?? {}).map(([name, p]) => [name, p.type]));

  const invocation = raw.invocation.map((item, i) =>
    normaliseInvocation(item, joinPath('invocation', i), byName, issues),
  );
  const environment: Record<string, InvocationParameter> = {};
  for (const [name, item] of Object.entries(raw.environment ?? {})) {
    const path = joinPath('environment', name);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      issues.push({ path, message: 'must be an environment variable name (letters, digits, _)' });
      continue; // unchecked, as for parameters
    }
    environment[name] = normaliseInvocation(item, path, byName, issues);
  }

  const container = {
    changeWorkingDirectory: raw.container?.changeWorkingDirectory ?? true,
    runAsRoot: raw.container?.runAsRoot ?? false,
    runAsRealUser: raw.container?.runAsRealUser ?? false,
  };
  if (container.runAsRoot && container.runAsRealUser) {
    issues.push({ path: 'container.runAsRealUser', message: 'cannot be combined with runAsRoot' });
  }
  if (applicationType !== 'WEB' && raw.web !== undefined) {
    issues.push({ path: 'web', message: 'is only for applicationType WEB' });
  }
  if (applicationType !== 'VNC' && raw.vnc !== undefined) {
    issues.push({ path: 'vnc', message: 'is only for applicationType VNC' });
  }
  if (issues.length > 0) return { issues };

  const application: Application = {
    metadata: {
      name: raw.name,
      version: raw.version,
      title: raw.title,
      authors: raw.authors,
      description: raw.description,
      tags: raw.tags ?? [],
      ...(raw.website !== undefined ? { website: raw.website } : {}),
    },
    invocation: {
      tool: { name: raw.tool.name, version: raw.tool.version },
      invocation,
      parameters,
      environment,
      applicationType,
      ...(applicationType === 'WEB' ? { web: { port: raw.web?.port ?? 80 } } : {}),
      ...(applicationType === 'VNC'
        ? {
            vnc: {
              port: raw.vnc?.port ?? 5900,
              ...(raw.vnc?.password !== undefined ? { password: raw.vnc.password } : {}),
            },
          }
        : {}),
      ssh: { mode: raw.ssh?.mode ?? 'DISABLED' },
      container,
      allowAdditionalMounts: raw.allowAdditionalMounts ?? interactive,
      allowAdditionalPeers: raw.allowAdditionalPeers ?? true,
      allowMultiNode: raw.allowMultiNode ?? false,
      fileExtensions: raw.fileExtensions ?? [],
      outputFileGlobs: raw.outputFileGlobs ?? [],
    },
  };
  return { document: { kind: 'application', application }, issues };
}

/** Names that would reach an object's prototype when used as keys of plain objects. */
const RESERVED_NAMES = new Set(['__proto__', 'constructor', 'prototype']);
/** UCloud keeps parameter names with this prefix for the ones it injects itself. */
const INJECTED_PREFIX = '_injected_';
const NO_DEFAULT = new Set([
  'input_file',
  'input_directory',
  'peer',
  'ingress',
  'network_ip',
  'license_server',
]);

function normaliseParameter(
  name: string,
  p: RawParameter,
  path: string,
  issues: Issue[],
): ApplicationParameter | undefined {
  const before = issues.length;
  const common = {
    name,
    optional: p.optional ?? false,
    title: p.title ?? name,
    description: p.description ?? '',
  };
  let parameter: ApplicationParameter;
  switch (p.type) {
    case 'integer':
    case 'floating_point': {
      for (const key of ['min', 'max', 'step'] as const) {
        const v = p[key];
        if (p.type === 'integer' && v !== undefined && !Number.isInteger(v)) {
          issues.push({ path: joinPath(path, key), message: 'must be an integer' });
        }
      }
      if (p.min !== undefined && p.max !== undefined && p.min > p.max) {
        issues.push({ path: joinPath(path, 'max'), message: `must be >= min (${p.min})` });
      }
      parameter = {
        ...common,
        type: p.type,
        ...(p.min !== undefined ? { min: p.min } : {}),
        ...(p.max !== undefined ? { max: p.max } : {}),
        ...(p.step !== undefined ? { step: p.step } : {}),
        ...(p.unitName !== undefined ? { unitName: p.unitName } : {}),
      };
      break;
    }
    case 'boolean':
      parameter = {
        ...common,
        type: 'boolean',
        trueValue: String(p.trueValue ?? 'true').trim(),
        falseValue: String(p.falseValue ?? 'false').trim(),
      };
      break;
    case 'enumeration': {
      const options = p.options.map((o) => ({ name: String(o.name), value: String(o.value) }));
      const seen = new Set<string>();
      options.forEach((o, i) => {
        if (seen.has(o.value))
          issues.push({ path: joinPath(joinPath(path, 'options'), i), message: 'repeats a value' });
        seen.add(o.value);
      });
      parameter = { ...common, type: 'enumeration', options };
      break;
    }
    case 'peer':
      parameter = {
        ...common,
        type: 'peer',
        ...(p.suggestedApplication !== undefined ? { suggestedApplication: p.suggestedApplication } : {}),
      };
      break;
    case 'license_server':
      parameter = { ...common, type: 'license_server', tagged: p.tagged ?? [] };
      break;
    default:
      parameter = { ...common, type: p.type };
  }
  if (p.defaultValue !== undefined && p.defaultValue !== null) {
    const dpath = joinPath(path, 'defaultValue');
    if (NO_DEFAULT.has(p.type)) {
      issues.push({ path: dpath, message: `a ${p.type} parameter cannot have a default` });
    } else {
      const value = defaultToValue(parameter, p.defaultValue, dpath, issues);
      if (value) parameter.defaultValue = value;
    }
  }
  return issues.length === before ? parameter : undefined;
}

/** Defaults come bare (`defaultValue: 42`) or in value form (`defaultValue: {type: integer, value: 42}`). */
export function defaultToValue(
  parameter: ApplicationParameter,
  raw: unknown,
  path: string,
  issues: Issue[],
): AppParameterValue | undefined {
  let bare = raw;
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw) && 'value' in raw) {
    bare = (raw as { value: unknown }).value;
  }
  const bad = (expected: string) => {
    issues.push({ path, message: `must be ${expected} for a ${parameter.type} parameter` });
    return undefined;
  };
  switch (parameter.type) {
    case 'text':
    case 'textarea':
      if (typeof bare === 'string' || typeof bare === 'number' || typeof bare === 'boolean') {
        return { type: parameter.type, value: String(bare) };
      }
      return bad('a string');
    case 'integer': {
      if (typeof bare !== 'number' || !Number.isSafeInteger(bare)) return bad('an integer');
      if (!inRange(parameter, bare, path, issues)) return undefined;
      return { type: 'integer', value: bare };
    }
    case 'floating_point':
      if (typeof bare !== 'number' || !Number.isFinite(bare)) return bad('a number');
      if (!inRange(parameter, bare, path, issues)) return undefined;
      return { type: 'floating_point', value: bare };
    case 'boolean':
      if (typeof bare !== 'boolean') return bad('true or false');
      return { type: 'boolean', value: bare };
    case 'enumeration': {
      const text = typeof bare === 'string' || typeof bare === 'number' ? String(bare) : undefined;
      const option =
        text === undefined ? undefined : parameter.options.find((o) => o.value === text || o.name === text);
      if (!option) return bad(`one of the options (${parameter.options.map((o) => o.value).join(', ')})`);
      return { type: 'text', value: option.value };
    }
    default:
      return bad('absent');
  }
}

export function inRange(
  parameter: { min?: number; max?: number },
  value: number,
  path: string,
  issues: Issue[],
): boolean {
  if (parameter.min !== undefined && value < parameter.min) {
    issues.push({ path, message: `must be >= ${parameter.min}` });
    return false;
  }
  if (parameter.max !== undefined && value > parameter.max) {
    issues.push({ path, message: `must be <= ${parameter.max}` });
    return false;
  }
  return true;
}

function affix(v: string | number | boolean | undefined): string {
  return v === undefined ? '' : String(v).trim();
}

function normaliseInvocation(
  item: RawInvocationItem,
  path: string,
  parameters: Map<string, ApplicationParameter['type']>,
  issues: Issue[],
): InvocationParameter {
  if (typeof item !== 'object') return { type: 'word', word: String(item) };
  switch (item.type) {
    case 'word':
      return { type: 'word', word: String(item.word) };
    case 'env':
      return { type: 'env', variable: item.var };
    case 'flag': {
      const type = parameters.get(item.var);
      if (!type) issues.push({ path: joinPath(path, 'var'), message: `names no parameter (${item.var})` });
      else if (type !== 'boolean') {
        issues.push({
          path: joinPath(path, 'var'),
          message: `must name a boolean parameter, ${item.var} is ${type}`,
        });
      }
      return { type: 'bool_flag', variableName: item.var, flag: affix(item.flag) };
    }
    case 'var': {
      const names = Array.isArray(item.vars) ? item.vars : [item.vars];
      names.forEach((name, i) => {
        if (!parameters.has(name)) {
          const at = Array.isArray(item.vars) ? joinPath(joinPath(path, 'vars'), i) : joinPath(path, 'vars');
          issues.push({ path: at, message: `names no parameter (${name})` });
        }
      });
      return {
        type: 'var',
        variableNames: names,
        prefixGlobal: affix(item.prefixGlobal),
        suffixGlobal: affix(item.suffixGlobal),
        prefixVariable: affix(item.prefixVariable),
        suffixVariable: affix(item.suffixVariable),
        isPrefixVariablePartOfArg: item.isPrefixVariablePartOfArg ?? false,
        isSuffixVariablePartOfArg: item.isSuffixVariablePartOfArg ?? false,
      };
    }
  }
}
