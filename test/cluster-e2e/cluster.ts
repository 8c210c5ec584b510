/**
 * The real-cluster suite's set-up: the cluster that `scripts/cluster.sh test` started (its folder
 * in UCOMPUTE_CLUSTER_DIR), kubectl as its administrator, and `ucompute serve --backend
 * kubernetes` children that use the chart's ServiceAccount (DIR/ucompute.kubeconfig).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';
import { serveClient } from '../support/browser.ts';
import { ROOT } from '../support/fixtures.ts';
import { type Served, startServe, stopServe } from '../support/serve.ts';
import { until } from '../support/until.ts';

const dir = process.env.UCOMPUTE_CLUSTER_DIR;
if (!dir && process.env.CI === 'true')
  throw new Error('UCOMPUTE_CLUSTER_DIR is unset: run the real-cluster suite with `npm run test:cluster`');

/** The cluster's folder; tests are skipped (outside CI) when there is none. */
export const CLUSTER_DIR = dir ?? '';
export const skip = dir ? false : 'no cluster: run the real-cluster suite with `npm run test:cluster`';

const run = promisify(execFile);

/** kubectl as the cluster's administrator (or as ucompute's ServiceAccount with `asUcompute`). */
export async function kubectl(args: string[], options: { asUcompute?: boolean; input?: string } = {}) {
  const bin = (await readFile(join(CLUSTER_DIR, 'run', 'bin'), 'utf8')).trim();
  const kubeconfig = join(CLUSTER_DIR, options.asUcompute ? 'ucompute.kubeconfig' : 'admin.kubeconfig');
  const child = run(join(bin, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    maxBuffer: 64 << 20,
  });
  if (options.input !== undefined) child.child.stdin!.end(options.input);
  return (await child).stdout;
}

// biome-ignore lint/suspicious/noExplicitAny: API objects as kubectl prints them.
export async function kubectlJson(args: string[]): Promise<any> {
  return JSON.parse(await kubectl([...args, '-o', 'json']));
}

export interface Ucompute {
  served: Served;
  token: string;
  client: ReturnType<typeof serveClient>;
  /** Where the users' drives are (the job folders, saved logs). */
  storage: string;
  /** Retrieves a job as the API answers it. */
  // biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
  job(id: string): Promise<any>;
  /** Waits until the job is in `state`; a job that reaches another final state fails the test. */
  // biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
  untilState(id: string, state: string, tries?: number): Promise<any>;
  /** Submits one job (a spec as the API takes it) and answers its id. */
  submit(spec: Record<string, unknown>): Promise<string>;
  /** A client of a new user `name` (not an administrator) with credits of their own. */
  user(name: string): Promise<ReturnType<typeof serveClient>>;
  stop(): Promise<void>;
}

const FINAL = new Set(['SUCCESS', 'FAILURE', 'EXPIRED']);

/**
 * Starts `ucompute serve --backend kubernetes` on the cluster, with the example catalogue and the
 * simulated apps of test/cluster/apps, the `single` namespace strategy in the namespace `ucompute`
 * (whose storage claim `up` made) unless `perOwner`; `config` is added to its configuration (YAML
 * lines). `dataDir` reuses a data folder (a restart).
 */
export async function startUcompute(
  t: TestContext,
  { config = '', dataDir, perOwner = false }: { config?: string; dataDir?: string; perOwner?: boolean } = {},
): Promise<Ucompute> {
  const data = dataDir ?? (await mkdtemp(join(tmpdir(), 'ucompute-cluster-e2e-')));
  if (!dataDir) t.after(() => rm(data, { recursive: true, force: true }));
  const storage = join(data, 'storage');
  await mkdir(storage, { recursive: true });
  const served = await startServe(data, {
    args: ['--backend', 'kubernetes'],
    config: [
      `apps: [${join(ROOT, 'examples/apps')}, ${join(ROOT, 'test/cluster/apps')}]`,
      `storage: { root: ${storage} }`,
      'monitorIntervalMs: 200',
      'security: { allowRootApps: true }',
      'kubernetes:',
      `  kubeconfig: ${join(CLUSTER_DIR, 'ucompute.kubeconfig')}`,
      perOwner ? '  namespaceStrategy: per-owner' : '  namespaceStrategy: single\n  namespace: ucompute',
      config,
    ].join('\n'),
  });
  const token = (await readFile(join(data, 'admin.token'), 'utf8')).trim();
  const client = serveClient(served.url, token);
  const job = async (id: string) => {
    const answer = await fetch(`${served.url}/api/jobs/retrieve?id=${id}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(answer.status, 200);
    return answer.json();
  };
  const ucompute: Ucompute = {
    served,
    token,
    client,
    storage,
    job,
    async untilState(id, state, tries = 600) {
      let last: { status: { state: string }; updates: unknown[] } | undefined;
      // Any final state ends the wait (until() swallows what its condition throws, so a wrong
      // end thrown from there would wait out every try); the wrong one fails just after.
      await until(
        async () => {
          last = (await job(id)) as typeof last;
          return last!.status.state === state || FINAL.has(last!.status.state);
        },
        { describe: `job ${id} ${state}`, timeout: tries * 200, every: 200 },
      ).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}; last seen: ${JSON.stringify(last?.updates)}`);
      });
      if (last!.status.state !== state)
        assert.fail(`job ${id} is ${last!.status.state}, not ${state}: ${JSON.stringify(last!.updates)}`);
      return last;
    },
    async submit(spec) {
      const created = await client.api<{ responses: { id: string }[] }>('/api/jobs', { items: [spec] });
      return created.responses[0]!.id;
    },
    async user(name) {
      await client.api('/api/admin/users', { name, admin: false });
      await client.api('/api/accounting/allocations', {
        owner: `user:${name}`,
        category: 'u1-standard',
        credits: 1_000_000,
      });
      const { token: theirs } = await client.api<{ token: string }>('/api/admin/tokens', {
        username: name,
        description: 'e2e',
      });
      return serveClient(served.url, theirs);
    },
    stop: () => stopServe(served),
  };
  t.after(() => ucompute.stop());
  return ucompute;
}

/** A job specification of an app of the catalogue on a u1-standard product. */
export const spec = (
  app: string,
  parameters: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
) => ({
  application: { name: app, version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
  parameters,
  ...extra,
});

/** The parameters of the simulated batch app (test/cluster/apps/sim-batch.yml). */
export const simulated = (exitCode: number, runTime = '2s', exitReason?: string) => ({
  exitCode: { type: 'integer', value: exitCode },
  runTime: { type: 'text', value: runTime },
  ...(exitReason ? { exitReason: { type: 'text', value: exitReason } } : {}),
});

/** The Volcano Job, pods and companions a job left in the cluster (by its job-id label). */
export async function objectsOf(jobId: string): Promise<string[]> {
  const list = await kubectlJson([
    'get',
    'jobs.batch.volcano.sh,pods,podgroups,services,secrets,configmaps,networkpolicies',
    '--all-namespaces',
    '-l',
    `ucompute.dev/job-id=${jobId}`,
  ]);
  return list.items.map((o: { kind: string; metadata: { name: string } }) => `${o.kind}/${o.metadata.name}`);
}

/**
 * An owner's namespace with the storage claim its jobs mount (a claim is namespaced): made ahead,
 * as an operator does for the per-owner strategy (docs/kubernetes.md); ucompute finds it there.
 */
export async function ownerNamespace(name: string): Promise<void> {
  const objects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: `storage-${name}` },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteMany'],
        hostPath: { path: join(CLUSTER_DIR, 'storage') },
        claimRef: { namespace: name, name: 'ucompute-storage' },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'ucompute-storage', namespace: name },
      spec: {
        accessModes: ['ReadWriteMany'],
        storageClassName: '',
        volumeName: `storage-${name}`,
        resources: { requests: { storage: '1Gi' } },
      },
    },
  ];
  await kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
  });
}
