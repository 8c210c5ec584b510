import assert from 'node:assert/strict';
import { test } from 'node:test';
import { usageBuckets } from '../src/accounting/usage.ts';
import { jobAccess } from '../src/jobs/access.ts';
import { adminOperations } from '../src/jobs/admin.ts';
import { ServiceError } from '../src/jobs/errors.ts';
import { ValidationError } from '../src/model/errors.ts';
import { openStore } from '../src/store/store.ts';
import { env } from './support/fixtures.ts';
import { openTestStore } from './support/store.ts';

/** Operators' work and usage sums, in the domain: no HTTP in between. */

const T0 = Date.UTC(2026, 10, 1);
const HOUR = 3_600_000;

const status = (e: unknown) => (e instanceof ServiceError ? e.status : undefined);

test('users, projects, members, tokens and grants: refusals name what is wrong and change nothing', async () => {
  const store = await openTestStore();
  const admin = adminOperations(store, env(), () => T0);
  assert.deepEqual(admin.createUser('alice'), { name: 'alice', admin: false });
  assert.throws(
    () => admin.createUser('alice'),
    (e) => status(e) === 409,
  );
  assert.deepEqual(admin.createProject('climate', 'Climate'), { id: 'climate', title: 'Climate' });
  assert.throws(
    () => admin.createProject('climate', 'Again'),
    (e) => status(e) === 409,
  );
  assert.throws(() => admin.setMember('nowhere', 'alice', 'PI'), /project nowhere was not found/);
  assert.throws(() => admin.setMember('climate', 'nobody', 'PI'), /user nobody was not found/);
  admin.setMember('climate', 'alice', 'PI');
  assert.deepEqual(await store.users.memberships('alice'), [{ projectId: 'climate', role: 'PI' }]);
  assert.throws(
    () => admin.createToken('nobody', 'x'),
    (e) => status(e) === 404,
  );
  assert.equal(
    (await store.users.userForToken((await admin.createToken('alice', 'laptop')).token))?.name,
    'alice',
  );

  assert.throws(
    () => admin.grant({ owner: 'user:alice', category: 'no-such', credits: 5 }),
    (e) => e instanceof ValidationError && e.issues[0]?.path === 'category',
  );
  assert.throws(
    () => admin.grant({ owner: 'user:alice', category: 'u1-standard', credits: 5, start: T0, end: T0 }),
    (e) => e instanceof ValidationError && e.issues[0]?.path === 'end',
  );
  assert.throws(
    () => admin.grant({ owner: 'project:nowhere', category: 'u1-standard', credits: 5 }),
    /project nowhere/,
  );
  assert.deepEqual(await store.accounting.allocations('user:alice'), []);
  const granted = admin.grant({ owner: 'user:alice', category: 'u1-standard', credits: 5 });
  assert.equal((await granted).start, T0);
  assert.equal((await granted).end, T0 + 365 * 24 * HOUR);
  assert.equal((await store.accounting.allocations('user:alice')).length, 1);
});

test('usage sums charges per owner, category and UTC bucket', () => {
  const charges = [
    { category: 'u1-standard', chargedAt: T0 + 10, credits: 2 },
    { category: 'u1-standard', chargedAt: T0 + HOUR - 1, credits: 3 },
    { category: 'u1-standard', chargedAt: T0 + HOUR, credits: 4 },
    { category: 'u1-gpu', chargedAt: T0 + 5, credits: 7 },
  ];
  assert.deepEqual(usageBuckets([['user:alice', charges]], 'hour'), [
    { owner: 'user:alice', category: 'u1-gpu', start: T0, credits: 7 },
    { owner: 'user:alice', category: 'u1-standard', start: T0, credits: 5 },
    { owner: 'user:alice', category: 'u1-standard', start: T0 + HOUR, credits: 4 },
  ]);
  assert.deepEqual(
    usageBuckets(
      [
        ['user:alice', charges],
        ['project:climate', [charges[0]!]],
      ],
      'day',
    ).map((u) => [u.owner, u.category, u.credits]),
    [
      ['project:climate', 'u1-standard', 2],
      ['user:alice', 'u1-gpu', 7],
      ['user:alice', 'u1-standard', 9],
    ],
  );
});

test('usage covers the caller’s accounts and refuses from after to, naming the field', async () => {
  const store = await openTestStore();
  await store.users.createUser('alice', false);
  const access = jobAccess(store);
  const alice = { username: 'alice', admin: false };
  assert.throws(
    () => access.usage(alice, { from: T0, to: T0 }, T0),
    (e) => e instanceof ValidationError && e.issues[0]?.path === 'from',
  );
  const usage = access.usage(alice, {}, T0);
  assert.deepEqual(usage, { from: T0 - 30 * 24 * HOUR, to: T0, bucket: 'day', items: [] });
});
