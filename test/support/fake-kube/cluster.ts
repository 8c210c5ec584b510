import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../../../src/config/config.ts';
import { until } from '../until.ts';
import { type FakeApiServer, type FakeApiServerOptions, startFakeApiServer } from './api-server.ts';
import { type StandInOptions, type VolcanoStandIn, volcanoStandIn } from './volcano.ts';

export interface FakeCluster {
  api: FakeApiServer;
  volcano: VolcanoStandIn;
  /** A kubeconfig file whose current context is the fake API server. */
  kubeconfig: string;
  /** Another such file, whose requests carry `token`: the API server's calls say who made them. */
  kubeconfigAs(token: string): Promise<string>;
  /** The configuration pointing at it (kubernetes.kubeconfig set). */
  config(extra?: Config): Config;
}

/** A fake API server with the Volcano stand-in and a kubeconfig for it; all cleaned up after the test. */
export async function fakeCluster(
  t: { after(cleanup: () => unknown): void },
  options: StandInOptions & FakeApiServerOptions = {},
): Promise<FakeCluster> {
  const api = await startFakeApiServer(options);
  const volcano = volcanoStandIn(api, options);
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-kube-'));
  const kubeconfigAs = async (token: string, file = join(dir, `kubeconfig-${token}`)) => {
    await writeFile(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: fake, cluster: {server: "' + api.url + '", insecure-skip-tls-verify: true}}]',
        `users: [{name: tester, user: {token: ${token}}}]`,
        'contexts: [{name: fake, context: {cluster: fake, user: tester}}, {name: other, context: {cluster: fake, user: tester}}]',
        'current-context: fake',
        '',
      ].join('\n'),
    );
    return file;
  };
  const kubeconfig = await kubeconfigAs('test-token', join(dir, 'kubeconfig'));
  // The namespace of the `single` strategy exists beforehand, as an operator creates it.
  api.apply('namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ucompute-jobs' } });
  t.after(async () => {
    await api.close();
    await rm(dir, { recursive: true, force: true });
  });
  return {
    api,
    volcano,
    kubeconfig,
    kubeconfigAs,
    // The example catalogue's mpi-hello runs as root, which these clusters' operators allow.
    config: (extra = {}) => ({
      security: { allowRootApps: true },
      ...extra,
      kubernetes: { kubeconfig, ...extra.kubernetes },
    }),
  };
}

/**
 * Waits on a condition for effects that are not events: until() with the time a loaded machine
 * needs (a watch event has taken seconds at a load of 40).
 */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  await until(check, { describe: `the condition ${check.toString()}`, timeout: timeoutMs });
}
