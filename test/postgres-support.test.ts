import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { test } from 'node:test';
import { POSTGRES_TESTED, postgresBin } from './support/postgres.ts';
import { until } from './support/until.ts';

// The tests' own PostgreSQL (support/postgres.ts) must not outlive the test process that started
// it, however that process ends: a server left running holds its folder, memory and a port; nor
// may its folder (a data directory of ~40 MB) stay behind.

/** Whether the process runs (a zombie, ended and not yet reaped, does not). */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/**
 * A test process that starts the server, then waits (or, given `exits`, ends by itself); answers
 * it, the postmaster's pid and the server's folder.
 */
async function testProcess(exits: boolean) {
  const script = `
    const { newPostgresDatabase, postgresPid, postgresLog } = await import(${JSON.stringify(new URL('./support/postgres.ts', import.meta.url).href)});
    await newPostgresDatabase();
    console.log('pid', await postgresPid(), 'log', await postgresLog());
    ${exits ? 'process.exit(0);' : 'setInterval(() => {}, 1000);'}
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    out += text;
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const started = await until(() => /pid (\d+) log (\S+)/.exec(out) ?? undefined, {
    describe: 'the test process started PostgreSQL',
    timeout: 90_000,
  });
  return { child, pid: Number(started[1]), folder: dirname(started[2]!), exited };
}

for (const end of ['SIGTERM', 'SIGKILL', 'exit'] as const) {
  test(`the tests' PostgreSQL stops and its folder goes when the test process ends by ${end}`, {
    skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
  }, async (t) => {
    const { child, pid, folder, exited } = await testProcess(end === 'exit');
    t.after(() => {
      if (alive(pid)) process.kill(pid, 'SIGQUIT');
    });
    if (end !== 'exit') {
      assert.ok(alive(pid));
      child.kill(end);
    }
    await exited;
    await until(() => !alive(pid) && !existsSync(folder), {
      describe: `PostgreSQL (pid ${pid}) and ${folder} gone after ${end}`,
      timeout: 30_000,
    });
  });
}

test("a template folder planted under the tests' predictable name is refused, not copied and run", {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async (t) => {
  const bin = postgresBin();
  assert.ok(bin, 'PostgreSQL is not installed');
  const planted = mkdtempSync(join(tmpdir(), 'ucompute-planted-'));
  t.after(() => rmSync(planted, { recursive: true, force: true }));
  // What another user of a shared temporary folder could make first: a whole-looking template,
  // open to all, its configuration the server would run.
  const name = join(
    planted,
    `ucompute-postgres-template-${basename(dirname(bin))}-${process.getuid?.() ?? 0}`,
  );
  mkdirSync(join(name, 'global'), { recursive: true, mode: 0o777 });
  writeFileSync(join(name, 'global', 'pg_control'), '');
  writeFileSync(join(name, 'postgresql.conf'), "archive_command = 'touch planted-ran'\n");
  const script = `
    const { newPostgresDatabase } = await import(${JSON.stringify(new URL('./support/postgres.ts', import.meta.url).href)});
    try { await newPostgresDatabase(); console.log('started'); } catch (error) { console.log(String(error.message)); }
    process.exit(0);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TMPDIR: planted },
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    out += text;
  });
  await new Promise((resolve) => child.once('exit', resolve));
  assert.match(out, /is not a PostgreSQL template made by the server's user/);
  assert.ok(out.includes(name), out);
});
