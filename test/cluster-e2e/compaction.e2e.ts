/**
 * Watch semantics of the real API server: after an etcd compaction and an API server restart, the
 * version ucompute watched from is gone (a watch from it is answered 410 "too old resource
 * version"), and ucompute lists again — whether it finds out by resuming its watch (the 410) or by
 * its broken connection, which depends on how the closed stream reads. Alone in its file: it
 * restarts the cluster's API server.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../support/fixtures.ts';
import { until } from '../support/until.ts';
import { CLUSTER_DIR, kubectl, kubectlJson, simulated, skip, spec, startUcompute } from './cluster.ts';

const run = promisify(execFile);
const JOBS_PATH = '/apis/batch.volcano.sh/v1alpha1/namespaces/ucompute/jobs';

interface AuditEvent {
  verb: string;
  requestURI: string;
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
}

/** A list of all ucompute's Volcano Jobs (its watch's), not of one job's (a removal's). */
const isRelist = (e: AuditEvent) => e.verb === 'list' && /[?&]limit=/.test(e.requestURI);

/** ucompute's requests on its Volcano Jobs, as the audit log has them. */
async function jobRequests(): Promise<AuditEvent[]> {
  const text = await readFile(join(CLUSTER_DIR, 'logs', 'audit.log'), 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AuditEvent)
    .filter((e) => e.requestURI.startsWith(JOBS_PATH));
}
const since = (requests: AuditEvent[], at: number) =>
  requests.filter((e) => Date.parse(e.requestReceivedTimestamp) >= at);

test('after an etcd compaction and an API server restart, the version watched from is gone (410) and ucompute lists again, seeing what changed meanwhile', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  const pid = ucompute.served.child.pid!;
  const long = await ucompute.submit(spec('terminal'));
  const short = await ucompute.submit(spec('sim-batch', simulated(0, '5s')));
  await ucompute.untilState(long, 'RUNNING');
  await ucompute.untilState(short, 'RUNNING');
  // Paused, ucompute keeps its watches' versions, and resumes them once it runs again.
  process.kill(pid, 'SIGSTOP');
  let restarted = 0;
  try {
    await until(
      async () => {
        const jobs = await kubectlJson([
          'get',
          'jobs.batch.volcano.sh',
          '-A',
          '-l',
          `ucompute.dev/job-id=${short}`,
        ]);
        return jobs.items[0]?.status?.state?.phase === 'Completed';
      },
      { describe: 'the short job completed on the cluster meanwhile', timeout: 180_000, every: 200 },
    );
    const etcd = (await readFile(join(CLUSTER_DIR, 'run', 'etcd-endpoint'), 'utf8')).trim();
    const status = JSON.parse(
      (await run('etcdctl', [`--endpoints=${etcd}`, 'endpoint', 'status', '-w', 'json'])).stdout,
    );
    await run('etcdctl', [`--endpoints=${etcd}`, 'compact', String(status[0].Status.header.revision)]);
    restarted = Date.now();
    await run(join(ROOT, 'scripts/cluster.sh'), ['restart', CLUSTER_DIR, 'kube-apiserver']);
    await until(async () => (await kubectl(['get', '--raw', '/readyz'])) === 'ok', {
      describe: 'the API server ready again',
      timeout: 180_000,
      every: 200,
    });
  } finally {
    process.kill(pid, 'SIGCONT');
  }

  await ucompute.untilState(short, 'SUCCESS');
  assert.equal((await ucompute.job(long)).status.state, 'RUNNING');
  let requests: AuditEvent[] = [];
  await until(
    async () => {
      requests = await jobRequests();
      return since(requests, restarted).some(isRelist);
    },
    { describe: 'the list after the restart in the audit log', timeout: 180_000, every: 200 },
  );
  const summary = JSON.stringify(requests.map((e) => [e.verb, e.requestURI, e.responseStatus?.code]));
  // The version of ucompute's last watch before the restart is gone: the API server answers 410.
  const before = requests.filter(
    (e) => e.verb === 'watch' && Date.parse(e.requestReceivedTimestamp) < restarted,
  );
  const watched = /resourceVersion=(\d+)/.exec(before.at(-1)?.requestURI ?? '')?.[1];
  assert.ok(watched, summary);
  const answer = await kubectl([
    'get',
    '--raw',
    `${JOBS_PATH}?watch=true&resourceVersion=${watched}&timeoutSeconds=1`,
  ]);
  assert.match(answer, /"type":"ERROR".*"reason":"Expired".*"code":410/, answer);
  await ucompute.client.api('/api/jobs/terminate', { items: [{ id: long }] });
  await ucompute.untilState(long, 'SUCCESS');
});
