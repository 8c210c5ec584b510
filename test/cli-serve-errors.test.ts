import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { assertExit, CHILD_ENV, type CliResult, runCli } from './support/cli.ts';
import { needs } from './support/local-tools.ts';

/**
 * `ucompute serve` failing to start: the message alone (no stack trace) and a non-zero exit, and
 * the process ends instead of waiting on what it had opened.
 */

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-serve-errors-'));

// What the local backend's test needs (a skip outside CI when missing), at import as before.
const localTools = await needs();

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('ucompute serve refusing what it cannot do', () => {
  after(() => rmSync(tmp, { recursive: true, force: true }));

  const serve = (args: string[]) =>
    runCli(['serve', '--port', '0', ...args], { env: { ...CHILD_ENV, UCOMPUTE_LOG_LEVEL: 'error' } });

  function assertMessageOnly(result: CliResult, code: number, message: RegExp): void {
    assertExit(result, code);
    assert.match(result.stderr, message);
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
  }

  test('a port in use: the address and what to do, exit 1', { timeout: 300_000 }, async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => taken.once('listening', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      const result = await runCli(
        ['serve', '--backend', 'dry', '--port', String(port), '--data-dir', join(tmp, 'port')],
        {
          env: CHILD_ENV,
        },
      );
      assertMessageOnly(result, 1, new RegExp(`^error: 127\\.0\\.0\\.1:${port} is in use.*--port`));
    } finally {
      taken.close();
    }
  });

  test('a data folder that is a file: the system’s message, exit 1', { timeout: 300_000 }, async () => {
    const file = join(tmp, 'a-file');
    writeFileSync(file, '');
    const result = await serve(['--backend', 'dry', '--data-dir', file]);
    assertMessageOnly(result, 1, /^error: ucompute cannot start: EEXIST: .*a-file/);
  });

  test('a bad configuration names the field, exit 2', { timeout: 300_000 }, async () => {
    const config = join(tmp, 'bad.yml');
    writeFileSync(config, 'backend: locall\n');
    const result = await serve(['--config', config, '--data-dir', join(tmp, 'config')]);
    assertMessageOnly(result, 2, /^error: .*bad\.yml: backend: must be one of/);
  });

  test('a public URL that is not an origin names the field or the flag, exit 2', {
    timeout: 300_000,
  }, async () => {
    const config = join(tmp, 'public-url.yml');
    writeFileSync(config, 'server: { publicUrl: "https://compute.example.org/ucompute" }\n');
    const inFile = await serve(['--config', config, '--data-dir', join(tmp, 'public-url')]);
    assertMessageOnly(inFile, 2, /^error: .*public-url\.yml: server\.publicUrl: /);
    const flag = await serve([
      '--backend',
      'dry',
      '--public-url',
      'compute.example.org',
      '--data-dir',
      join(tmp, 'public-url'),
    ]);
    assertMessageOnly(
      flag,
      2,
      /^error: --public-url must be an origin, http\(s\):\/\/host\[:port\] without a path/,
    );
  });

  test('a data folder the sandbox cannot pass: the folder and the fix, and the process ends', {
    ...localTools,
    timeout: 300_000,
  }, async () => {
    const closed = join(tmp, 'closed');
    mkdirSync(closed, { mode: 0o700 });
    const result = await serve(['--backend', 'local', '--data-dir', join(closed, 'data')]);
    assertMessageOnly(
      result,
      1,
      /^error: the local backend cannot start: .*closed \(mode 700\) does not let others pass.*chmod o\+x/,
    );
  });

  test('a charge period that would price a product in fractions of a credit names the product, exit 2', {
    timeout: 300_000,
  }, async () => {
    const config = join(tmp, 'charge-period.yml');
    // The examples' u1-standard-1 costs 1 credit per vCPU-minute: 1/60 per second.
    writeFileSync(config, 'backend: dry\naccounting: { chargePeriodMs: 1000 }\n');
    const result = await serve(['--config', config, '--data-dir', join(tmp, 'charge-period')]);
    assertMessageOnly(
      result,
      2,
      /^error: accounting\.chargePeriodMs: 1000 ms would price product u1-standard-1 \(1 CREDITS_PER_MINUTE\) at 0\.01666\d* credits per unit and period; choose a period .*\(e\.g\. 60000, its own period\)/,
    );
    writeFileSync(config, 'backend: dry\naccounting: { chargePeriodMs: 999 }\n');
    const tooShort = await serve(['--config', config, '--data-dir', join(tmp, 'charge-period')]);
    assertMessageOnly(tooShort, 2, /^error: .*charge-period\.yml: accounting\.chargePeriodMs: /);
  });
});
