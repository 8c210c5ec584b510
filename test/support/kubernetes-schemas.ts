/**
 * Strict validation of the Kubernetes objects ucompute emits, against the official schemas in the shared
 * fixtures (Kubernetes 1.35 OpenAPI v3 documents and the Volcano CRDs). See /work/shared/fixtures/SOURCE.md files.
 *
 * Strict means `kubectl --validate=strict`-like: unknown fields anywhere are problems. On top of the schemas we
 * check what the API server checks in code for every object: metadata names, namespaces, label and annotation
 * keys/values, ConfigMap/Secret keys, and a few enums that Kubernetes' published OpenAPI leaves out.
 */
import { AssertionError } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { parseAllDocuments } from 'yaml';
import {
  cached,
  cachedValidator,
  cacheFolder,
  createAjv,
  LIST_MAP_KEYWORD,
  type ListMapSpec,
} from './kubernetes-validators.ts';

/** Returns human-readable problems ("spec.tasks[0].template.spec.containers[0].name: is required"); [] when valid. */
export function kubernetesObjectProblems(object: unknown): string[] {
  if (!isRecord(object)) return [`(root): must be an object (got ${describe(object)})`];
  const { apiVersion, kind } = object;
  if (typeof apiVersion !== 'string')
    return [`apiVersion: ${apiVersion === undefined ? 'is required' : 'must be a string'}`];
  if (typeof kind !== 'string') return [`kind: ${kind === undefined ? 'is required' : 'must be a string'}`];
  const index = kindIndex();
  const kinds = index[apiVersion];
  if (!kinds) {
    const known = Object.keys(index).join(', ');
    return [`apiVersion: "${apiVersion}" is not a known apiVersion (known: ${known})`];
  }
  const scope = kinds[kind];
  if (!scope) return [`kind: "${kind}" is not a known kind of apiVersion "${apiVersion}"`];
  const entry = { apiVersion, kind, scope };

  const problems = new Set<string>();
  const validate = validatorOf(apiVersion, kind);
  if (!validate(object)) {
    for (const error of validate.errors ?? []) problems.add(formatError(object, error));
  }
  for (const problem of semanticProblems(object, entry)) problems.add(problem);
  return [...problems];
}

/** Throws an AssertionError listing the problems when the object is invalid. */
export function assertValidKubernetesObject(object: unknown): void {
  const problems = kubernetesObjectProblems(object);
  if (problems.length === 0) return;
  const name = isRecord(object) ? `${String(object.kind)} ${JSON.stringify(nameOf(object))}` : 'object';
  throw new AssertionError({
    message: `${name} is not a valid Kubernetes object:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    actual: problems,
    expected: [],
    operator: 'kubernetesObjectProblems',
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Fixtures and the kind registry

const FIXTURES = process.env.UCOMPUTE_KUBERNETES_FIXTURES ?? '/work/shared/fixtures';
const CORE_ID = 'k8s-core.json';
const NETWORKING_ID = 'k8s-networking-v1.json';
const OBJECT_META_REF = `${CORE_ID}#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`;

type JsonObject = { [key: string]: unknown };
type Scope = 'Namespaced' | 'Cluster' | 'unknown';

interface KindEntry {
  apiVersion: string;
  kind: string;
  scope: Scope;
}

interface RegisteredKind extends KindEntry {
  /** A schema to compile: a $ref into a registered OpenAPI document, or a prepared CRD schema. */
  schema: JsonObject;
}

interface Registry {
  ajv: Ajv;
  byApiVersion: Map<string, Map<string, RegisteredKind>>;
}

/** Each apiVersion's kinds and their scopes, in the fixtures' order. */
type KindIndex = Record<string, Record<string, Scope>>;

const OPENAPI_DOCUMENTS = [
  { id: CORE_ID, file: 'api__v1_openapi.json', prefix: 'io.k8s.api.core.v1.', group: '', version: 'v1' },
  {
    id: NETWORKING_ID,
    file: 'apis__networking.k8s.io__v1_openapi.json',
    prefix: 'io.k8s.api.networking.v1.',
    group: 'networking.k8s.io',
    version: 'v1',
  },
];
const volcanoFiles = () =>
  readdirSync(join(FIXTURES, 'volcano'))
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => join(FIXTURES, 'volcano', f));

let folder: string | undefined;

/** The cached validators' folder, named by what they are compiled from. */
function cache(): string {
  if (!folder) {
    const openapi = OPENAPI_DOCUMENTS.map((doc) => join(FIXTURES, 'kubernetes', doc.file));
    folder = cacheFolder([...openapi, ...volcanoFiles()]);
  }
  return folder;
}

let index: KindIndex | undefined;

function kindIndex(): KindIndex {
  index ??= JSON.parse(
    readFileSync(
      cached(cache(), 'kinds.json', () => {
        const kinds: KindIndex = {};
        for (const [apiVersion, entries] of loadRegistry().byApiVersion) {
          kinds[apiVersion] = Object.fromEntries([...entries.values()].map((e) => [e.kind, e.scope]));
        }
        return JSON.stringify(kinds);
      }),
      'utf8',
    ),
  ) as KindIndex;
  return index;
}

const validators = new Map<string, ValidateFunction>();

/** A known kind's validator: from the cache, compiled into it first when missing. */
function validatorOf(apiVersion: string, kind: string): ValidateFunction {
  const key = `${apiVersion}/${kind}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = cachedValidator(cache(), key.replaceAll('/', '_'), () => {
      const { ajv, byApiVersion } = loadRegistry();
      return { ajv, validate: ajv.compile(byApiVersion.get(apiVersion)!.get(kind)!.schema) };
    });
    validators.set(key, validate);
  }
  return validate;
}

let registry: Registry | undefined;

function loadRegistry(): Registry {
  if (registry) return registry;
  const ajv = createAjv();
  const byApiVersion = new Map<string, Map<string, RegisteredKind>>();
  const add = (entry: RegisteredKind) => {
    const kinds = byApiVersion.get(entry.apiVersion) ?? new Map<string, RegisteredKind>();
    byApiVersion.set(entry.apiVersion, kinds);
    kinds.set(entry.kind, entry);
  };

  for (const doc of OPENAPI_DOCUMENTS) {
    const json = JSON.parse(readFileSync(join(FIXTURES, 'kubernetes', doc.file), 'utf8')) as JsonObject;
    const schemas = (json.components as JsonObject).schemas as JsonObject;
    const prepared = prepareComponents(schemas);
    ajv.addSchema({ $id: doc.id, components: { schemas: prepared } });
    const scopes = scopesFromPaths(json.paths as JsonObject, doc.group, doc.version);
    const apiVersion = doc.group ? `${doc.group}/${doc.version}` : doc.version;
    for (const [name, schema] of Object.entries(schemas)) {
      if (!name.startsWith(doc.prefix)) continue;
      const kind = name.slice(doc.prefix.length);
      const gvks = (schema as JsonObject)['x-kubernetes-group-version-kind'];
      const matches =
        Array.isArray(gvks) &&
        gvks.some((g: JsonObject) => g.group === doc.group && g.version === doc.version && g.kind === kind);
      if (!matches) continue;
      add({
        apiVersion,
        kind,
        scope: scopes.get(kind) ?? 'unknown',
        schema: { $ref: `${doc.id}#/components/schemas/${name}` },
      });
    }
  }

  for (const file of volcanoFiles()) {
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
      const crd = doc.toJS() as JsonObject | null;
      if (crd?.kind !== 'CustomResourceDefinition') continue;
      const spec = crd.spec as JsonObject;
      const kind = (spec.names as JsonObject).kind as string;
      for (const version of spec.versions as JsonObject[]) {
        if (version.served !== true) continue;
        const openAPIV3Schema = (version.schema as JsonObject).openAPIV3Schema as JsonObject;
        add({
          apiVersion: `${spec.group as string}/${version.name as string}`,
          kind,
          scope: spec.scope === 'Cluster' ? 'Cluster' : 'Namespaced',
          schema: prepareCrdSchema(openAPIV3Schema, kind),
        });
      }
    }
  }
  registry = { ajv, byApiVersion };
  return registry;
}

/** Namespaced kinds are created under /namespaces/{namespace}/; that is the only scope signal in the document. */
function scopesFromPaths(paths: JsonObject, group: string, version: string): Map<string, Scope> {
  const scopes = new Map<string, Scope>();
  for (const [path, item] of Object.entries(paths)) {
    if (path.includes('{name}')) continue; // subresources (binding, eviction, token) don't define a kind's scope
    for (const operation of Object.values(item as JsonObject)) {
      if (!isRecord(operation) || operation['x-kubernetes-action'] !== 'post') continue;
      const gvk = operation['x-kubernetes-group-version-kind'] as JsonObject | undefined;
      if (!gvk || gvk.group !== group || gvk.version !== version) continue;
      scopes.set(gvk.kind as string, path.includes('{namespace}') ? 'Namespaced' : 'Cluster');
    }
  }
  return scopes;
}

// ---------------------------------------------------------------------------------------------------------------
// Ajv's data

const QUANTITY_PATTERN =
  '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';
const KNOWN_FORMATS = new Set(['int32', 'int64', 'byte', 'date-time']);

// ---------------------------------------------------------------------------------------------------------------
// Schema preparation: make Kubernetes' OpenAPI behave like the API server under JSON Schema rules

/**
 * Enums the Go types declare (`+enum`) but that the published OpenAPI v3 documents omit (they contain no
 * `enum` at all). Keyed by schema name, then property; array properties constrain their items.
 */
const MISSING_ENUMS: Record<string, Record<string, readonly string[]>> = {
  'io.k8s.api.networking.v1.NetworkPolicySpec': { policyTypes: ['Ingress', 'Egress'] },
  'io.k8s.api.networking.v1.NetworkPolicyPort': { protocol: ['TCP', 'UDP', 'SCTP'] },
  'io.k8s.api.networking.v1.HTTPIngressPath': { pathType: ['Exact', 'Prefix', 'ImplementationSpecific'] },
  'io.k8s.api.core.v1.ServicePort': { protocol: ['TCP', 'UDP', 'SCTP'] },
  'io.k8s.api.core.v1.ContainerPort': { protocol: ['TCP', 'UDP', 'SCTP'] },
  'io.k8s.api.core.v1.ServiceSpec': {
    type: ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'],
    sessionAffinity: ['ClientIP', 'None'],
    externalTrafficPolicy: ['Cluster', 'Local'],
    internalTrafficPolicy: ['Cluster', 'Local'],
    ipFamilyPolicy: ['SingleStack', 'PreferDualStack', 'RequireDualStack'],
    ipFamilies: ['IPv4', 'IPv6'],
  },
  'io.k8s.api.core.v1.Container': {
    imagePullPolicy: ['Always', 'Never', 'IfNotPresent'],
    terminationMessagePolicy: ['File', 'FallbackToLogsOnError'],
  },
  'io.k8s.api.core.v1.PodSpec': {
    restartPolicy: ['Always', 'OnFailure', 'Never'],
    dnsPolicy: ['ClusterFirstWithHostNet', 'ClusterFirst', 'Default', 'None'],
  },
};
// Init and ephemeral containers share the Container enums.
MISSING_ENUMS['io.k8s.api.core.v1.EphemeralContainer'] = MISSING_ENUMS['io.k8s.api.core.v1.Container']!;

function prepareComponents(schemas: JsonObject): JsonObject {
  const prepared: JsonObject = {};
  for (const [name, schema] of Object.entries(schemas)) {
    const copy = prepareSchema(schema, false) as JsonObject;
    const enums = MISSING_ENUMS[name];
    if (enums) addEnums(copy, enums);
    prepared[name] = copy;
  }
  // Quantity is `oneOf: [string, number]` upstream: any string passes. The API server parses it.
  if (prepared['io.k8s.apimachinery.pkg.api.resource.Quantity']) {
    prepared['io.k8s.apimachinery.pkg.api.resource.Quantity'] = {
      type: ['string', 'number'],
      pattern: QUANTITY_PATTERN,
    };
  }
  // metav1.Time unmarshals null (kubectl prints `creationTimestamp: null`).
  if (prepared['io.k8s.apimachinery.pkg.apis.meta.v1.Time']) {
    prepared['io.k8s.apimachinery.pkg.apis.meta.v1.Time'] = { type: ['string', 'null'], format: 'date-time' };
  }
  return prepared;
}

function prepareCrdSchema(openAPIV3Schema: JsonObject, kind: string): JsonObject {
  const schema = prepareSchema(openAPIV3Schema, true) as JsonObject;
  const properties = schema.properties as JsonObject | undefined;
  // The CRD only says `metadata: {type: object}`; the API server validates it as ObjectMeta.
  if (properties?.metadata) properties.metadata = { $ref: OBJECT_META_REF };
  if (kind === 'Job') {
    // Volcano creates Pods from each task template; the API server would reject these values then.
    const podSpec = schemaAt(schema, ['spec', 'tasks', '[]', 'template', 'spec']);
    if (podSpec) {
      addEnums(podSpec, MISSING_ENUMS['io.k8s.api.core.v1.PodSpec']!);
      for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
        const container = schemaAt(podSpec, [list, '[]']);
        if (!container) continue;
        addEnums(container, MISSING_ENUMS['io.k8s.api.core.v1.Container']!);
        const port = schemaAt(container, ['ports', '[]']);
        if (port) addEnums(port, MISSING_ENUMS['io.k8s.api.core.v1.ContainerPort']!);
      }
    }
  }
  return schema;
}

/** Returns a rewritten copy; only schema positions are visited, so extension values and descriptions stay data. */
function prepareSchema(node: unknown, crd: boolean): unknown {
  if (!isRecord(node)) return node;
  const s: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'description') continue; // large and unused
    if (key === 'properties' && isRecord(value)) {
      s.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, prepareSchema(v, crd)]));
    } else if (key === 'additionalProperties' || key === 'not') {
      s[key] = prepareSchema(value, crd);
    } else if (key === 'items') {
      s.items = Array.isArray(value) ? value.map((v) => prepareSchema(v, crd)) : prepareSchema(value, crd);
    } else if ((key === 'allOf' || key === 'anyOf' || key === 'oneOf') && Array.isArray(value)) {
      s[key] = value.map((v) => prepareSchema(v, crd));
    } else {
      s[key] = value;
    }
  }

  // int-or-string: upstream `anyOf`/`oneOf` of integer and string produce noisy errors; a union type does not.
  if (s['x-kubernetes-int-or-string'] === true || s.format === 'int-or-string') {
    delete s.anyOf;
    delete s.oneOf;
    delete s.format;
    s.type = ['integer', 'string'];
  }
  if (typeof s.format === 'string' && !KNOWN_FORMATS.has(s.format)) delete s.format;

  // Strict: an object that lists its fields accepts only those fields.
  if (
    isRecord(s.properties) &&
    s.additionalProperties === undefined &&
    s['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    s.additionalProperties = false;
  }

  // The API server enforces list types for custom resources only; built-in types validate lists in Go code.
  if (crd && s['x-kubernetes-list-type'] === 'set') s.uniqueItems = true;
  if (crd && s['x-kubernetes-list-type'] === 'map' && Array.isArray(s['x-kubernetes-list-map-keys'])) {
    const keys = s['x-kubernetes-list-map-keys'] as string[];
    const itemProperties = isRecord(s.items) && isRecord(s.items.properties) ? s.items.properties : {};
    const defaults: Record<string, unknown> = {};
    for (const key of keys) {
      const property = itemProperties[key];
      if (isRecord(property) && property.default !== undefined) defaults[key] = property.default;
    }
    s[LIST_MAP_KEYWORD] = { keys, defaults } satisfies ListMapSpec;
  }

  // OpenAPI 3.0 `nullable` (none in the current fixtures, but CRDs may use it).
  if (s.nullable === true) {
    delete s.nullable;
    if (Array.isArray(s.enum)) s.enum = [...s.enum, null];
    if (typeof s.type === 'string' || Array.isArray(s.type)) s.type = [...[s.type].flat(), 'null'];
    else return { anyOf: [{ type: 'null' }, s] };
  }
  return s;
}

function addEnums(schema: JsonObject, enums: Record<string, readonly string[]>): void {
  const properties = schema.properties;
  if (!isRecord(properties)) return;
  for (const [name, values] of Object.entries(enums)) {
    const property = properties[name];
    if (!isRecord(property)) continue;
    const target = property.type === 'array' && isRecord(property.items) ? property.items : property;
    target.enum = [...values];
  }
}

/** Walks properties by name; '[]' steps into array items. */
function schemaAt(schema: JsonObject, path: string[]): JsonObject | undefined {
  let current: unknown = schema;
  for (const step of path) {
    if (!isRecord(current)) return undefined;
    current =
      step === '[]' ? current.items : isRecord(current.properties) ? current.properties[step] : undefined;
  }
  return isRecord(current) ? current : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Checks the API server does in Go code rather than in the schema

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;
const TOTAL_ANNOTATION_BYTES = 256 * 1024;
const CONFIG_MAP_BYTES = 1024 * 1024;

type NameRule = 'dns1123Subdomain' | 'dns1123Label' | 'dns1035Label';

/** Per-kind name validation in Kubernetes; everything else uses DNS-1123 subdomain (ValidateObjectMeta default). */
const NAME_RULES: Record<string, NameRule> = {
  'v1 Namespace': 'dns1123Label',
  'v1 Service': 'dns1035Label', // ValidateServiceName is NameIsDNS1035Label: must start with a letter
};

function semanticProblems(object: JsonObject, entry: KindEntry): string[] {
  const problems: string[] = [];
  const metadata = object.metadata;
  if (metadata === undefined) {
    problems.push('metadata: is required');
  } else if (isRecord(metadata)) {
    const name = metadata.name;
    if (name === undefined) problems.push('metadata.name: is required');
    else if (typeof name === 'string') {
      const rule = NAME_RULES[`${entry.apiVersion} ${entry.kind}`] ?? 'dns1123Subdomain';
      const problem = nameProblem(name, rule);
      if (problem) problems.push(`metadata.name: ${problem}`);
    }
    const namespace = metadata.namespace;
    if (namespace !== undefined && entry.scope === 'Cluster') {
      problems.push(`metadata.namespace: must not be set, ${entry.kind} is cluster-scoped`);
    } else if (typeof namespace === 'string') {
      const problem = nameProblem(namespace, 'dns1123Label');
      if (problem) problems.push(`metadata.namespace: ${problem}`);
    }
  }
  collectEmbeddedProblems(object, '', true, problems);
  if (entry.apiVersion === 'v1' && entry.kind === 'Service' && isRecord(object.spec)) {
    labelMapProblems(object.spec.selector, 'spec.selector', problems);
  }
  if (entry.apiVersion === 'v1' && (entry.kind === 'ConfigMap' || entry.kind === 'Secret')) {
    configDataProblems(object, problems);
  }
  return problems;
}

function nameProblem(value: string, rule: NameRule): string | undefined {
  const [pattern, max, what] =
    rule === 'dns1123Label'
      ? [
          DNS1123_LABEL,
          63,
          'a DNS-1123 label (lowercase alphanumerics and "-", starting and ending alphanumeric)',
        ]
      : rule === 'dns1035Label'
        ? [DNS1035_LABEL, 63, 'a DNS-1035 label (lowercase alphanumerics and "-", starting with a letter)']
        : [DNS1123_SUBDOMAIN, 253, 'a DNS-1123 subdomain (lowercase alphanumerics, "-" and ".")'];
  if (value.length > max) return `must be at most ${max} characters (got ${value.length})`;
  if (!pattern.test(value)) return `must be ${what} (got ${JSON.stringify(value)})`;
  return undefined;
}

/** Label keys, annotation keys: `[prefix/]name` with a DNS-1123 subdomain prefix. */
function qualifiedNameProblem(key: string): string | undefined {
  const parts = key.split('/');
  if (parts.length > 2) return 'must have at most one "/"';
  const name = parts[parts.length - 1]!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix.length === 0) return 'prefix must not be empty';
    if (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) return 'prefix must be a DNS-1123 subdomain';
  }
  if (name.length === 0) return 'name part must not be empty';
  if (name.length > 63) return 'name part must be at most 63 characters';
  if (!QUALIFIED_NAME.test(name)) {
    return 'name part must consist of alphanumerics, "-", "_" or ".", starting and ending alphanumeric';
  }
  return undefined;
}

function labelMapProblems(labels: unknown, path: string, problems: string[]): void {
  if (!isRecord(labels)) return;
  for (const [key, value] of Object.entries(labels)) {
    const at = joinPath(path, key);
    const keyProblem = qualifiedNameProblem(key);
    if (keyProblem) problems.push(`${at}: invalid label key: ${keyProblem}`);
    if (typeof value !== 'string') continue; // the schema reports the type
    if (value.length > 63)
      problems.push(`${at}: label value must be at most 63 characters (got ${value.length})`);
    else if (!LABEL_VALUE.test(value)) {
      problems.push(
        `${at}: label value must be empty or alphanumerics, "-", "_" or ".", starting and ending alphanumeric (got ${JSON.stringify(value)})`,
      );
    }
  }
}

function annotationProblems(annotations: unknown, path: string, problems: string[]): void {
  if (!isRecord(annotations)) return;
  let bytes = 0;
  for (const [key, value] of Object.entries(annotations)) {
    // Kubernetes lowercases annotation keys before checking them.
    const keyProblem = qualifiedNameProblem(key.toLowerCase());
    if (keyProblem) problems.push(`${joinPath(path, key)}: invalid annotation key: ${keyProblem}`);
    bytes += Buffer.byteLength(key) + (typeof value === 'string' ? Buffer.byteLength(value) : 0);
  }
  if (bytes > TOTAL_ANNOTATION_BYTES) {
    problems.push(`${path}: annotations must total at most ${TOTAL_ANNOTATION_BYTES} bytes (got ${bytes})`);
  }
}

/**
 * Labels and annotations of the object and of embedded templates (a Volcano task's pod template), and label maps
 * used as selectors: their keys and values follow label rules wherever they appear.
 */
function collectEmbeddedProblems(value: unknown, path: string, root: boolean, problems: string[]): void {
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      collectEmbeddedProblems(item, `${path}[${index}]`, false, problems);
    });
    return;
  }
  if (!isRecord(value)) return;
  for (const [key, child] of Object.entries(value)) {
    const at = joinPath(path, key);
    if (root && (key === 'data' || key === 'stringData' || key === 'binaryData')) continue; // user data
    if (key === 'metadata' && isRecord(child)) {
      labelMapProblems(child.labels, joinPath(at, 'labels'), problems);
      annotationProblems(child.annotations, joinPath(at, 'annotations'), problems);
      continue;
    }
    if (key === 'matchLabels' || key === 'nodeSelector') {
      labelMapProblems(child, at, problems);
      continue;
    }
    if (key === 'annotations' || key === 'labels') continue;
    collectEmbeddedProblems(child, at, false, problems);
  }
}

function configDataProblems(object: JsonObject, problems: string[]): void {
  let bytes = 0;
  const seen = new Map<string, string>();
  for (const field of ['data', 'stringData', 'binaryData']) {
    const data = object[field];
    if (!isRecord(data)) continue;
    for (const [key, value] of Object.entries(data)) {
      const at = joinPath(field, key);
      if (key.length > 253 || !CONFIG_KEY.test(key) || key === '.' || key === '..' || key.startsWith('..')) {
        problems.push(
          `${at}: key must consist of alphanumerics, "-", "_" or "." (got ${JSON.stringify(key)})`,
        );
      }
      // A ConfigMap key may not be in both data and binaryData (stringData is merged into a Secret's data).
      if (object.kind === 'ConfigMap' && seen.has(key)) {
        problems.push(`${at}: duplicates ${joinPath(seen.get(key)!, key)}`);
      }
      seen.set(key, field);
      bytes += Buffer.byteLength(key) + (typeof value === 'string' ? Buffer.byteLength(value) : 0);
    }
  }
  if (object.kind === 'ConfigMap' && bytes > CONFIG_MAP_BYTES) {
    problems.push(`data: ConfigMap data must total at most ${CONFIG_MAP_BYTES} bytes (got ${bytes})`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Error formatting

function formatError(data: unknown, error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  const { path, value } = pathFromPointer(data, error.instancePath);
  const got = value === undefined ? '' : ` (got ${describe(value)})`;
  switch (error.keyword) {
    case 'required':
      return `${joinPath(path, String(params.missingProperty))}: is required`;
    case 'additionalProperties':
      return `${joinPath(path, String(params.additionalProperty))}: is not a known field`;
    case 'type': {
      const types = Array.isArray(params.type) ? params.type : String(params.type).split(',');
      return `${show(path)}: must be ${types.map(article).join(' or ')}${got}`;
    }
    case 'enum':
      return `${show(path)}: must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}${got}`;
    case 'pattern':
      if (params.pattern === QUANTITY_PATTERN) {
        return `${show(path)}: must be a Kubernetes quantity such as "500m", "2Gi", "1.5" or "1e3"${got}`;
      }
      return `${show(path)}: must match /${String(params.pattern)}/${got}`;
    case 'format':
      return `${show(path)}: ${formatMessage(String(params.format))}${got}`;
    case 'uniqueItems':
      return `${show(path)}: must not repeat items ([${String(params.i)}] and [${String(params.j)}] are equal)`;
    case LIST_MAP_KEYWORD:
      return `${show(path)}: ${error.message}`;
    default:
      return `${show(path)}: ${error.message ?? `fails ${error.keyword}`}${got}`;
  }
}

function formatMessage(format: string): string {
  switch (format) {
    case 'int32':
      return 'must be a 32-bit integer';
    case 'int64':
      return 'must be a 64-bit integer within JavaScript safe integer range';
    case 'byte':
      return 'must be base64-encoded';
    case 'date-time':
      return 'must be an RFC 3339 date-time';
    default:
      return `must be a valid ${format}`;
  }
}

/**
 * "/spec/tasks/0/template" → "spec.tasks[0].template" and the value there (the error's data: Ajv's
 * `verbose` would copy the schemas into the cached code); the data tells array indexes from numeric
 * map keys.
 */
function pathFromPointer(data: unknown, pointer: string): { path: string; value: unknown } {
  if (pointer === '') return { path: '', value: data };
  let path = '';
  let current: unknown = data;
  for (const raw of pointer.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(current)) {
      path += `[${segment}]`;
      current = current[Number(segment)];
    } else {
      path = joinPath(path, segment);
      current = isRecord(current) ? current[segment] : undefined;
    }
  }
  return { path, value: current };
}

function joinPath(path: string, key: string): string {
  if (/^[A-Za-z_$][\w$-]*$/.test(key)) return path ? `${path}.${key}` : key;
  return `${path}[${JSON.stringify(key)}]`;
}

function show(path: string): string {
  return path === '' ? '(root)' : path;
}

function article(type: string): string {
  if (type === 'null') return 'null';
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string')
    return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  return `${typeof value} ${String(value)}`;
}

function nameOf(object: JsonObject): unknown {
  return isRecord(object.metadata) ? object.metadata.name : undefined;
}

function isRecord(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
