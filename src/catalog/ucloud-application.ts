import type {
  Application,
  ApplicationParameter,
  InvocationParameter,
  ResolvedApplication,
  SimpleDuration,
  Tool,
} from '../model/application.ts';
import { type Issue, joinPath } from '../model/errors.ts';
import { defaultToValue } from './yaml-v1.ts';

/**
 * UCloud's Application as JSON (what Core resolves for a job, `status.resolvedApplication`, and
 * what core2 makes of a YAML document): `{metadata, invocation}` with the tool itself at
 * `invocation.tool.tool.description` (SDU-eScience/UCloud `provider-integration/shared/pkg/
 * orchestrators/applications.go`). Read into the normalised model; what ucompute cannot run is
 * refused by name with the reason.
 */

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown, fallback = ''): string => (typeof v === 'string' ? v : fallback);
const flag = (v: unknown, fallback: boolean): boolean => (typeof v === 'boolean' ? v : fallback);

/** Why ucompute runs no tool of these backends. */
export const REFUSED_BACKENDS: Readonly<Record<string, string>> = {
  VIRTUAL_MACHINE: 'ucompute runs containers, not virtual machines',
  NATIVE: 'ucompute runs containers, not software loaded on the host (modules)',
  UCX: 'ucompute runs containers, not UCX applications',
};

const PARAMETER_TYPES = new Set<string>([
  'input_file',
  'input_directory',
  'text',
  'textarea',
  'integer',
  'floating_point',
  'boolean',
  'enumeration',
  'peer',
  'license_server',
  'ingress',
  'network_ip',
]);

function duration(v: unknown): SimpleDuration | undefined {
  if (!isObject(v)) return undefined;
  const n = (x: unknown) => (typeof x === 'number' && Number.isInteger(x) && x >= 0 ? x : 0);
  return { hours: n(v.hours), minutes: Math.min(n(v.minutes), 59), seconds: Math.min(n(v.seconds), 59) };
}

function readTool(reference: Json, issues: Issue[]): Tool | undefined {
  const path = 'invocation.tool.tool.description';
  const description = isObject(reference.tool) ? reference.tool.description : undefined;
  if (!isObject(description)) {
    issues.push({ path: 'invocation.tool.tool', message: 'is required: the resolved tool' });
    return undefined;
  }
  const backend = text(description.backend, 'DOCKER');
  const refused = REFUSED_BACKENDS[backend];
  if (refused !== undefined) {
    issues.push({ path: joinPath(path, 'backend'), message: `is ${backend}: ${refused}` });
    return undefined;
  }
  const image = text(description.image) || text(description.container);
  if (image === '') {
    issues.push({ path: joinPath(path, 'image'), message: 'is required (the container image)' });
    return undefined;
  }
  const info = isObject(description.info) ? description.info : {};
  const nodes = description.defaultNumberOfNodes;
  const allocation = duration(description.defaultTimeAllocation);
  return {
    name: text(info.name, text(reference.name)),
    version: text(info.version, text(reference.version)),
    title: text(description.title, text(info.name)),
    description: text(description.description),
    authors: Array.isArray(description.authors) ? description.authors.map(String) : [],
    image,
    backend: 'DOCKER',
    defaultNumberOfNodes: typeof nodes === 'number' && nodes >= 1 ? Math.floor(nodes) : 1,
    ...(allocation && allocation.hours + allocation.minutes + allocation.seconds > 0
      ? { defaultTimeAllocation: allocation }
      : {}),
    ...(typeof description.license === 'string' ? { license: description.license } : {}),
  };
}

function readParameter(raw: unknown, path: string, issues: Issue[]): ApplicationParameter | undefined {
  if (!isObject(raw) || typeof raw.name !== 'string' || typeof raw.type !== 'string') {
    issues.push({ path, message: 'must be an object with a name and a type' });
    return undefined;
  }
  if (!PARAMETER_TYPES.has(raw.type)) {
    issues.push({
      path: joinPath(path, 'type'),
      message: `${raw.type} parameters are not offered by ucompute`,
    });
    return undefined;
  }
  const common = {
    name: raw.name,
    optional: flag(raw.optional, false),
    title: text(raw.title, raw.name),
    description: text(raw.description),
  };
  const num = (v: unknown) => (typeof v === 'number' ? { value: v } : undefined);
  let parameter: ApplicationParameter;
  switch (raw.type) {
    case 'integer':
    case 'floating_point': {
      const [min, max, step] = [num(raw.min), num(raw.max), num(raw.step)];
      parameter = {
        ...common,
        type: raw.type,
        ...(min ? { min: min.value } : {}),
        ...(max ? { max: max.value } : {}),
        ...(step ? { step: step.value } : {}),
        ...(typeof raw.unitName === 'string' ? { unitName: raw.unitName } : {}),
      };
      break;
    }
    case 'boolean':
      parameter = {
        ...common,
        type: 'boolean',
        trueValue: text(raw.trueValue) || 'true',
        falseValue: text(raw.falseValue) || 'false',
      };
      break;
    case 'enumeration':
      parameter = {
        ...common,
        type: 'enumeration',
        options: (Array.isArray(raw.options) ? raw.options : []).filter(isObject).map((o) => ({
          name: String(o.name ?? o.value),
          value: String(o.value),
        })),
      };
      break;
    case 'peer':
      parameter = {
        ...common,
        type: 'peer',
        ...(typeof raw.suggestedApplication === 'string'
          ? { suggestedApplication: raw.suggestedApplication }
          : {}),
      };
      break;
    case 'license_server':
      parameter = {
        ...common,
        type: 'license_server',
        tagged: Array.isArray(raw.tagged) ? raw.tagged.map(String) : [],
      };
      break;
    default:
      parameter = { ...common, type: raw.type as 'text' };
  }
  // UCloud stores "no default" as null; a default comes bare or as a value.
  if (raw.defaultValue !== undefined && raw.defaultValue !== null) {
    const value = defaultToValue(parameter, raw.defaultValue, joinPath(path, 'defaultValue'), issues);
    if (value) parameter.defaultValue = value;
  }
  return parameter;
}

function readInvocation(raw: unknown, path: string, issues: Issue[]): InvocationParameter | undefined {
  if (!isObject(raw)) {
    issues.push({ path, message: 'must be an invocation object' });
    return undefined;
  }
  switch (raw.type) {
    case 'word':
      return { type: 'word', word: text(raw.word) };
    case 'env':
      return { type: 'env', variable: text(raw.variable) };
    case 'bool_flag':
      return { type: 'bool_flag', variableName: text(raw.variableName), flag: text(raw.flag).trim() };
    case 'var':
      return {
        type: 'var',
        variableNames: Array.isArray(raw.variableNames) ? raw.variableNames.map(String) : [],
        prefixGlobal: text(raw.prefixGlobal).trim(),
        suffixGlobal: text(raw.suffixGlobal).trim(),
        prefixVariable: text(raw.prefixVariable).trim(),
        suffixVariable: text(raw.suffixVariable).trim(),
        isPrefixVariablePartOfArg: flag(raw.isPrefixVariablePartOfArg, false),
        isSuffixVariablePartOfArg: flag(raw.isSuffixVariablePartOfArg, false),
      };
    case 'jinja':
      return { type: 'jinja', template: text(raw.template) };
    default:
      issues.push({
        path: joinPath(path, 'type'),
        message: `${String(raw.type)} invocations are not offered`,
      });
      return undefined;
  }
}

/** Reads UCloud's Application JSON; issues name the field. */
export function fromUcloudApplication(raw: unknown): { resolved?: ResolvedApplication; issues: Issue[] } {
  const issues: Issue[] = [];
  if (!isObject(raw) || !isObject(raw.metadata) || !isObject(raw.invocation)) {
    return { issues: [{ path: '', message: 'must be an Application {metadata, invocation}' }] };
  }
  const { metadata, invocation: inv } = raw;
  const name = text(metadata.name);
  const version = text(metadata.version);
  if (name === '' || version === '') issues.push({ path: 'metadata', message: 'needs a name and a version' });
  const reference = isObject(inv.tool) ? inv.tool : {};
  const tool = readTool(reference, issues);
  const parameters = (Array.isArray(inv.parameters) ? inv.parameters : []).flatMap(
    (p, i) => readParameter(p, joinPath(joinPath('invocation', 'parameters'), i), issues) ?? [],
  );
  const invocation = (Array.isArray(inv.invocation) ? inv.invocation : []).flatMap(
    (p, i) => readInvocation(p, joinPath(joinPath('invocation', 'invocation'), i), issues) ?? [],
  );
  const environment: Record<string, InvocationParameter> = {};
  for (const [key, value] of Object.entries(isObject(inv.environment) ? inv.environment : {})) {
    const item = readInvocation(value, joinPath(joinPath('invocation', 'environment'), key), issues);
    if (item) environment[key] = item;
  }
  const type = text(inv.applicationType, 'BATCH');
  if (type !== 'BATCH' && type !== 'WEB' && type !== 'VNC') {
    issues.push({ path: 'invocation.applicationType', message: `must be BATCH, WEB or VNC, not ${type}` });
  }
  const port = (v: unknown, fallback: number) =>
    isObject(v) && typeof v.port === 'number' && v.port > 0 && v.port < 65536 ? v.port : fallback;
  const container = isObject(inv.container) ? inv.container : {};
  const ssh = isObject(inv.ssh) ? text(inv.ssh.mode, 'DISABLED') : 'DISABLED';
  if (issues.length > 0 || !tool) return { issues };
  const applicationType = type as 'BATCH' | 'WEB' | 'VNC';
  const vncPassword = isObject(inv.vnc) ? text(inv.vnc.password) : '';
  const application: Application = {
    metadata: {
      name,
      version,
      title: text(metadata.title, name),
      authors: Array.isArray(metadata.authors) ? metadata.authors.map(String) : [],
      description: text(metadata.description),
      tags: [],
      ...(text(metadata.website) !== '' ? { website: text(metadata.website) } : {}),
    },
    invocation: {
      tool: { name: text(reference.name, tool.name), version: text(reference.version, tool.version) },
      invocation,
      parameters,
      environment,
      applicationType,
      ...(applicationType === 'WEB' ? { web: { port: port(inv.web, 80) } } : {}),
      ...(applicationType === 'VNC'
        ? { vnc: { port: port(inv.vnc, 5900), ...(vncPassword !== '' ? { password: vncPassword } : {}) } }
        : {}),
      ssh: { mode: ssh === 'OPTIONAL' || ssh === 'MANDATORY' ? ssh : 'DISABLED' },
      container: {
        changeWorkingDirectory: flag(container.changeWorkingDirectory, true),
        runAsRoot: flag(container.runAsRoot, false),
        runAsRealUser: flag(container.runAsRealUser, false),
      },
      allowAdditionalMounts: flag(inv.allowAdditionalMounts, applicationType !== 'BATCH'),
      allowAdditionalPeers: flag(inv.allowAdditionalPeers, true),
      allowMultiNode: flag(inv.allowMultiNode, false),
      fileExtensions: Array.isArray(inv.fileExtensions) ? inv.fileExtensions.map(String) : [],
      outputFileGlobs: Array.isArray(inv.outputFileGlobs) ? inv.outputFileGlobs.map(String) : [],
    },
  };
  return { resolved: { application, tool }, issues };
}
