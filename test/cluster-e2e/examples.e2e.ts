/**
 * Every example app of the catalogue (examples/apps) through ucompute on the real cluster, as its
 * users submit it: what ends by itself ends SUCCESS; what serves until it is stopped (web, VNC,
 * ssh, a terminal) runs until it is cancelled, and is then SUCCESS. No container runs on KWOK's
 * nodes: a replica's life is test/cluster/kwok-stages.yaml's (it serves, or exits 0 after 2 s).
 */
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../support/fixtures.ts';
import { skip, spec, startUcompute } from './cluster.ts';

/** The example apps' names (examples/apps holds tools too: those are not apps). */
async function exampleApps(): Promise<string[]> {
  const dir = join(ROOT, 'examples/apps');
  const names: string[] = [];
  for (const file of await readdir(dir)) {
    const text = await readFile(join(dir, file), 'utf8');
    if (/^application: v1$/m.test(text)) names.push(/^name: (\S+)$/m.exec(text)![1]!);
  }
  return names.sort();
}

test('every example app runs on the cluster: batch ones to their end, interactive ones until cancelled', {
  skip,
}, async (t) => {
  const ucompute = await startUcompute(t);
  await mkdir(join(ucompute.storage, 'home/local/books'), { recursive: true });
  await writeFile(join(ucompute.storage, 'home/local/books/moby-dick.txt'), 'Call me Ishmael.\n');
  const fileServer = await ucompute.submit(spec('file-server'));
  const ending: Record<string, Record<string, unknown>> = {
    'mpi-hello': JSON.parse(await readFile(join(ROOT, 'examples/jobs/mpi-hello.json'), 'utf8')),
    'word-count': JSON.parse(await readFile(join(ROOT, 'examples/jobs/word-count.json'), 'utf8')),
    'http-check': spec('http-check', { server: { type: 'peer', hostname: 'server', jobId: fileServer } }),
  };
  const serving: Record<string, Record<string, unknown>> = {
    'file-server': {},
    desktop: spec('desktop'),
    jupyter: spec('jupyter'),
    terminal: spec('terminal'),
    'ssh-server': spec('ssh-server', {}, { sshEnabled: true }),
  };
  assert.deepEqual(
    [...Object.keys(ending), ...Object.keys(serving)].sort(),
    await exampleApps(),
    'a new example app needs its case here',
  );
  const ids: Record<string, string> = { 'file-server': fileServer };
  for (const [app, job] of Object.entries({ ...ending, ...serving })) {
    if (app !== 'file-server') ids[app] = await ucompute.submit(job);
  }
  for (const app of Object.keys(ending)) await ucompute.untilState(ids[app]!, 'SUCCESS');
  for (const app of Object.keys(serving)) await ucompute.untilState(ids[app]!, 'RUNNING');
  const stopping = Object.keys(serving).map((app) => ({ id: ids[app]! }));
  await ucompute.client.api('/api/jobs/terminate', { items: stopping });
  for (const app of Object.keys(serving)) await ucompute.untilState(ids[app]!, 'SUCCESS');
});
