import type { ResolvedApplication } from '../model/application.ts';
import { type Issue, joinPath } from '../model/errors.ts';
import type { SourceText } from './lenient-read.ts';
import { fromUcloudApplication } from './ucloud-application.ts';

/**
 * UCloud's current application format, `application: v2`, read as core2 reads it
 * (SDU-eScience/UCloud `core2/pkg/orchestrator/app_yaml.go`, `A2Yaml` and `Normalize`, at
 * 63551f4e): the document becomes UCloud's Application JSON — its tool made from `software`, its
 * invocation one Jinja template — which is then read as Core's applications are
 * (./ucloud-application.ts), so that what ucompute cannot run (NATIVE, VIRTUAL_MACHINE and UCX
 * software) is refused there by name. Unknown keys are ignored, as `yaml.v3` ignores them.
 */

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** core2's `software.type` → the tool backend it maps to (`ToolBackend*`). */
const SOFTWARE_BACKENDS: Readonly<Record<string, string>> = {
  Container: 'DOCKER',
  Native: 'NATIVE',
  VirtualMachine: 'VIRTUAL_MACHINE',
  UCX: 'UCX',
};

/** core2's A2 parameter types → the application parameter types they map to. */
const PARAMETER_TYPES: Readonly<Record<string, string>> = {
  File: 'input_file',
  Directory: 'input_directory',
  License: 'license_server',
  Job: 'peer',
  PublicIP: 'network_ip',
  Integer: 'integer',
  FloatingPoint: 'floating_point',
  Boolean: 'boolean',
  Text: 'text',
  TextArea: 'textarea',
  Enumeration: 'enumeration',
};

const SSH_MODES: Readonly<Record<string, string>> = {
  Mandatory: 'MANDATORY',
  Optional: 'OPTIONAL',
  Disabled: 'DISABLED',
};

/** core2's `util.ValidateString`: trimmed, not empty, one line, at most 1024 characters (unless allowed). */
function validString(
  v: unknown,
  path: string,
  issues: Issue[],
  o: { multiline?: boolean; long?: boolean; empty?: boolean } = {},
): string | undefined {
  if (v === undefined || v === null) {
    if (!o.empty) issues.push({ path, message: 'is required' });
    return o.empty ? '' : undefined;
  }
  if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
    issues.push({ path, message: 'must be text' });
    return undefined;
  }
  const text = String(v).trim();
  if (text.length > (o.long ? 1024 * 1024 : 1024)) issues.push({ path, message: 'is too long' });
  else if (text === '' && !o.empty) issues.push({ path, message: 'must not be empty' });
  else if (text.includes('\n') && !o.multiline) issues.push({ path, message: 'must not contain new-lines' });
  else return text;
  return undefined;
}

const number = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** One parameter as UCloud's ApplicationParameter JSON, with core2's checks. */
function parameter(name: string, raw: unknown, issues: Issue[]): Json | undefined {
  const path = joinPath('parameters', name);
  if (!isObject(raw)) {
    issues.push({ path, message: 'must be a mapping with a type' });
    return undefined;
  }
  const kind = String(raw.type);
  if (kind === 'Workflow') {
    issues.push({
      path: joinPath(path, 'type'),
      message: 'is Workflow: user-written job scripts are not offered by ucompute',
    });
    return undefined;
  }
  const type = PARAMETER_TYPES[kind];
  if (type === undefined) {
    issues.push({
      path: joinPath(path, 'type'),
      message: `unknown parameter type: ${JSON.stringify(raw.type)}`,
    });
    return undefined;
  }
  const mapped: Json = {
    name,
    type,
    title: validString(raw.title, joinPath(path, 'title'), issues) ?? '',
    description:
      validString(raw.description, joinPath(path, 'description'), issues, { multiline: true, empty: true }) ??
      '',
    optional: raw.optional === true,
  };
  const defaultValue = raw.defaultValue;
  if (type === 'integer' || type === 'floating_point') {
    const [min, max, step, given] = [
      number(raw.min),
      number(raw.max),
      number(raw.step),
      number(defaultValue),
    ];
    Object.assign(mapped, { min: min ?? null, max: max ?? null, step: step ?? null });
    if (given !== undefined && min !== undefined && given < min)
      issues.push({ path, message: `${name} default value must not be lower than the minimum value` });
    if (min !== undefined && max !== undefined && min > max)
      issues.push({ path, message: `${name} min value must not exceed max value (${min} > ${max})` });
    if (step !== undefined && step <= 0) issues.push({ path, message: `${name} step value must be > 0` });
  } else if (type === 'boolean') {
    Object.assign(mapped, { trueValue: 'true', falseValue: 'false' });
  } else if (type === 'enumeration') {
    const options = (Array.isArray(raw.options) ? raw.options : []).map((o: unknown, i) => {
      const option = isObject(o) ? o : {};
      const at = joinPath(joinPath(path, 'options'), i);
      return {
        name: validString(option.title, joinPath(at, 'title'), issues) ?? '',
        value: validString(option.value, joinPath(at, 'value'), issues) ?? '',
      };
    });
    mapped.options = options;
    if (defaultValue !== undefined && !options.some((o) => o.value === String(defaultValue)))
      issues.push({
        path: joinPath(path, 'defaultValue'),
        message: `${name}.defaultValue must be present in options`,
      });
  }
  // core2 keeps a default for the valued types only; a file, folder, job, license or IP has none.
  if (
    defaultValue !== undefined &&
    defaultValue !== null &&
    !['input_file', 'input_directory', 'peer', 'license_server', 'network_ip'].includes(type)
  )
    mapped.defaultValue = defaultValue;
  return mapped;
}

/** What core2's Normalize makes of the document: UCloud's Application JSON. */
function normalise(doc: Json, sourceText: SourceText, issues: Issue[], warnings: Issue[]): Json {
  const name = validString(sourceText(['name']) ?? doc.name, 'name', issues) ?? '';
  const version = validString(sourceText(['version']) ?? doc.version, 'version', issues) ?? '';
  const title = doc.title === undefined ? name : (validString(doc.title, 'title', issues) ?? name);
  const description =
    doc.description === undefined
      ? ''
      : (validString(doc.description, 'description', issues, { multiline: true, long: true }) ?? '');
  const website =
    doc.documentation === undefined ? '' : (validString(doc.documentation, 'documentation', issues) ?? '');
  const software = isObject(doc.software) ? doc.software : {};
  const backend = SOFTWARE_BACKENDS[String(software.type)];
  if (backend === undefined) {
    issues.push({
      path: 'software.type',
      message: `unknown software type: ${JSON.stringify(software.type)}`,
    });
  }
  const image = backend === 'NATIVE' ? '' : (validString(software.image, 'software.image', issues) ?? '');
  const parameters = Object.entries(isObject(doc.parameters) ? doc.parameters : {}).flatMap(
    ([key, raw]) => parameter(key, raw, issues) ?? [],
  );
  const environment: Json = {};
  for (const [key, value] of Object.entries(isObject(doc.environment) ? doc.environment : {})) {
    // core2 takes environment values as words: they are not templates.
    const word = validString(value, joinPath('environment', key), issues);
    if (word !== undefined) environment[key] = { type: 'word', word };
  }
  for (const field of ['sbatch', 'modules', 'inference', 'ucx'] as const) {
    if (doc[field] !== undefined && doc[field] !== null)
      warnings.push({ path: field, message: IGNORED[field] });
  }
  if (isObject(doc.inference) && doc.inference.mode === 'Mandatory') {
    issues.push({ path: 'inference.mode', message: 'is Mandatory: ucompute offers no inference servers' });
  }
  const features = isObject(doc.features) ? doc.features : {};
  const web = isObject(doc.web) ? doc.web : undefined;
  const vnc = isObject(doc.vnc) && doc.vnc.enabled === true ? doc.vnc : undefined;
  const port = (v: Json, path: string, fallback?: number): number | undefined => {
    const p = v.port ?? fallback;
    if (typeof p !== 'number' || !Number.isInteger(p) || p <= 0 || p >= 65536) {
      issues.push({ path, message: p === undefined ? 'is required' : 'must be a port from 1 to 65535' });
      return undefined;
    }
    return p;
  };
  // core2: a `web` section makes a web application, a `vnc` section that is enabled a VNC one.
  const applicationType = web ? 'WEB' : vnc ? 'VNC' : 'BATCH';
  const ssh = isObject(doc.ssh) ? SSH_MODES[String(doc.ssh.mode)] : undefined;
  if (isObject(doc.ssh) && ssh === undefined)
    issues.push({ path: 'ssh.mode', message: 'must be Mandatory, Optional or Disabled' });
  const extensions = (Array.isArray(doc.extensions) ? doc.extensions : []).flatMap(
    (e, i) => validString(e, joinPath('extensions', i), issues) ?? [],
  );
  if (typeof doc.invocation !== 'string')
    issues.push({ path: 'invocation', message: 'must be a Jinja template (text)' });
  return {
    metadata: { name, version, authors: ['UCloud'], title, description, website, public: false },
    invocation: {
      tool: {
        name,
        version,
        tool: {
          owner: 'UCloud',
          description: {
            info: { name, version },
            defaultNumberOfNodes: 1,
            defaultTimeAllocation: { hours: 1, minutes: 0, seconds: 0 },
            authors: ['UCloud'],
            title,
            description,
            backend: backend ?? String(software.type),
            container: image,
            image,
          },
        },
      },
      invocation: [{ type: 'jinja', template: typeof doc.invocation === 'string' ? doc.invocation : '' }],
      parameters,
      environment,
      applicationType,
      ...(web?.enabled === true ? { web: { port: port(web, 'web.port', 80) } } : {}),
      ...(vnc ? { vnc: { port: port(vnc, 'vnc.port'), password: vnc.password ?? '' } } : {}),
      ...(ssh !== undefined ? { ssh: { mode: ssh } } : {}),
      container: { changeWorkingDirectory: true, runAsRoot: true, runAsRealUser: false },
      allowAdditionalPeers: features.jobLinking === true,
      allowAdditionalMounts: features.folders === true,
      allowMultiNode: features.multiNode === true,
      allowPublicIp: features.ipAddresses === true,
      allowPublicLink: features.links === true,
      fileExtensions: extensions,
      outputFileGlobs: ['*'],
    },
  };
}

/** Why core2's sections that ucompute has no use for change nothing here. */
const IGNORED: Record<'sbatch' | 'modules' | 'inference' | 'ucx', string> = {
  sbatch: 'is for Slurm providers; ignored',
  modules: 'ucompute mounts no software modules; ignored (the application must run without them)',
  inference: 'ucompute offers no inference servers; ignored',
  ucx: 'is for UCX applications; ignored',
};

/** Reads one `application: v2` document; issues name the field, warnings what was ignored. */
export function readApplicationV2(
  doc: Json,
  sourceText: SourceText,
): { resolved?: ResolvedApplication; issues: Issue[]; warnings: Issue[] } {
  const issues: Issue[] = [];
  const warnings: Issue[] = [];
  const json = normalise(doc, sourceText, issues, warnings);
  if (issues.length > 0) return { issues, warnings };
  const read = fromUcloudApplication(json);
  // Core's paths inside the Application are not this document's: name the document's field.
  const DOCUMENT_PATHS: [RegExp, string][] = [
    [/^invocation\.tool\.tool\.description\.backend$/, 'software.type'],
    [/^invocation\.parameters\.\d+/, 'parameters'],
  ];
  const located = read.issues.map((issue) => {
    const found = DOCUMENT_PATHS.find(([pattern]) => pattern.test(issue.path));
    return found ? { ...issue, path: found[1] } : issue;
  });
  return { ...(read.resolved ? { resolved: read.resolved } : {}), issues: located, warnings };
}
