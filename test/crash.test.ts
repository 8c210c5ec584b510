import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { serving, spawnServe } from './support/serve.ts';

/**
 * The crash test of the job service: while a client submits jobs, `kill -9` the server, restart it
 * on the same data folder, and retry every unanswered request with its Idempotency-Key. Every job
 * that got a 2xx must exist exactly once, and nothing may be duplicated.
 */

const CONCURRENCY = 8;
const MAX_REQUESTS = 2000;
const SUBMIT_FOR_MS = 20_000;
const KILL_CYCLES = 2;
/** Each worker pauses between requests, so that the kills land while requests are in flight. */
const PACE_MS = 20;
const MAX_ATTEMPTS = 60;

const children = new Set<ChildProcess>();
const tmp = mkdtempSync(join(tmpdir(), 'ucompute-crash-'));

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('a replica killed while jobs are submitted', () => {
  after(() => {
    // Whatever happened, no server outlives the test.
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  });

  interface Server {
    child: ChildProcess;
    url: string;
    exited: Promise<void>;
  }

  async function startServer(dataDir: string, config: string): Promise<Server> {
    const child = spawnServe(['--data-dir', dataDir, '--config', config]);
    // Tracked before it is up, so that `after` kills it even if it never says it is serving.
    children.add(child);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    return { child, url: await serving(child), exited };
  }

  interface Submission {
    key: string;
    body: string;
    /** The ids of the first 2xx answer. */
    ids?: string[];
    attempts: number;
    /** When an attempt last went unanswered. */
    failedAt?: number;
  }

  test('kill -9 while jobs are submitted: every acknowledged job exists exactly once', {
    timeout: 120_000,
  }, async (t) => {
    const dataDir = join(tmp, 'data');
    const config = join(tmp, 'config.yml');
    // Enough credits for every job; the monitor kept slow so that it does not compete.
    writeFileSync(config, 'accounting:\n  initialCredits: 100000000\nmonitorIntervalMs: 60000\n');

    let server = await startServer(dataDir, config);
    // Inputs are checked at submit: the one every job reads is there.
    writeFileSync(join(dataDir, 'storage/home/local/in.txt'), 'a b a\n');
    const token = readFileSync(join(dataDir, 'admin.token'), 'utf8').trim();
    /** Resolves when a server is up; replaced while one is down. */
    let up: Promise<Server> = Promise.resolve(server);

    const submissions: Submission[] = [];
    const retries: Submission[] = [];
    const problems: string[] = [];
    let failures = 0;
    let producing = true;
    const started = Date.now();

    const body = (n: number) =>
      JSON.stringify({
        items: [
          {
            application: { name: 'word-count', version: '1.0' },
            product: { id: 'u1-standard-1', category: 'u1-standard' },
            name: `crash ${n}`,
            parameters: { input: { type: 'file', path: '/home/local/in.txt' } },
          },
        ],
      });

    /** One attempt; true when it was answered 2xx. A 4xx is a bug (the bodies are valid): recorded. */
    async function attempt(s: Submission): Promise<boolean> {
      s.attempts++;
      const current = await up;
      let response: Response;
      try {
        response = await fetch(`${current.url}/api/jobs`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'idempotency-key': s.key,
          },
          body: s.body,
          signal: AbortSignal.timeout(10_000),
        });
      } catch {
        failures++;
        return false;
      }
      const text = await response.text().catch(() => undefined);
      if (text === undefined || response.status >= 500) {
        failures++;
        return false;
      }
      if (!response.ok) {
        problems.push(`${s.key}: ${response.status} ${text}`);
        return true; // not retried: it would fail the same way
      }
      const ids = (JSON.parse(text) as { responses: { id: string }[] }).responses.map((r) => r.id);
      if (s.ids === undefined) s.ids = ids;
      else if (JSON.stringify(ids) !== JSON.stringify(s.ids)) {
        problems.push(`${s.key} answered ${ids} after ${s.ids}`);
      }
      return true;
    }

    async function worker(): Promise<void> {
      // Bounded: new requests stop at MAX_REQUESTS or SUBMIT_FOR_MS; each retry at MAX_ATTEMPTS.
      for (;;) {
        let s = retries.shift();
        if (!s) {
          if (!producing || submissions.length >= MAX_REQUESTS || Date.now() - started > SUBMIT_FOR_MS)
            return;
          s = {
            key: `crash-${submissions.length}-${Math.random().toString(36).slice(2)}`,
            body: '',
            attempts: 0,
          };
          s.body = body(submissions.length);
          submissions.push(s);
        }
        if (!(await attempt(s))) {
          s.failedAt = Date.now();
          if (s.attempts < MAX_ATTEMPTS) retries.push(s);
          else problems.push(`${s.key}: no answer after ${s.attempts} attempts`);
          await sleep(50);
        }
        await sleep(PACE_MS);
      }
    }

    const workers = Array.from({ length: CONCURRENCY }, () => worker());

    for (let cycle = 0; cycle < KILL_CYCLES; cycle++) {
      await sleep(300 + Math.floor(Math.random() * 1200));
      const before = submissions.filter((s) => s.ids).length;
      let restarted!: (s: Server) => void;
      up = new Promise((resolve) => {
        restarted = resolve;
      });
      server.child.kill('SIGKILL');
      await server.exited;
      t.diagnostic(`cycle ${cycle + 1}: killed after ${before} acknowledged of ${submissions.length} sent`);
      server = await startServer(dataDir, config);
      restarted(server);
    }
    // A little more traffic against the last server, then only the retries.
    await sleep(300);
    producing = false;
    await Promise.all(workers);
    t.diagnostic(`${submissions.length} requests, ${failures} failed attempts retried`);

    assert.deepEqual(problems, []);
    assert.equal(retries.length, 0);
    const acknowledged = submissions.filter((s) => s.ids);
    assert.equal(acknowledged.length, submissions.length, 'every request was answered in the end');

    const ids = acknowledged.flatMap((s) => s.ids!);
    assert.equal(new Set(ids).size, ids.length, 'no two requests got the same id');

    const headers = { authorization: `Bearer ${token}` };
    const get = async (path: string) => {
      const response = await fetch(`${server.url}${path}`, { headers });
      assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
      return response.json() as Promise<unknown>;
    };

    // Every acknowledged id is there.
    const createdAt = new Map<string, number>();
    for (let i = 0; i < ids.length; i += CONCURRENCY) {
      await Promise.all(
        ids.slice(i, i + CONCURRENCY).map(async (id) => {
          const job = (await get(`/api/jobs/retrieve?id=${id}`)) as { id: string; createdAt: number };
          assert.equal(job.id, id);
          createdAt.set(id, job.createdAt);
        }),
      );
    }

    // Requests whose job was stored before the crash but answered only to a retry: the hard case.
    const recovered = acknowledged.filter(
      (s) => s.failedAt !== undefined && createdAt.get(s.ids![0]!)! < s.failedAt,
    ).length;
    t.diagnostic(`${recovered} jobs were stored before a crash and acknowledged only on a retry`);

    // And nothing else: browse sees each id exactly once.
    const browseAll = async (): Promise<string[]> => {
      const seen: string[] = [];
      let next: string | null = null;
      for (let page = 0; page < Math.ceil(ids.length / 250) + 2; page++) {
        const query: string = `/api/jobs/browse?itemsPerPage=250${next ? `&next=${next}` : ''}`;
        const result = (await get(query)) as { items: { id: string }[]; next: string | null };
        seen.push(...result.items.map((j) => j.id));
        next = result.next;
        if (!next) break;
      }
      assert.equal(next, null, 'browse reached its last page');
      return seen;
    };
    const seen = await browseAll();
    assert.equal(seen.length, new Set(seen).size, 'browse lists no job twice');
    assert.equal(seen.length, ids.length, 'as many stored jobs as acknowledged ids');
    assert.deepEqual([...seen].sort(), [...ids].sort());

    // Replaying every acknowledged key returns the same id and creates nothing.
    for (let i = 0; i < acknowledged.length; i += CONCURRENCY) {
      await Promise.all(
        acknowledged.slice(i, i + CONCURRENCY).map(async (s) => {
          const response = await fetch(`${server.url}/api/jobs`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': s.key },
            body: s.body,
          });
          assert.equal(response.status, 200);
          const replay = (await response.json()) as { responses: { id: string }[] };
          assert.deepEqual(
            replay.responses.map((r) => r.id),
            s.ids,
          );
        }),
      );
    }
    assert.equal((await browseAll()).length, ids.length, 'the replays created nothing');

    server.child.kill('SIGTERM');
    const stopped = await Promise.race([server.exited.then(() => true), sleep(5000).then(() => false)]);
    if (!stopped) server.child.kill('SIGKILL');
  });
});
