import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { POSTGRES_TESTED } from './support/postgres.ts';
import { until } from './support/until.ts';

// The tests' own PostgreSQL (support/postgres.ts) must not outlive the test process that started
// it, however that process ends: a server left running holds its folder, memory and a port.

/** Whether the process runs (a zombie, ended and not yet reaped, does not). */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/** A test process that starts the server and waits; answers it and the postmaster's pid. */
async function testProcess() {
  const script = `
    const { newPostgresDatabase, postgresPid } = await import(${JSON.stringify(new URL('./support/postgres.ts', import.meta.url).href)});
    await newPostgresDatabase();
    console.log('pid', await postgresPid());
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    out += text;
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const pid = await until(() => Number(/pid (\d+)/.exec(out)?.[1]), {
    describe: 'the test process started PostgreSQL',
    timeout: 90_000,
  });
  return { child, pid, exited };
}

for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
  test(`the tests' PostgreSQL stops when the test process is ended by ${signal}`, {
    skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
  }, async (t) => {
    const { child, pid, exited } = await testProcess();
    t.after(() => {
      if (alive(pid)) process.kill(pid, 'SIGQUIT');
    });
    assert.ok(alive(pid));
    child.kill(signal);
    await exited;
    await until(() => !alive(pid), {
      describe: `PostgreSQL (pid ${pid}) gone after ${signal}`,
      timeout: 30_000,
    });
  });
}
