import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { needs } from './support/local-tools.ts';
import { serving, spawnServe } from './support/serve.ts';
import { until } from './support/until.ts';

/**
 * A real full disk under `ucompute serve`: its data folder on a 4 MiB tmpfs made by the test.
 * Submissions that no longer fit answer 507 and store nothing; the server keeps answering; once
 * the file system has room again (remounted larger), every accepted job ends: none stays queued
 * or RUNNING.
 */

const tools = await needs('mount', 'umount');
const dir = mkdtempSync(join(tmpdir(), 'ucompute-full-'));
let mounted = false;
let child: ChildProcess | undefined;

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('a full disk under the store', () => {
  after(() => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (mounted) execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  });

  interface Counts {
    total: number;
    active: number;
  }

  async function counts(url: string): Promise<Counts> {
    const text = await (await fetch(`${url}/metrics`)).text();
    let total = 0;
    let active = 0;
    for (const m of text.matchAll(/^ucompute_jobs\{state="(\w+)"\} (\d+)/gm)) {
      total += Number(m[2]);
      if (m[1] === 'IN_QUEUE' || m[1] === 'RUNNING') active += Number(m[2]);
    }
    return { total, active };
  }

  test('a full disk answers 507, keeps the store consistent, and leaves no job behind', tools, async () => {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', dir]);
    mounted = true;
    child = spawnServe(['--data-dir', dir]);
    const url = await serving(child);
    const token = execFileSync('cat', [join(dir, 'admin.token')], { encoding: 'utf8' }).trim();
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const items = Array.from({ length: 50 }, (_, i) => ({
      application: { name: 'mpi-hello', version: '1.0' },
      product: { id: 'u1-standard-2', category: 'u1-standard' },
      name: `filler ${i} ${'x'.repeat(150)}`,
    }));

    let accepted = 0;
    let refused: { status: number; message: string } | undefined;
    for (let i = 0; i < 400 && !refused; i++) {
      const response = await fetch(`${url}/api/jobs`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ items }),
      });
      const body = (await response.json()) as { responses?: unknown[]; message?: string };
      if (response.status === 200) accepted += body.responses!.length;
      else refused = { status: response.status, message: body.message ?? '' };
    }
    assert.ok(refused, 'the disk never filled');
    assert.equal(refused.status, 507, refused.message);
    assert.match(refused.message, /disk is full/);
    assert.ok(accepted > 0);
    // The refused request stored nothing: the store holds exactly the accepted jobs.
    assert.equal((await counts(url)).total, accepted);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);

    execFileSync('mount', ['-o', 'remount,size=256m', dir]);
    const ended = await until(
      async () => {
        const now = await counts(url);
        return now.active === 0 && now;
      },
      { describe: 'every accepted job has ended', timeout: 120_000, every: 100 },
    );
    assert.deepEqual(ended, { total: accepted, active: 0 });
  });
});
