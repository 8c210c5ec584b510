/**
 * Logs, a web session and a terminal through the real API server: KWOK answers the kubelet's
 * logs, port-forward and exec from a file, a web server and a shell this test starts on loopback
 * (its Logs, PortForward and Exec objects name them for one pod).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, CHILD_ENV } from '../support/cli.ts';
import { appGet, type Served, signIn } from '../support/kubernetes-sessions.ts';
import { until } from '../support/until.ts';
import { kubectl, kubectlJson, skip, spec, startUcompute } from './cluster.ts';

/** KWOK's object for one pod of the namespace `ucompute` (the single strategy's). */
const kwokObject = (kind: string, pod: string, body: Record<string, unknown>) =>
  JSON.stringify({
    apiVersion: 'kwok.x-k8s.io/v1alpha1',
    kind,
    metadata: { name: pod, namespace: 'ucompute' },
    spec: body,
  });

const podOf = (jobId: string) => `j-${jobId}-job-0`;

test('logs are followed live through the API server, and saved into the job folder at the end', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-cluster-logs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'rank0.log');
  // KWOK serves a container log file as the kubelet keeps one: in the CRI's format.
  const cri = (line: string) => `${new Date().toISOString()} stdout F ${line}\n`;
  await writeFile(file, cri('first line'));
  const id = await ucompute.submit(spec('terminal'));
  await kubectl(['apply', '-f', '-'], {
    input: kwokObject('Logs', podOf(id), {
      logs: [{ containers: ['user-job'], logsFile: file, follow: true }],
    }),
  });
  await ucompute.untilState(id, 'RUNNING');
  const follower = spawn(process.execPath, [BIN, 'logs', '-f', id, '--url', ucompute.served.url], {
    env: { ...CHILD_ENV, UCOMPUTE_TOKEN: ucompute.token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => follower.kill());
  let out = '';
  let err = '';
  follower.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  follower.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  await until(async () => out.includes('first line'), {
    describe: 'the first line followed',
    timeout: 180_000,
    every: 200,
  }).catch((e: unknown) => assert.fail(`${(e as Error).message}: ${out} ${err}`));
  await appendFile(file, cri('a line written later'));
  await until(async () => out.includes('a line written later'), {
    describe: 'a later line followed live',
    timeout: 180_000,
    every: 200,
  });
  await ucompute.client.api('/api/jobs/terminate', { items: [{ id }] });
  await ucompute.untilState(id, 'SUCCESS');
  const job = await ucompute.job(id);
  const folder = job.output?.outputFolder ?? job.status?.outputFolder;
  assert.ok(folder, JSON.stringify(job));
  const saved = await readFile(join(ucompute.storage, folder, 'stdout-0.log'), 'utf8');
  assert.match(saved, /first line\na line written later/);
});

test('a web session reaches the app through port-forward, and only with its cookie', { skip }, async (t) => {
  const app = createServer((req, res) => res.end(`hello from the pod at ${req.url}`));
  app.listen(0, '127.0.0.1');
  t.after(() => app.close());
  await new Promise((resolve) => app.once('listening', resolve));
  const appPort = (app.address() as { port: number }).port;
  const ucompute = await startUcompute(t);
  const id = await ucompute.submit(spec('jupyter'));
  await kubectl(['apply', '-f', '-'], {
    input: kwokObject('PortForward', podOf(id), {
      forwards: [{ ports: [8888], target: { port: appPort, address: '127.0.0.1' } }],
    }),
  });
  await ucompute.untilState(id, 'RUNNING');
  const served = { port: Number(new URL(ucompute.served.url).port), token: ucompute.token } as Served;
  const cookie = await signIn(served, id);
  let last = '';
  await until(
    async () => {
      const answer = await appGet(served, id, cookie, '/tree');
      last = `${answer.status} ${answer.body.slice(0, 200)}`;
      return answer.status === 200;
    },
    { describe: 'the app answering through the proxy', timeout: 180_000, every: 200 },
  ).catch((e: unknown) => assert.fail(`${(e as Error).message}: ${last}`));
  assert.equal((await appGet(served, id, cookie, '/tree')).body, 'hello from the pod at /tree');
  assert.equal((await appGet(served, id, 'ucompute-session=forged', '/tree')).status, 401);
  await ucompute.client.api('/api/jobs/terminate', { items: [{ id }] });
});

test('a terminal through exec runs a shell in the pod', { skip }, async (t) => {
  const ucompute = await startUcompute(t);
  const work = await mkdtemp(join(tmpdir(), 'ucompute-cluster-exec-'));
  t.after(() => rm(work, { recursive: true, force: true }));
  const id = await ucompute.submit(spec('terminal'));
  await kubectl(['apply', '-f', '-'], {
    input: kwokObject('Exec', podOf(id), { execs: [{ containers: ['user-job'], local: { workDir: work } }] }),
  });
  await ucompute.untilState(id, 'RUNNING');
  const shell = spawn(process.execPath, [BIN, 'shell', id, '--url', ucompute.served.url], {
    env: { ...CHILD_ENV, UCOMPUTE_TOKEN: ucompute.token },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  t.after(() => shell.kill());
  let out = '';
  shell.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  shell.stderr!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  shell.stdin!.write('echo "in $(pwd): $((6*7))"\n');
  await until(async () => out.includes(`in ${work}: 42`), {
    describe: 'the shell answered',
    timeout: 180_000,
    every: 200,
  }).catch((e: unknown) => assert.fail(`${(e as Error).message}: ${out}`));
  shell.stdin!.end('exit\n');
  await ucompute.client.api('/api/jobs/terminate', { items: [{ id }] });
});

test('an ssh job gets its NodePort Service, and every job its NetworkPolicies, as the API server accepted them', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  const id = await ucompute.submit(spec('ssh-server', {}, { sshEnabled: true }));
  await ucompute.untilState(id, 'RUNNING');
  const services = await kubectlJson([
    'get',
    'services',
    '-n',
    'ucompute',
    '-l',
    `ucompute.dev/job-id=${id}`,
  ]);
  const ssh = services.items.find((s: { spec: { type: string } }) => s.spec.type === 'NodePort');
  assert.ok(ssh, JSON.stringify(services.items.map((s: { metadata: unknown }) => s.metadata)));
  assert.ok(ssh.spec.ports[0].nodePort >= 30000);
  const policies = await kubectlJson([
    'get',
    'networkpolicies',
    '-n',
    'ucompute',
    '-l',
    `ucompute.dev/job-id=${id}`,
  ]);
  assert.ok(policies.items.length >= 1);
  const job = await ucompute.job(id);
  assert.match(JSON.stringify(job.updates), new RegExp(`-p ${ssh.spec.ports[0].nodePort}`));
  await ucompute.client.api('/api/jobs/terminate', { items: [{ id }] });
});
