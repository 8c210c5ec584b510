import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseDate } from '../src/cli/dates.ts';
import { buysInHours } from '../src/cli/usage.ts';
import type { Product } from '../src/model/product.ts';
import { assertExit, CHILD_ENV, runCliHere } from './support/cli.ts';
import { putFile, type Served, servedJobInState, startServe, stopServe } from './support/serve.ts';

/**
 * `ucompute admin`, `balance` and `usage` (the CLI's main() in this process) against a real
 * `ucompute serve` (a child; dry backend, jobs held until cancelled).
 */

const TIMEOUT = { timeout: 600_000 };
const { UCOMPUTE_URL: _url, UCOMPUTE_TOKEN: _token, UCOMPUTE_DATA_DIR: _dataDir, ...childEnv } = CHILD_ENV;

const tmp = mkdtempSync(join(tmpdir(), 'ucompute-admin-'));
let server: Served | undefined;

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('ucompute admin, balance and usage against a server', () => {
  before(async () => {
    server = await startServe(mkdtempSync(join(tmp, 'data-')), {
      env: childEnv,
      config: 'dry:\n  runForMs: null\n',
    });
    putFile(server, '/home/local/a.txt');
  });

  after(async () => {
    await stopServe(server);
    rmSync(tmp, { recursive: true, force: true });
  });

  /** As the administrator (the token `serve` wrote), or as the holder of `token`. */
  const cli = (args: string[], token?: string) =>
    runCliHere(
      [...args, '--url', server!.url, ...(token ? ['--token', token] : ['--data-dir', server!.dataDir])],
      {
        env: childEnv,
      },
    );

  describe('dates and what credits buy', () => {
    test('dates are UTC days or times, now, or an age; impossible dates are refused naming the flag', () => {
      const now = Date.UTC(2026, 10, 23, 12);
      assert.equal(parseDate('2026-11-01', '--since', now), Date.UTC(2026, 10, 1));
      assert.equal(parseDate('2026-11-01T14:30', '--since', now), Date.UTC(2026, 10, 1, 14, 30));
      assert.equal(parseDate('2026-11-01 14:30:05Z', '--since', now), Date.UTC(2026, 10, 1, 14, 30, 5));
      assert.equal(parseDate('now', '--until', now), now);
      assert.equal(parseDate('7d', '--since', now), now - 7 * 86_400_000);
      assert.equal(parseDate('90m', '--since', now), now - 90 * 60_000);
      for (const bad of ['2026-02-30', '2026-13-01', '2026-11-01T24:00', 'yesterday', '1700000000000', '']) {
        assert.throws(() => parseDate(bad, '--since', now), { message: /^--since: ".*" is not a date/ }, bad);
      }
    });

    test('credits left read as unit-hours on the cheapest product of the category', () => {
      const product = (p: Partial<Product>) =>
        ({ id: 'x', category: 'c', cpu: 1, memoryInGigs: 1, pricePerUnit: 1, ...p }) as Product;
      const perMinute = product({ id: 'a', pricePerUnit: 2 });
      const cheaper = product({ id: 'b', pricePerUnit: 1 });
      assert.equal(buysInHours(6000, [perMinute, cheaper], 'c'), '100 vCPU-hours');
      const gpu = product({
        category: 'g',
        pricePerUnit: 60,
        unitOfPrice: 'CREDITS_PER_HOUR',
        pricedPer: 'GPU',
      });
      assert.equal(buysInHours(1200, [gpu], 'g'), '20 GPU-hours');
      assert.equal(buysInHours(0, [gpu], 'g'), '-');
      assert.equal(buysInHours(100, [gpu], 'other'), '-');
    });
  });

  describe('admin, balance and usage', TIMEOUT, () => {
    test('an administrator makes a user, a project, a membership, a grant and a token; the user sees the balance', async () => {
      assertExit(await cli(['admin', 'user', 'alice']), 0);
      const project = await cli(['admin', 'project', 'physics', '--title', 'Physics lab']);
      assertExit(project, 0);
      assert.equal(project.stdout, 'project physics created ("Physics lab")\n');
      const member = await cli(['admin', 'member', 'physics', 'alice', '--role', 'pi']);
      assertExit(member, 0);
      assert.equal(member.stdout, 'alice is PI in project physics\n');
      const grant = await cli([
        'admin',
        'grant',
        '--project',
        'physics',
        '--category',
        'u1-standard',
        '--credits',
        '6_000',
        '--end',
        '2099-01-01',
      ]);
      assertExit(grant, 0);
      assert.match(
        grant.stdout,
        /^granted 6,000 credits in u1-standard to project:physics, valid \d{4}-\d\d-\d\d \d\d:\d\d to 2099-01-01 00:00 UTC\n$/,
      );
      const token = await cli(['admin', 'token', 'alice', '--description', 'tests']);
      assertExit(token, 0);
      const aliceToken = token.stdout.trim();
      assert.match(aliceToken, /^\S+$/, 'only the token, for $(ucompute admin token alice)');

      const balance = await cli(['balance'], aliceToken);
      assertExit(balance, 0);
      assert.match(balance.stdout, /^WALLET\s+CATEGORY\s+LEFT\s+USED\s+ALLOCATED\s+LEFT BUYS$/m);
      // u1-standard costs 1 credit per vCPU-minute: 6,000 credits are 100 vCPU-hours.
      assert.match(balance.stdout, /^project physics\s+u1-standard\s+6,000\s+0\s+6,000\s+100 vCPU-hours$/m);

      const json = await cli(['balance', '--json'], aliceToken);
      assertExit(json, 0);
      const wallets = (JSON.parse(json.stdout) as { items: { owner: string; balance: number }[] }).items;
      assert.deepEqual(
        wallets.map((w) => [w.owner, w.balance]),
        [['project:physics', 6000]],
      );
    });

    test('a user who is not an administrator is refused, and nothing is made', async () => {
      assertExit(await cli(['admin', 'user', 'bob']), 0);
      const bobToken = (await cli(['admin', 'token', 'bob'])).stdout.trim();
      const refused = await cli(['admin', 'user', 'mallory'], bobToken);
      assertExit(refused, 1);
      assert.equal(refused.stderr, 'error: this call is for administrators only\n');
      const again = await cli(['admin', 'user', 'mallory']);
      assertExit(again, 0); // mallory did not exist: the refused call made nothing
    });

    test('an administrator lists and searches, revokes a token (it gets 401 then), disables a user, removes a member; the audit log has it all', async () => {
      assertExit(await cli(['admin', 'user', 'dora']), 0);
      assertExit(await cli(['admin', 'member', 'physics', 'dora']), 0);
      const doraToken = (await cli(['admin', 'token', 'dora', '--description', 'dora laptop'])).stdout.trim();
      assertExit(await cli(['balance'], doraToken), 0);

      const users = await cli(['admin', 'users', 'dor']);
      assertExit(users, 0);
      assert.match(users.stdout, /^NAME\s+ADMIN\s+DISABLED\s+TOKENS\s+CREATED\s+PROJECTS$/m);
      assert.match(users.stdout, /^dora\s+-\s+1\s+\S+ \S+\s+physics \(USER\)$/m);
      assert.match(
        (await cli(['admin', 'projects', 'phys'])).stdout,
        /^physics\s+Physics lab\s+\S+ \S+\s+alice \(PI\), dora \(USER\)$/m,
      );
      assert.match(
        (await cli(['admin', 'grants', 'physics'])).stdout,
        /^\d+\s+project:physics\s+u1-standard\s+6,000\s+0\s/m,
      );
      const tokens = await cli(['admin', 'tokens', 'dora laptop']);
      assertExit(tokens, 0);
      const id = /^([0-9a-f]{16})\s+dora\s/m.exec(tokens.stdout)?.[1];
      assert.ok(id, tokens.stdout);
      assert.ok(!tokens.stdout.includes(doraToken), 'a token is never shown');

      assert.equal((await cli(['admin', 'revoke', id!])).stdout, `token ${id} revoked\n`);
      const refused = await cli(['balance'], doraToken);
      assertExit(refused, 1);
      assert.match(refused.stderr, /the token was refused/);
      const second = (await cli(['admin', 'token', 'dora'])).stdout.trim();
      assertExit(await cli(['admin', 'disable', 'dora']), 0);
      assertExit(await cli(['balance'], second), 1);
      assertExit(await cli(['admin', 'enable', 'dora']), 0);
      assertExit(await cli(['balance'], second), 0);
      assert.equal(
        (await cli(['admin', 'remove-member', 'physics', 'dora'])).stdout,
        'dora is no longer a member of project physics\n',
      );

      const audit = await cli(['admin', 'audit', '--limit', '6']);
      assertExit(audit, 0);
      const actions = audit.stdout
        .trim()
        .split('\n')
        .slice(1)
        .map((line) =>
          line
            .split(/\s{2,}/)
            .slice(1, 4)
            .join(' '),
        );
      assert.deepEqual(actions, [
        'local member.remove project:physics',
        'local user.enable user:dora',
        'local user.disable user:dora',
        'local token.create user:dora',
        `local token.revoke token:${id}`,
        'local token.create user:dora',
      ]);
      const revocations = await cli(['admin', 'audit', '--action', 'token.revoke', '--json']);
      assert.deepEqual(
        (JSON.parse(revocations.stdout) as { items: { details: unknown }[] }).items.map((e) => e.details),
        [{ username: 'dora', description: 'dora laptop' }],
      );
    });

    const mistakes: [string, string[], RegExp][] = [
      [
        'grant without an owner',
        ['admin', 'grant', '--category', 'u1-standard', '--credits', '5'],
        /--user NAME or --project ID/,
      ],
      [
        'grant to both',
        ['admin', 'grant', '--user', 'a', '--project', 'b', '--category', 'c', '--credits', '5'],
        /either --user/,
      ],
      [
        'grant without a category',
        ['admin', 'grant', '--user', 'alice', '--credits', '5'],
        /--category is missing/,
      ],
      [
        'grant of no number',
        ['admin', 'grant', '--user', 'alice', '--category', 'u1-standard', '--credits', 'lots'],
        /--credits: "lots"/,
      ],
      [
        'grant with a bad date',
        ['admin', 'grant', '--user', 'alice', '--category', 'u1-standard', '--credits', '5', '--end', 'soon'],
        /--end: "soon" is not a date/,
      ],
      [
        'an unknown category (the service says)',
        ['admin', 'grant', '--user', 'alice', '--category', 'u9', '--credits', '5'],
        /^error: category: names no product category/,
      ],
      [
        'a bad role',
        ['admin', 'member', 'physics', 'alice', '--role', 'boss'],
        /--role: "boss" is not one of PI, ADMIN, USER/,
      ],
      ['a member without a user', ['admin', 'member', 'physics'], /expected a PROJECT and a USER/],
      ['an unknown admin command', ['admin', 'delete', 'alice'], /unknown admin command "delete"/],
      ['a bad user name (the service says)', ['admin', 'user', 'Not A Name'], /^error: name: /],
      ['usage --by week', ['usage', '--by', 'week'], /--by: "week" must be day or hour/],
      ['usage with a bad date', ['usage', '--since', '2026-02-30'], /--since: "2026-02-30" is not a date/],
      [
        'usage since after until',
        ['usage', '--since', '2026-11-02', '--until', '2026-11-01'],
        /--since: 2026-11-02 must be before 2026-11-01/,
      ],
    ];
    for (const [name, args, message] of mistakes) {
      test(`${name}: exit 2 naming the field`, async () => {
        const result = await cli(args);
        assertExit(result, 2);
        assert.match(result.stderr, message);
      });
    }

    test('usage: credits per UTC day or hour between dates, with totals', async () => {
      const id = (await cli(['run', 'word-count', '--param', 'input=/home/local/a.txt'])).stdout.trim();
      // A job that ran pays for its started minute: cancel it once it runs.
      await servedJobInState(server!, id, 'RUNNING');
      assertExit(await cli(['cancel', id]), 0);
      const byDay = await cli(['usage', '--since', '1d']);
      assertExit(byDay, 0);
      const today = new Date().toISOString().slice(0, 10);
      assert.match(
        byDay.stdout,
        /^credits charged from \d{4}-\d\d-\d\d \d\d:\d\d to \d{4}-\d\d-\d\d \d\d:\d\d UTC$/m,
      );
      assert.match(byDay.stdout, new RegExp(`^${today}\\s+local\\s+u1-standard\\s+\\d+$`, 'm'));
      assert.match(byDay.stdout, /^total\s+local\s+u1-standard\s+\d+$/m);
      const byHour = await cli(['usage', '--since', '2h', '--by', 'hour', '--json']);
      assertExit(byHour, 0);
      const response = JSON.parse(byHour.stdout) as { bucket: string; items: { start: number }[] };
      assert.equal(response.bucket, 'hour');
      assert.ok(response.items.length > 0 && response.items.every((i) => i.start % 3_600_000 === 0));
      const before = await cli(['usage', '--since', '2020-01-01', '--until', '2020-01-02']);
      assertExit(before, 0);
      assert.equal(before.stdout, 'no credits charged from 2020-01-01 00:00 to 2020-01-02 00:00 UTC\n');
    });
  });
});
