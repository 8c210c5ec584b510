import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Agent, createServer as createHttpServer, get as httpGet } from 'node:http';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { test } from 'node:test';
import type { LogChunk } from '../src/jobs/backend.ts';
import type { JobStorage } from '../src/storage/job-storage.ts';
import { backendOn } from './support/fake-kube/backend.ts';
import { eventually, fakeCluster } from './support/fake-kube/cluster.ts';
import { build } from './support/fixtures.ts';

const TWO = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: 'u1-standard-2', category: 'u1-standard' },
  replicas: 2,
  parameters: {},
};
const NS = 'ucompute-u-alice';

function memoryStorage(): JobStorage & { files: Map<string, string> } {
  const files = new Map<string, string>();
  return {
    files,
    async ensureFolder() {},
    async writeFile(path, content) {
      files.set(path, content);
    },
  };
}

test('logs: every rank followed as it starts, until the job ends; then saved into the job folder', async (t) => {
  const cluster = await fakeCluster(t);
  const storage = memoryStorage();
  const { backend, event } = backendOn(t, cluster, {}, storage);
  const b = await build(TWO, { id: 'l1', config: cluster.config() });
  await backend.submit('l1', b);
  cluster.volcano.admit('l1');
  cluster.volcano.run('l1');
  await event((e) => e.jobId === 'l1' && e.state === 'RUNNING');
  cluster.api.appendLog(NS, 'j-l1-job-0', 'zero: hello\n');
  const chunks: LogChunk[] = [];
  const following = (async () => {
    for await (const chunk of backend.logs('l1', { follow: true })) chunks.push(chunk);
  })();
  await eventually(() => chunks.some((c) => c.stdout?.includes('zero: hello')));
  cluster.api.appendLog(NS, 'j-l1-job-1', 'one: hi\n');
  cluster.api.appendLog(NS, 'j-l1-job-0', 'zero: bye\n');
  await eventually(() => chunks.some((c) => c.rank === 1 && c.stdout?.includes('one: hi')));
  cluster.volcano.finish('l1', [0, 0]);
  await following; // ends by itself when the job ended
  const text = (rank: number) =>
    chunks
      .filter((c) => c.rank === rank)
      .map((c) => c.stdout)
      .join('');
  assert.equal(text(0), 'zero: hello\nzero: bye\n');
  assert.equal(text(1), 'one: hi\n');
  await event((e) => e.jobId === 'l1' && e.state === 'SUCCESS');
  const folder = b.volcanoJob.metadata.annotations?.['ucompute.dev/output-folder'];
  assert.equal(storage.files.get(`${folder}/stdout-0.log`), 'zero: hello\nzero: bye\n');
  assert.equal(storage.files.get(`${folder}/stdout-1.log`), 'one: hi\n');
});

test('logs without follow, and following stops when the caller aborts', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('l2', await build(TWO, { id: 'l2', config: cluster.config() }));
  cluster.volcano.admit('l2');
  cluster.volcano.run('l2');
  await event((e) => e.jobId === 'l2' && e.state === 'RUNNING');
  cluster.api.appendLog(NS, 'j-l2-job-1', 'so far\n');
  let all: LogChunk[] = [];
  await eventually(async () => {
    all = [];
    for await (const c of backend.logs('l2', { follow: false })) all.push(c);
    return all.length === 2;
  });
  assert.deepEqual(all, [
    { rank: 0, stdout: '' },
    { rank: 1, stdout: 'so far\n' },
  ]);
  const abort = new AbortController();
  const seen: LogChunk[] = [];
  const following = (async () => {
    for await (const c of backend.logs('l2', { follow: true, signal: abort.signal })) seen.push(c);
  })();
  await eventually(() => seen.length > 0);
  abort.abort();
  await following;
  // Cancelling the job ends a follower too.
  const again = (async () => {
    for await (const _ of backend.logs('l2', { follow: true })) void _;
  })();
  await backend.cancel('l2');
  await again;
  // A job the cluster does not have has no logs here (they are in its job folder).
  for await (const _ of backend.logs('unknown', { follow: true })) assert.fail('no logs expected');
});

test('shell: exec with a terminal into the rank, input, resize and exit', async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('sh1', await build(TWO, { id: 'sh1', config: cluster.config() }));
  await event((e) => e.jobId === 'sh1' && e.state === 'IN_QUEUE');
  await assert.rejects(backend.shell('sh1', 0, { cols: 80, rows: 24 }), /rank 0 of job sh1 is not running/);
  cluster.volcano.admit('sh1');
  cluster.volcano.run('sh1');
  await event((e) => e.jobId === 'sh1' && e.state === 'RUNNING');
  const shell = await backend.shell('sh1', 1, { cols: 100, rows: 30 });
  let out = '';
  shell.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  await eventually(() => out.includes('tty=true'));
  assert.match(out, /command=sh -c TERM=xterm-256color/);
  shell.write('echo hi\n');
  await eventually(() => out.includes('echo hi'));
  shell.resize({ cols: 120, rows: 40 });
  await eventually(() => cluster.api.resizes.length >= 2);
  assert.deepEqual(cluster.api.resizes, [
    { cols: 100, rows: 30 },
    { cols: 120, rows: 40 },
  ]);
  shell.write('exit\n');
  await once(shell, 'end');
  assert.equal(await shell.exitCode, 0);
  const exec = cluster.api.calls.find((c) => c.resource === 'pods/exec');
  assert.equal(exec?.name, 'j-sh1-job-1');
});

test("shell: the exit code from the exec's status", async (t) => {
  const cluster = await fakeCluster(t);
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('sh2', await build(TWO, { id: 'sh2', config: cluster.config() }));
  cluster.volcano.admit('sh2');
  cluster.volcano.run('sh2');
  await event((e) => e.jobId === 'sh2' && e.state === 'RUNNING');
  const shell = await backend.shell('sh2', 0, { cols: 80, rows: 24 });
  shell.resume();
  shell.write('exit 3\n');
  assert.equal(await shell.exitCode, 3);
});

test('connect: a byte stream to a pod port through port-forward when outside the cluster', async (t) => {
  const cluster = await fakeCluster(t);
  // Echoes one message, then closes its side.
  const echo = createServer((socket) => socket.once('data', (d) => socket.end(d)));
  echo.listen(0, '127.0.0.1');
  await once(echo, 'listening');
  t.after(() => echo.close());
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('pf1', await build(TWO, { id: 'pf1', config: cluster.config() }));
  cluster.volcano.admit('pf1');
  cluster.volcano.run('pf1');
  await event((e) => e.jobId === 'pf1' && e.state === 'RUNNING');
  const address = echo.address();
  cluster.api.forwardPort(NS, 'j-pf1-job-0', typeof address === 'object' && address ? address.port : 0);
  const stream = await backend.connect('pf1', 0, 8080);
  let back = '';
  stream.setEncoding('utf8').on('data', (d: string) => {
    back += d;
  });
  const closed = once(stream, 'close');
  stream.write('ping');
  await eventually(() => back === 'ping');
  // The pod's side closed: the stream closes (both ways), as a TCP socket would.
  await closed;
  const forward = cluster.api.calls.find((c) => c.resource === 'pods/portforward');
  assert.equal(forward?.name, 'j-pf1-job-0');
});

test('connect: port-forward streams serve a keep-alive pool: reused, dropped when the app closes them, released when idle', async (t) => {
  const cluster = await fakeCluster(t);
  let connections = 0;
  let open = 0;
  const app = createHttpServer((req, res) => res.end(`${req.url} on connection ${connections}`));
  app.on('connection', (socket: Socket) => {
    connections++;
    open++;
    socket.on('close', () => open--);
  });
  app.listen(0, '127.0.0.1');
  await once(app, 'listening');
  t.after(() => {
    app.closeAllConnections();
    app.close();
  });
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('pf2', await build(TWO, { id: 'pf2', config: cluster.config() }));
  cluster.volcano.admit('pf2');
  cluster.volcano.run('pf2');
  await event((e) => e.jobId === 'pf2' && e.state === 'RUNNING');
  cluster.api.forwardPort(NS, 'j-pf2-job-0', (app.address() as AddressInfo).port);
  const pool = new Agent({ keepAlive: true, timeout: 300 });
  pool.createConnection = (_options, done) => {
    backend.connect('pf2', 0, 8888).then(
      (stream) => done?.(null, stream as Socket),
      (error: Error) => done?.(error, undefined as never),
    );
    return undefined as never;
  };
  t.after(() => pool.destroy());
  const get = (path: string) =>
    new Promise<string>((resolve, reject) => {
      httpGet({ host: 'app.invalid', path, agent: pool }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve(body));
      }).on('error', reject);
    });
  const forwards = () => cluster.api.calls.filter((c) => c.resource === 'pods/portforward').length;
  assert.equal(await get('/a'), '/a on connection 1');
  assert.equal(await get('/b'), '/b on connection 1');
  assert.equal(forwards(), 1);
  // The app closes its idle connection: the pool must not send the next request into it.
  app.closeIdleConnections();
  await eventually(() => Object.keys(pool.freeSockets).length === 0);
  assert.equal(await get('/c'), '/c on connection 2');
  assert.equal(forwards(), 2);
  // Idle past the pool's timeout: the stream is released, and the app sees its connection end.
  await eventually(() => Object.keys(pool.freeSockets).length === 0 && open === 0);
  assert.equal(await get('/d'), '/d on connection 3');
  assert.equal(forwards(), 3);
});

test('connect: a stream to a rank closes when the rank ends, and every stream when the job ends', async (t) => {
  const cluster = await fakeCluster(t);
  const app = createServer(() => {});
  app.listen(0, '127.0.0.1');
  await once(app, 'listening');
  t.after(() => app.close());
  const { backend, event } = backendOn(t, cluster);
  await backend.submit('pf3', await build(TWO, { id: 'pf3', config: cluster.config() }));
  cluster.volcano.admit('pf3');
  cluster.volcano.run('pf3');
  await event((e) => e.jobId === 'pf3' && e.state === 'RUNNING');
  for (const rank of [0, 1])
    cluster.api.forwardPort(NS, `j-pf3-job-${rank}`, (app.address() as AddressInfo).port);
  const [zero, one, again] = await Promise.all([
    backend.connect('pf3', 0, 8888),
    backend.connect('pf3', 1, 8888),
    backend.connect('pf3', 1, 8888),
  ]);
  // The fake API server keeps port-forwards open whatever happens to the pod: ucompute closes them.
  cluster.volcano.exit('pf3', 1, 0);
  await eventually(() => one!.destroyed && again!.destroyed);
  assert.equal(zero!.destroyed, false);
  cluster.volcano.finish('pf3', [0, 0]);
  await eventually(() => zero!.destroyed);
});
