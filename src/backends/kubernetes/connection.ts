import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  createConfiguration,
  type HttpLibrary,
  IsomorphicFetchHttpLibrary,
  KubeConfig,
  KubernetesObjectApi,
  type Middleware,
  ServerConfiguration,
  wrapHttpLibrary,
} from '@kubernetes/client-node';
import { ObjectSerializer } from '@kubernetes/client-node/dist/serializer.js';
import { Agent, type Dispatcher } from 'undici';
import type { ResolvedKubernetesSettings } from './settings.ts';

/** Where the service account's token is mounted in a pod. */
const IN_CLUSTER_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/** Every kind ucompute sends or reads, with its list kind. */
const KINDS = [
  ['', 'v1', 'Namespace'],
  ['', 'v1', 'Pod'],
  ['', 'v1', 'Service'],
  ['', 'v1', 'Secret'],
  ['', 'v1', 'ConfigMap'],
  ['networking.k8s.io', 'v1', 'NetworkPolicy'],
  ['batch.volcano.sh', 'v1alpha1', 'Job'],
  ['scheduling.volcano.sh', 'v1beta1', 'Queue'],
  ['scheduling.volcano.sh', 'v1beta1', 'PodGroup'],
] as const;

let rawJson = false;
/**
 * Objects travel as the API's own JSON, both ways. client-node's typed models would rename
 * fields (a NetworkPolicy rule's `from` becomes `_from` and is dropped when sent back) and turn
 * times into Dates; ucompute's objects are plain data already.
 */
function useRawJson(): void {
  if (rawJson) return;
  rawJson = true;
  const same = { serialize: (data: unknown) => data, deserialize: (data: unknown) => data };
  for (const [group, version, kind] of KINDS) {
    ObjectSerializer.registerModel({ group, version, kind }, same);
    ObjectSerializer.registerModel({ group, version, kind: `${kind}List` }, same);
  }
}

export interface Connection {
  kubeConfig: KubeConfig;
  /** The API server's URL. */
  server: string;
  /** The kubeconfig context, or `in-cluster`. */
  context: string;
  /** Whether ucompute runs in the cluster it talks to, so pod IPs are reachable directly. */
  inCluster: boolean;
  /** Every request except watches and streams goes through the rate limiter and times out. */
  objects: KubernetesObjectApi;
  /**
   * The same, its deletions fenced too (see `writeOnlyWhile`): for what only the leader removes
   * (an ended job's objects, orphans), not for what any replica's API cancels.
   */
  leaderObjects: KubernetesObjectApi;
  limiter: RateLimiter;
  requestTimeoutMs: number;
  /**
   * From now on, a request that creates or changes an object (POST, PUT, PATCH; and DELETE through
   * `leaderObjects`) is written only while `allowed()` answers true, asked as it is written to its
   * connection; refused otherwise (NotLeadingError).
   */
  writeOnlyWhile(allowed: () => boolean): void;
}

/** A create or change not sent: this replica no longer leads (see `Connection.writeOnlyWhile`). */
class NotLeadingError extends Error {
  override name = 'NotLeadingError';
}

const CHANGES = new Set(['POST', 'PUT', 'PATCH']);
const CHANGES_AND_DELETIONS = new Set([...CHANGES, 'DELETE']);

/**
 * Connects as configured: a kubeconfig path from the configuration; otherwise the in-cluster
 * service account when running in a pod; otherwise $KUBECONFIG or ~/.kube/config. A configured
 * context must exist in the file.
 */
export function connect(config: ResolvedKubernetesSettings): Connection {
  useRawJson();
  const kubeConfig = new KubeConfig();
  let inCluster = false;
  if (config.kubeconfig !== null) {
    if (!existsSync(config.kubeconfig))
      throw new Error(`kubernetes.kubeconfig: no file at ${config.kubeconfig}`);
    kubeConfig.loadFromFile(config.kubeconfig);
  } else if (process.env.KUBERNETES_SERVICE_HOST && existsSync(IN_CLUSTER_TOKEN)) {
    kubeConfig.loadFromCluster();
    inCluster = true;
  } else {
    kubeConfig.loadFromDefault();
  }
  if (config.context !== null) {
    if (!kubeConfig.getContextObject(config.context)) {
      const known = kubeConfig.getContexts().map((c) => c.name);
      throw new Error(
        `kubernetes.context: no context "${config.context}" in the kubeconfig (it has: ${known.join(', ') || 'none'})`,
      );
    }
    kubeConfig.setCurrentContext(config.context);
  }
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) {
    throw new Error(
      'kubernetes: no cluster to connect to: set kubernetes.kubeconfig, $KUBECONFIG or ~/.kube/config, or run in a pod',
    );
  }
  const limiter = rateLimiter(config.requestsPerSecond, config.requestBurst);
  let allowed = () => true;
  // client-node gives every request a new undici Agent (KubeConfig.applySecurityAuthentication,
  // for a cluster with TLS options): each opened its own TLS connection, which its agent then kept
  // open. The first request's agent serves them all, so connections are reused. The kubeconfig's
  // TLS options are read once (as the token is not: it stays a per-request header).
  let base: Dispatcher | undefined;
  const objectsFencing = (methods: ReadonlySet<string>) => {
    let dispatcher: Dispatcher | undefined;
    const middleware: Middleware = {
      pre: async (request) => {
        base ??= request.getDispatcher() ?? new Agent();
        dispatcher ??= fenced(base, methods, () => allowed());
        request.setDispatcher(dispatcher);
        await limiter.take();
        return request;
      },
      post: async (response) => response,
    };
    return new KubernetesObjectApi(
      createConfiguration({
        baseServer: new ServerConfiguration(cluster.server, {}),
        authMethods: { default: kubeConfig },
        promiseMiddleware: [middleware],
        httpApi: timedHttpLibrary(config.requestTimeoutMs),
      }),
    );
  };
  const objects = objectsFencing(CHANGES);
  const leaderObjects = objectsFencing(CHANGES_AND_DELETIONS);
  return {
    kubeConfig,
    server: cluster.server,
    context: inCluster ? 'in-cluster' : kubeConfig.getCurrentContext(),
    inCluster,
    objects,
    leaderObjects,
    limiter,
    requestTimeoutMs: config.requestTimeoutMs,
    writeOnlyWhile(now) {
      allowed = now;
    },
  };
}

/**
 * `base` whose requests of these `methods` go only while `allowed()`, asked by undici as each is
 * about to be written to its connection: after the rate limiter's wait and the connection's
 * set-up. A leader that took over has a burst to send (every ended job's removal, every queued
 * job's create) and its creates waited seconds in the rate limiter; paused there (`kill -STOP`)
 * and resumed after the next takeover, it sent them, even for jobs the new leader had created,
 * run and removed by then (a second Volcano Job: no 409). Its removals went out too: one decided
 * for a job's run could remove the job's next run, which has the same name (a restart, a resume),
 * hence `leaderObjects` for removals only the leader decides. Between the question and the request's
 * bytes in the socket only microtasks are left (no timer, no I/O), as in any leader election that
 * does not fence at the API server.
 */
function fenced(base: Dispatcher, methods: ReadonlySet<string>, allowed: () => boolean): Dispatcher {
  return base.compose((dispatch) => (options, handler) => {
    if (!methods.has(options.method)) return dispatch(options, handler);
    const onRequestStart: Dispatcher.DispatchHandler['onRequestStart'] = (controller, context) => {
      if (allowed()) return handler.onRequestStart?.(controller, context);
      controller.abort(
        new NotLeadingError(
          'this replica no longer leads: it creates, changes and removes nothing on the cluster',
        ),
      );
    };
    return dispatch(
      options,
      new Proxy(handler, {
        get: (target, key, receiver) =>
          key === 'onRequestStart' ? onRequestStart : Reflect.get(target, key, receiver),
      }),
    );
  });
}

/**
 * client-node's HTTP library with a timeout on each request: armed when it goes, cleared once its
 * body has been read or it failed, so a finished request keeps nothing (a timer, its controller)
 * for the rest of the timeout — with thousands of requests a minute that was a heap of its own.
 * The abort's reason is a plain Error named TimeoutError, made only when it fires: not
 * AbortSignal.timeout's DOMException, whose read-only message client-node tries to prefix (a
 * TypeError instead of the timeout).
 */
function timedHttpLibrary(ms: number): HttpLibrary {
  const http = new IsomorphicFetchHttpLibrary();
  return wrapHttpLibrary({
    async send(request) {
      const controller = new AbortController();
      const timer = setTimeout(
        () =>
          controller.abort(
            Object.assign(new Error('the API server did not answer in time'), { name: 'TimeoutError' }),
          ),
        ms,
      ).unref();
      request.setSignal(controller.signal);
      try {
        const response = await http.send(request).toPromise();
        const { body } = response;
        const read = <T>(reading: Promise<T>) => reading.finally(() => clearTimeout(timer));
        response.body = {
          text: () => read(body.text()),
          binary: () => read(body.binary()),
          stream: () => body.stream(),
        };
        return response;
      } catch (error) {
        clearTimeout(timer);
        // fetch's "fetch failed" carries the refusal of a fenced write as its cause.
        throw error instanceof Error && error.cause instanceof NotLeadingError ? error.cause : error;
      }
    },
  });
}

export interface RateLimiter {
  /** Resolves when a request may go. */
  take(): Promise<void>;
}

/** A token bucket, as client-go's: `burst` requests at once, then `requestsPerSecond` on average. */
export function rateLimiter(requestsPerSecond: number, burst: number): RateLimiter {
  let tokens = burst;
  let last = performance.now();
  // Waiters are served in order: each reserves a token (tokens may go negative) and sleeps its debt.
  return {
    async take() {
      const now = performance.now();
      tokens = Math.min(burst, tokens + ((now - last) / 1000) * requestsPerSecond);
      last = now;
      tokens -= 1;
      if (tokens < 0) await sleep((-tokens / requestsPerSecond) * 1000);
    },
  };
}

/** The HTTP status of a failed API call, or undefined for other errors (network, timeout). */
export function statusCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

/** The API server's own explanation (its Status message), or the error's. */
export function apiMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body = typeof error.body === 'string' ? safeJson(error.body) : error.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    return `${error.code} ${typeof message === 'string' ? message : 'error'}`;
  }
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
    return 'the API server did not answer in time';
  return error instanceof Error ? error.message : String(error);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}
