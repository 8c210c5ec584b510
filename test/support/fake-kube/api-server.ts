/**
 * A fake Kubernetes API server for the kubernetes backend's tests: node:http on 127.0.0.1 following
 * the REST conventions of the endpoints ucompute uses (discovery, create/get/list/update/patch/
 * delete, Status bodies for 404/409/…, label selectors, resource versions, watch streams that
 * can be expired with 410, pod logs with follow, exec and port-forward over WebSocket with the
 * channel protocol). Every object it receives is validated against the shared fixtures; every
 * call is recorded as (verb, group, resource) for the RBAC check. Test code drives the cluster
 * side (the Volcano stand-in) through `apply`/`remove`/`appendLog`.
 */

import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect as tcpConnect } from 'node:net';
import * as nodePty from 'node-pty';
import { type WebSocket, WebSocketServer } from 'ws';
import { kubernetesObjectProblems } from '../kubernetes-schemas.ts';
import { type ContainerUsage, fakeMetricsApi } from './metrics-api.ts';

// biome-ignore lint/suspicious/noExplicitAny: API objects are free-form JSON here.
export type Obj = any;

export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const RESOURCES: ResourceType[] = [
  { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false },
  { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false },
  { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true },
  { group: '', version: 'v1', plural: 'services', kind: 'Service', namespaced: true },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true },
  { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true },
  {
    group: 'networking.k8s.io',
    version: 'v1',
    plural: 'networkpolicies',
    kind: 'NetworkPolicy',
    namespaced: true,
  },
  { group: 'batch.volcano.sh', version: 'v1alpha1', plural: 'jobs', kind: 'Job', namespaced: true },
  { group: 'scheduling.volcano.sh', version: 'v1beta1', plural: 'queues', kind: 'Queue', namespaced: false },
  {
    group: 'scheduling.volcano.sh',
    version: 'v1beta1',
    plural: 'podgroups',
    kind: 'PodGroup',
    namespaced: true,
  },
];

export interface Call {
  verb: string;
  group: string;
  resource: string;
  namespace?: string;
  name?: string;
  /** For deletes: the grace period and propagation policy asked for. */
  grace?: number;
  propagation?: string;
  /** The bearer token the request came with: who made it (see FakeCluster.kubeconfigAs). */
  token?: string;
}

export interface Fault {
  verb?: string;
  resource?: string;
  /** HTTP status to answer with; 0 hangs until the client gives up (a timeout). */
  status: number;
  times: number;
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Obj;
  rv: number;
  key: string;
}

interface OpenWatch {
  type: ResourceType;
  namespace?: string;
  selector: Selector;
  res: ServerResponse;
}

const HISTORY_KEPT = 200_000;

export interface FakeApiServer {
  url: string;
  calls: Call[];
  /** Objects received that the fixtures' schemas reject (each also answered with 422). */
  invalid: string[];
  /** Every object received from clients, in order (after validation). */
  received: Obj[];
  resizes: { cols: number; rows: number }[];
  get(plural: string, namespace: string | undefined, name: string): Obj | undefined;
  list(plural: string, namespace?: string): Obj[];
  /** Writes an object as the cluster would (a controller): no validation, a watch event. */
  apply(plural: string, object: Obj): Obj;
  remove(plural: string, namespace: string | undefined, name: string): void;
  onChange(listener: (type: string, plural: string, object: Obj) => void): void;
  appendLog(namespace: string, pod: string, text: string): void;
  endLog(namespace: string, pod: string): void;
  /** Where port-forwards to a pod connect (a local TCP server of the test). */
  forwardPort(namespace: string, pod: string, localPort: number): void;
  /** What metrics-server reports for a pod's containers (metrics.k8s.io) from now on. */
  podMetrics(namespace: string, pod: string, containers: ContainerUsage[]): void;
  fail(fault: Fault): void;
  /**
   * An admission webhook: called for every object a client creates, after schema validation;
   * a message refuses the object (answered as the API server answers a webhook's denial).
   */
  admission(check: (plural: string, object: Obj) => string | undefined): void;
  /** Ends every open watch with a 410 ERROR event and forgets the history: clients must list again. */
  expireWatches(): void;
  openWatches(): number;
  resourceVersion(): number;
  close(): Promise<void>;
}

export interface FakeApiServerOptions {
  /**
   * Exec runs a real `sh` on a pty in this folder (on the test machine), instead of the pretend
   * echo shell: resizes reach the pty, and its exit code the status channel as the kubelet sends it.
   */
  realShellIn?: string;
}

export async function startFakeApiServer(options: FakeApiServerOptions = {}): Promise<FakeApiServer> {
  // Compiling a kind's schema takes a while the first time: done now, not in the middle of a test.
  for (const r of RESOURCES) {
    kubernetesObjectProblems({
      apiVersion: r.group ? `${r.group}/${r.version}` : r.version,
      kind: r.kind,
      metadata: { name: 'x' },
    });
  }
  const store = new Map<string, Map<string, Obj>>(RESOURCES.map((r) => [r.plural, new Map()]));
  const metrics = fakeMetricsApi();
  const history: WatchEvent[] = [];
  let compactedBelow = 0;
  let rv = 1000;
  const watches = new Set<OpenWatch>();
  const calls: Call[] = [];
  const invalid: string[] = [];
  const received: Obj[] = [];
  const resizes: { cols: number; rows: number }[] = [];
  const faults: Fault[] = [];
  const admissions: ((plural: string, object: Obj) => string | undefined)[] = [];
  const listeners: ((type: string, plural: string, object: Obj) => void)[] = [];
  const logs = new Map<string, { text: string; ended: boolean; followers: Set<ServerResponse> }>();
  const forwards = new Map<string, number>();
  const hanging = new Set<ServerResponse>();
  let uid = 0;
  let nodePorts = 0;

  const keyOf = (namespace: string | undefined, name: string) => `${namespace ?? ''}/${name}`;

  function record(type: WatchEvent['type'], plural: string, object: Obj): void {
    const event: WatchEvent = {
      type,
      object,
      rv: Number(object.metadata.resourceVersion),
      key: plural,
    };
    history.push(event);
    if (history.length > HISTORY_KEPT) {
      const dropped = history.splice(0, history.length - HISTORY_KEPT);
      compactedBelow = dropped.at(-1)!.rv;
    }
    for (const w of watches) {
      if (w.type.plural !== plural) continue;
      if (w.namespace !== undefined && object.metadata.namespace !== w.namespace) continue;
      if (!w.selector(object.metadata.labels ?? {})) continue;
      w.res.write(`${JSON.stringify({ type, object })}\n`);
    }
    for (const l of listeners) l(type, plural, object);
  }

  function put(plural: string, object: Obj, type: 'ADDED' | 'MODIFIED'): Obj {
    object.metadata.resourceVersion = String(++rv);
    store.get(plural)!.set(keyOf(object.metadata.namespace, object.metadata.name), object);
    record(type, plural, object);
    return object;
  }

  function drop(plural: string, namespace: string | undefined, name: string): Obj | undefined {
    const objects = store.get(plural)!;
    const object = objects.get(keyOf(namespace, name));
    if (!object) return undefined;
    objects.delete(keyOf(namespace, name));
    object.metadata.resourceVersion = String(++rv);
    record('DELETED', plural, object);
    if (plural === 'pods') endLogOf(namespace ?? '', name);
    return object;
  }

  function logOf(namespace: string, pod: string) {
    const key = `${namespace}/${pod}`;
    let entry = logs.get(key);
    if (!entry) {
      entry = { text: '', ended: false, followers: new Set() };
      logs.set(key, entry);
    }
    return entry;
  }

  function endLogOf(namespace: string, pod: string): void {
    const entry = logs.get(`${namespace}/${pod}`);
    if (!entry) return;
    entry.ended = true;
    for (const f of entry.followers) f.end();
    entry.followers.clear();
  }

  const status = (res: ServerResponse, code: number, reason: string, message: string) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message,
        reason,
        code,
      }),
    );
  };
  const json = (res: ServerResponse, code: number, body: unknown) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  function discovery(path: string): Obj | undefined {
    const groupVersion = path === '/api/v1' ? 'v1' : path.replace(/^\/apis\//, '');
    const types = RESOURCES.filter((r) => (r.group ? `${r.group}/${r.version}` : r.version) === groupVersion);
    if (types.length === 0) return undefined;
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion,
      resources: types.map((r) => ({
        name: r.plural,
        singularName: r.kind.toLowerCase(),
        namespaced: r.namespaced,
        kind: r.kind,
        verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
      })),
    };
  }

  interface Target {
    type: ResourceType;
    namespace?: string;
    name?: string;
    subresource?: string;
  }

  function parse(path: string): Target | undefined {
    const m = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))\/(.*)$/.exec(path);
    if (!m) return undefined;
    const group = m[2] ?? '';
    const version = m[1] ?? m[3]!;
    const segments = m[4]!
      .split('/')
      .filter((s) => s !== '')
      .map(decodeURIComponent);
    let namespace: string | undefined;
    if (segments[0] === 'namespaces' && segments.length >= 3) {
      namespace = segments[1];
      segments.splice(0, 2);
    }
    const type = RESOURCES.find(
      (r) => r.group === group && r.version === version && r.plural === segments[0],
    );
    if (!type) return undefined;
    return {
      type,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(segments[1] !== undefined ? { name: segments[1] } : {}),
      ...(segments[2] !== undefined ? { subresource: segments[2] } : {}),
    };
  }

  function verbOf(method: string, target: Target, query: URLSearchParams): string {
    if (method === 'GET') {
      if (target.name === undefined) return query.get('watch') === 'true' ? 'watch' : 'list';
      return 'get';
    }
    return (
      { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }[method] ?? method.toLowerCase()
    );
  }

  function takeFault(verb: string, resource: string): Fault | undefined {
    const fault = faults.find((f) => (f.verb ?? verb) === verb && (f.resource ?? resource) === resource);
    if (!fault) return undefined;
    fault.times--;
    if (fault.times <= 0) faults.splice(faults.indexOf(fault), 1);
    return fault;
  }

  /** Validates what a client sent; answers false (after a 422) when the fixtures reject it. */
  function accept(res: ServerResponse, object: Obj): boolean {
    const problems = kubernetesObjectProblems(object);
    if (problems.length === 0) {
      received.push(structuredClone(object));
      return true;
    }
    const text = `${object?.kind} ${object?.metadata?.namespace ?? ''}/${object?.metadata?.name}: ${problems.join('; ')}`;
    invalid.push(text);
    status(res, 422, 'Invalid', text);
    return false;
  }

  async function body(req: IncomingMessage): Promise<Obj> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text === '' ? undefined : JSON.parse(text);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) status(res, 500, 'InternalError', String(e));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const method = req.method ?? 'GET';
    const measured = metrics.answer(url.pathname, method, calls);
    if (measured) return json(res, measured.status, measured.body);
    if (method === 'GET') {
      const listing = discovery(url.pathname);
      if (listing) return json(res, 200, listing);
    }
    const target = parse(url.pathname);
    if (!target)
      return status(res, 404, 'NotFound', `the server could not find the requested resource ${url.pathname}`);
    const { type } = target;
    const resource = target.subresource ? `${type.plural}/${target.subresource}` : type.plural;
    const verb = verbOf(method, target, url.searchParams);
    calls.push({
      verb,
      group: type.group,
      resource,
      ...(target.namespace !== undefined ? { namespace: target.namespace } : {}),
      ...(target.name !== undefined ? { name: target.name } : {}),
      ...tokenOf(req),
    });
    const fault = takeFault(verb, resource);
    if (fault) {
      if (fault.status === 0) {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      const reason = { 403: 'Forbidden', 409: 'Conflict', 429: 'TooManyRequests', 500: 'InternalError' }[
        fault.status
      ];
      return status(
        res,
        fault.status,
        reason ?? 'Unknown',
        `injected ${fault.status} for ${verb} ${resource}`,
      );
    }
    const objects = store.get(type.plural)!;

    if (target.subresource === 'log' && method === 'GET') return podLog(res, target, url.searchParams);
    if (target.name === undefined) {
      if (method === 'GET') {
        const selector = parseSelector(url.searchParams.get('labelSelector') ?? '');
        if (url.searchParams.get('watch') === 'true')
          return watch(req, res, target, selector, url.searchParams);
        const items = [...objects.values()].filter(
          (o) =>
            (target.namespace === undefined || o.metadata.namespace === target.namespace) &&
            selector(o.metadata.labels ?? {}),
        );
        // Pages: the continue token holds the version the first page was listed at and the offset.
        const limit = Number(url.searchParams.get('limit') ?? 0);
        const [listedAt, offset] = (url.searchParams.get('continue') ?? `${rv}:0`).split(':').map(Number) as [
          number,
          number,
        ];
        const end = limit > 0 ? offset + limit : items.length;
        return json(res, 200, {
          kind: `${type.kind}List`,
          apiVersion: type.group ? `${type.group}/${type.version}` : type.version,
          metadata: {
            resourceVersion: String(listedAt),
            ...(end < items.length ? { continue: `${listedAt}:${end}` } : {}),
          },
          items: items.slice(offset, end),
        });
      }
      if (method === 'POST') {
        const object = await body(req);
        if (type.namespaced) object.metadata.namespace ??= target.namespace;
        if (!accept(res, object)) return;
        for (const check of admissions) {
          const denied = check(type.plural, object);
          if (denied !== undefined) return status(res, 400, 'BadRequest', denied);
        }
        if (type.namespaced && !store.get('namespaces')!.has(keyOf(undefined, object.metadata.namespace))) {
          return status(res, 404, 'NotFound', `namespaces "${object.metadata.namespace}" not found`);
        }
        const key = keyOf(object.metadata.namespace, object.metadata.name);
        if (objects.has(key)) {
          return status(res, 409, 'AlreadyExists', `${type.plural} "${object.metadata.name}" already exists`);
        }
        object.metadata.uid = `uid-${++uid}`;
        object.metadata.creationTimestamp = new Date().toISOString();
        object.metadata.generation = 1;
        if (type.plural === 'services' && object.spec?.type === 'NodePort') {
          // As the API server: a node port from 30000-32767 for each port that names none.
          for (const port of object.spec.ports ?? []) port.nodePort ??= 30000 + (nodePorts++ % 2768);
        }
        if (type.plural === 'namespaces') {
          object.metadata.labels = {
            ...object.metadata.labels,
            'kubernetes.io/metadata.name': object.metadata.name,
          };
        }
        return json(res, 201, put(type.plural, object, 'ADDED'));
      }
      return status(res, 405, 'MethodNotAllowed', `${method} on a collection`);
    }

    const key = keyOf(target.namespace, target.name);
    const existing = objects.get(key);
    if (method === 'GET') {
      if (!existing) return status(res, 404, 'NotFound', `${type.plural} "${target.name}" not found`);
      return json(res, 200, existing);
    }
    if (method === 'DELETE') {
      if (!existing) return status(res, 404, 'NotFound', `${type.plural} "${target.name}" not found`);
      const options = (await body(req)) ?? {};
      const grace = Number(url.searchParams.get('gracePeriodSeconds') ?? options.gracePeriodSeconds ?? 30);
      const call = calls.at(-1)!;
      call.grace = grace;
      call.propagation = url.searchParams.get('propagationPolicy') ?? options.propagationPolicy ?? '';
      existing.metadata.deletionGracePeriodSeconds = grace;
      drop(type.plural, target.namespace, target.name);
      return json(res, 200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' });
    }
    if (method === 'PATCH' || method === 'PUT') {
      if (!existing) return status(res, 404, 'NotFound', `${type.plural} "${target.name}" not found`);
      const change = await body(req);
      const contentType = req.headers['content-type'] ?? '';
      const wanted = change?.metadata?.resourceVersion;
      if (wanted !== undefined && wanted !== existing.metadata.resourceVersion) {
        return status(
          res,
          409,
          'Conflict',
          `the object has been modified; please apply your changes to the latest version`,
        );
      }
      let next: Obj;
      if (method === 'PUT') next = change;
      else if (contentType.includes('json-patch')) next = jsonPatch(structuredClone(existing), change);
      else next = mergePatch(structuredClone(existing), change);
      next.metadata = {
        ...next.metadata,
        uid: existing.metadata.uid,
        creationTimestamp: existing.metadata.creationTimestamp,
      };
      if (!accept(res, withoutServerFields(next))) return;
      return json(res, 200, put(type.plural, next, 'MODIFIED'));
    }
    return status(res, 405, 'MethodNotAllowed', method);
  }

  function watch(
    _req: IncomingMessage,
    res: ServerResponse,
    target: Target,
    selector: Selector,
    query: URLSearchParams,
  ): void {
    const from = Number(query.get('resourceVersion') ?? '0');
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // At once, as the API server does: a client has its watch (and can abort it) before any event.
    res.flushHeaders();
    if (from !== 0 && from < compactedBelow) {
      res.end(
        `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 } })}\n`,
      );
      return;
    }
    const w: OpenWatch = {
      type: target.type,
      ...(target.namespace !== undefined ? { namespace: target.namespace } : {}),
      selector,
      res,
    };
    // Events after the version asked for, in order (a binary search would do; histories are short).
    let start = history.length;
    while (start > 0 && history[start - 1]!.rv > from) start--;
    for (let i = start; i < history.length; i++) {
      const e = history[i]!;
      if (e.key !== target.type.plural) continue;
      if (target.namespace !== undefined && e.object.metadata.namespace !== target.namespace) continue;
      if (!selector(e.object.metadata.labels ?? {})) continue;
      res.write(`${JSON.stringify({ type: e.type, object: e.object })}\n`);
    }
    watches.add(w);
    res.on('close', () => watches.delete(w));
  }

  function podLog(res: ServerResponse, target: Target, query: URLSearchParams): void {
    const pod = store.get('pods')!.get(keyOf(target.namespace, target.name!));
    if (!pod) {
      status(res, 404, 'NotFound', `pods "${target.name}" not found`);
      return;
    }
    const entry = logOf(target.namespace ?? '', target.name!);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write(entry.text);
    if (query.get('follow') !== 'true' || entry.ended) {
      res.end();
      return;
    }
    entry.followers.add(res);
    res.on('close', () => entry.followers.delete(res));
  }

  const sockets = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) =>
      protocols.has('v5.channel.k8s.io') ? 'v5.channel.k8s.io' : ([...protocols][0] ?? false),
  });

  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const target = parse(url.pathname);
    if (!target || (target.subresource !== 'exec' && target.subresource !== 'portforward')) {
      socket.destroy();
      return;
    }
    calls.push({
      verb: 'create',
      group: '',
      resource: `pods/${target.subresource}`,
      ...(target.namespace !== undefined ? { namespace: target.namespace } : {}),
      name: target.name!,
      ...tokenOf(req),
    });
    const pod = store.get('pods')!.get(keyOf(target.namespace, target.name!));
    if (!pod) {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    sockets.handleUpgrade(req, socket, head, (ws) => {
      if (target.subresource !== 'exec') portForward(ws, target, Number(url.searchParams.get('ports')));
      else if (options.realShellIn !== undefined) realShell(ws, options.realShellIn);
      else fakeShell(ws, url.searchParams);
    });
  });

  /** A pretend shell: echoes what it is sent; `exit [code]` ends it with its status (Success for 0). */
  function fakeShell(ws: WebSocket, query: URLSearchParams): void {
    const send = (channel: number, text: string) =>
      ws.send(Buffer.concat([Buffer.from([channel]), Buffer.from(text)]));
    send(1, `$ tty=${query.get('tty')} command=${query.getAll('command').join(' ')}\n`);
    ws.on('message', (data: Buffer) => {
      const channel = data[0];
      const payload = data.subarray(1).toString('utf8');
      if (channel === 4) {
        const size = JSON.parse(payload) as {
          Width?: number;
          Height?: number;
          width?: number;
          height?: number;
        };
        resizes.push({ cols: size.Width ?? size.width ?? 0, rows: size.Height ?? size.height ?? 0 });
        return;
      }
      if (channel !== 0) return;
      const exit = /^exit(?: (\d+))?$/.exec(payload.trim());
      if (exit) {
        const code = exit[1] ?? '0';
        send(
          3,
          JSON.stringify(
            code === '0'
              ? { metadata: {}, status: 'Success' }
              : {
                  metadata: {},
                  status: 'Failure',
                  message: `command terminated with non-zero exit code: exit status ${code}`,
                  reason: 'NonZeroExitCode',
                  details: { causes: [{ reason: 'ExitCode', message: code }] },
                },
          ),
        );
        ws.close();
        return;
      }
      send(1, payload);
    });
  }

  /** `sh` on a pty: stdin is channel 0, the terminal's output channel 1, sizes channel 4. */
  function realShell(ws: WebSocket, cwd: string): void {
    const pty = nodePty.spawn('/bin/sh', [], {
      name: 'xterm-256color',
      cols: 80,
      rows: 24,
      cwd,
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', TERM: 'xterm-256color', PS1: '$ ', HOME: cwd },
      encoding: null,
    });
    pty.onData((data) => ws.send(Buffer.concat([Buffer.from([1]), data as unknown as Buffer])));
    pty.onExit(({ exitCode, signal }) => {
      // A shell ended by signal n reports 128+n, as the container runtime does.
      const code = signal ? 128 + signal : exitCode;
      ws.send(Buffer.concat([Buffer.from([3]), Buffer.from(JSON.stringify(execStatus(code)))]));
      ws.close();
    });
    ws.on('message', (data: Buffer) => {
      const payload = data.subarray(1);
      if (data[0] === 0) pty.write(payload.toString('utf8'));
      if (data[0] === 4) {
        // client-node sends {width, height}.
        const size = JSON.parse(payload.toString('utf8')) as { width: number; height: number };
        resizes.push({ cols: size.width, rows: size.height });
        pty.resize(size.width, size.height);
      }
    });
    ws.on('close', () => pty.kill());
  }

  function portForward(ws: WebSocket, target: Target, port: number): void {
    const local = forwards.get(`${target.namespace}/${target.name}`);
    const portBytes = Buffer.from([port & 0xff, port >> 8]);
    // Each channel's first frame names the port (data channel 0, error channel 1). The error
    // channel's comes once the pod's port answered: after the client has its stream in hand.
    ws.send(Buffer.concat([Buffer.from([0]), portBytes]));
    if (local === undefined) {
      ws.send(Buffer.concat([Buffer.from([1]), portBytes]));
      ws.send(Buffer.concat([Buffer.from([1]), Buffer.from(`no listener on port ${port}`)]));
      ws.close();
      return;
    }
    const tcp = tcpConnect({ host: '127.0.0.1', port: local });
    tcp.once('connect', () => setTimeout(() => ws.send(Buffer.concat([Buffer.from([1]), portBytes])), 20));
    tcp.on('data', (d: Buffer) => ws.send(Buffer.concat([Buffer.from([0]), d])));
    tcp.on('close', () => ws.close());
    tcp.on('error', () => ws.close());
    ws.on('message', (data: Buffer) => {
      if (data[0] === 0) tcp.write(data.subarray(1));
    });
    ws.on('close', () => tcp.end());
  }

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    invalid,
    received,
    resizes,
    get: (plural, namespace, name) => store.get(plural)!.get(keyOf(namespace, name)),
    list: (plural, namespace) =>
      [...store.get(plural)!.values()].filter(
        (o) => namespace === undefined || o.metadata.namespace === namespace,
      ),
    apply(plural, object) {
      const objects = store.get(plural)!;
      const key = keyOf(object.metadata.namespace, object.metadata.name);
      const existing = objects.get(key);
      if (!existing) {
        object.metadata.uid ??= `uid-${++uid}`;
        object.metadata.creationTimestamp ??= new Date().toISOString();
      }
      return put(plural, object, existing ? 'MODIFIED' : 'ADDED');
    },
    remove(plural, namespace, name) {
      drop(plural, namespace, name);
    },
    onChange(listener) {
      listeners.push(listener);
    },
    appendLog(namespace, pod, text) {
      const entry = logOf(namespace, pod);
      entry.text += text;
      for (const f of entry.followers) f.write(text);
    },
    endLog: endLogOf,
    podMetrics: metrics.set,
    forwardPort(namespace, pod, localPort) {
      forwards.set(`${namespace}/${pod}`, localPort);
    },
    fail(fault) {
      faults.push({ ...fault });
    },
    admission(check) {
      admissions.push(check);
    },
    expireWatches() {
      compactedBelow = rv;
      history.length = 0;
      for (const w of watches) {
        w.res.end(
          `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 } })}\n`,
        );
      }
      watches.clear();
    },
    openWatches: () => watches.size,
    resourceVersion: () => rv,
    async close() {
      for (const w of watches) w.res.end();
      watches.clear();
      for (const r of hanging) r.destroy();
      for (const entry of logs.values()) for (const f of entry.followers) f.end();
      for (const ws of sockets.clients) ws.terminate();
      sockets.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The status the kubelet sends on the exec status channel when the command has ended. */
/** The request's bearer token, as a Call's `token`. */
function tokenOf(req: IncomingMessage): { token?: string } {
  const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
  return token === undefined ? {} : { token };
}

function execStatus(exitCode: number): Obj {
  if (exitCode === 0) return { metadata: {}, status: 'Success' };
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: exit status ${exitCode}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
  };
}

/** Server-set metadata is not part of what a client may send; the schemas reject some of it. */
function withoutServerFields(object: Obj): Obj {
  const copy = structuredClone(object);
  for (const f of ['uid', 'resourceVersion', 'creationTimestamp', 'generation', 'deletionGracePeriodSeconds'])
    delete copy.metadata?.[f];
  delete copy.status;
  return copy;
}

function mergePatch(target: Obj, patch: Obj): Obj {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out = target !== null && typeof target === 'object' && !Array.isArray(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function jsonPatch(target: Obj, operations: { op: string; path: string; value?: unknown }[]): Obj {
  for (const op of operations) {
    const parts = op.path
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop()!;
    let node = target;
    for (const p of parts) node = node[p];
    if (op.op === 'remove') {
      if (Array.isArray(node)) node.splice(Number(last), 1);
      else delete node[last];
    } else if (Array.isArray(node) && op.op === 'add') {
      if (last === '-') node.push(op.value);
      else node.splice(Number(last), 0, op.value);
    } else node[last] = op.value;
  }
  return target;
}

type Selector = (labels: Record<string, string>) => boolean;

/** Kubernetes label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`. */
export function parseSelector(text: string): Selector {
  const requirements: Selector[] = [];
  for (const part of text.match(/[^,(]+(\([^)]*\))?/g) ?? []) {
    const term = part.trim();
    if (term === '') continue;
    const set = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    const unequal = /^([^!=]+)!=(.*)$/.exec(term);
    const equal = /^([^!=]+)==?(.*)$/.exec(term);
    if (set) {
      const [, key, op, values] = set;
      const members = new Set(values!.split(',').map((v) => v.trim()));
      requirements.push((l) => (op === 'in') === members.has(l[key!] ?? '\0'));
    } else if (unequal) {
      const [, key, value] = unequal;
      requirements.push((l) => l[key!.trim()] !== value!.trim());
    } else if (equal) {
      const [, key, value] = equal;
      requirements.push((l) => l[key!.trim()] === value!.trim());
    } else if (term.startsWith('!')) {
      requirements.push((l) => !(term.slice(1) in l));
    } else {
      requirements.push((l) => term in l);
    }
  }
  return (labels) => requirements.every((r) => r(labels));
}
