import assert from 'node:assert/strict';
import { test } from 'node:test';
import { usageBuckets } from '../src/accounting/usage.ts';
import { jobAccess } from '../src/jobs/access.ts';
import { adminOperations } from '../src/jobs/admin.ts';
import { ServiceError } from '../src/jobs/errors.ts';
import { ValidationError } from '../src/model/errors.ts';
import { env } from './support/fixtures.ts';
import { openTestStore } from './support/store.ts';

/** Operators' work and usage sums, in the domain: no HTTP in between. */

const T0 = Date.UTC(2026, 10, 1);
const HOUR = 3_600_000;

const status = (e: unknown) => (e instanceof ServiceError ? e.status : undefined);
const root = { username: 'root', admin: true };

test('users, projects, members, tokens and grants: refusals name what is wrong and change nothing', async () => {
  const store = await openTestStore();
  const admin = adminOperations(store, env(), () => T0);
  assert.deepEqual(await admin.createUser(root, 'alice'), { name: 'alice', admin: false });
  await assert.rejects(
    () => admin.createUser(root, 'alice'),
    (e) => status(e) === 409,
  );
  assert.deepEqual(await admin.createProject(root, 'climate', 'Climate'), {
    id: 'climate',
    title: 'Climate',
  });
  await assert.rejects(
    () => admin.createProject(root, 'climate', 'Again'),
    (e) => status(e) === 409,
  );
  await assert.rejects(
    () => admin.setMember(root, 'nowhere', 'alice', 'PI'),
    /project nowhere was not found/,
  );
  await assert.rejects(() => admin.setMember(root, 'climate', 'nobody', 'PI'), /user nobody was not found/);
  await admin.setMember(root, 'climate', 'alice', 'PI');
  assert.deepEqual(await store.users.memberships('alice'), [{ projectId: 'climate', role: 'PI' }]);
  await assert.rejects(
    () => admin.createToken(root, 'nobody', 'x'),
    (e) => status(e) === 404,
  );
  assert.equal(
    (await store.users.userForToken((await admin.createToken(root, 'alice', 'laptop')).token))?.name,
    'alice',
  );

  await assert.rejects(
    () => admin.grant(root, { owner: 'user:alice', category: 'no-such', credits: 5 }),
    (e) => e instanceof ValidationError && e.issues[0]?.path === 'category',
  );
  await assert.rejects(
    () => admin.grant(root, { owner: 'user:alice', category: 'u1-standard', credits: 5, start: T0, end: T0 }),
    (e) => e instanceof ValidationError && e.issues[0]?.path === 'end',
  );
  await assert.rejects(
    () => admin.grant(root, { owner: 'project:nowhere', category: 'u1-standard', credits: 5 }),
    /project nowhere/,
  );
  assert.deepEqual(await store.accounting.allocations('user:alice'), []);
  const granted = await admin.grant(root, { owner: 'user:alice', category: 'u1-standard', credits: 5 });
  assert.equal(granted.start, T0);
  assert.equal(granted.end, T0 + 365 * 24 * HOUR);
  assert.equal((await store.accounting.allocations('user:alice')).length, 1);
});

test('administrators list and search users, projects, tokens and grants; revoke, disable, remove; all audited', async () => {
  const store = await openTestStore();
  let clock = T0;
  const admin = adminOperations(store, env(), () => clock++);
  await store.users.createUser('root', true);
  for (const name of ['alice', 'bob', 'carol']) await admin.createUser(root, name);
  await admin.createProject(root, 'climate', 'Climate research');
  await admin.setMember(root, 'climate', 'alice', 'PI');
  await admin.setMember(root, 'climate', 'bob', 'USER');
  const { token } = await admin.createToken(root, 'bob', 'laptop');
  await admin.grant(root, { owner: 'project:climate', category: 'u1-standard', credits: 100 });

  assert.deepEqual(
    (await admin.users({ query: 'O' })).items.map((u) => [
      u.name,
      u.tokens,
      u.projects.map((p) => `${p.id}:${p.role}`),
    ]),
    [
      ['bob', 1, ['climate:USER']],
      ['carol', 0, []],
      ['root', 0, []],
    ],
  );
  const first = await admin.users({ itemsPerPage: 2 });
  assert.deepEqual([first.items.map((u) => u.name), first.next], [['alice', 'bob'], 'bob']);
  assert.deepEqual(
    (await admin.users({ itemsPerPage: 2, next: first.next! })).items.map((u) => u.name),
    ['carol', 'root'],
  );
  const [climate] = (await admin.projects({ query: 'research' })).items;
  assert.deepEqual(climate?.members, [
    { username: 'alice', role: 'PI' },
    { username: 'bob', role: 'USER' },
  ]);
  const [listed] = (await admin.tokens({ query: 'laptop' })).items;
  assert.equal(listed?.username, 'bob');
  assert.equal(listed?.id.length, 16);
  assert.ok(!JSON.stringify(await admin.tokens({})).includes(token), 'a token is never listed');
  assert.deepEqual(
    (await admin.grants({ query: 'climate' })).items.map((g) => [g.owner, g.credits]),
    [['project:climate', 100]],
  );

  // The revoked token opens nothing; a disabled user's tokens neither, until enabled again.
  await admin.revokeToken(root, listed!.id);
  assert.equal(await store.users.userForToken(token), undefined);
  await assert.rejects(
    () => admin.revokeToken(root, listed!.id),
    (e) => status(e) === 404,
  );
  const again = (await admin.createToken(root, 'carol', 'cli')).token;
  await admin.setDisabled(root, 'carol', true);
  assert.equal(await store.users.userForToken(again), undefined);
  assert.notEqual((await admin.users({ query: 'carol' })).items[0]?.disabledAt, null);
  await admin.setDisabled(root, 'carol', false);
  assert.equal((await store.users.userForToken(again))?.name, 'carol');
  await assert.rejects(
    () => admin.setDisabled(root, 'root', true),
    (e) => status(e) === 409,
  );
  await admin.removeMember(root, 'climate', 'bob');
  assert.deepEqual(await store.users.memberships('bob'), []);
  await assert.rejects(
    () => admin.removeMember(root, 'climate', 'bob'),
    (e) => status(e) === 404,
  );

  const log = await admin.audit({});
  assert.deepEqual(
    log.items.map((e) => `${e.actor} ${e.action} ${e.target}`),
    [
      'root member.remove project:climate',
      'root user.enable user:carol',
      'root user.disable user:carol',
      'root token.create user:carol',
      'root token.revoke token:' + listed!.id,
      'root grant.create project:climate',
      'root token.create user:bob',
      'root member.set project:climate',
      'root member.set project:climate',
      'root project.create project:climate',
      'root user.create user:carol',
      'root user.create user:bob',
      'root user.create user:alice',
    ],
  );
  assert.ok(
    !JSON.stringify(log).includes(token) && !JSON.stringify(log).includes(again),
    'no secret is logged',
  );
  assert.deepEqual(log.items[0]?.details, { username: 'bob' });
  assert.deepEqual(
    (await admin.audit({ action: 'token', itemsPerPage: 2 })).items.map((e) => e.action),
    ['token.create', 'token.revoke'],
  );
  // A refused change leaves no entry.
  await assert.rejects(() => admin.createUser(root, 'alice'));
  assert.equal((await admin.audit({})).items.length, log.items.length);
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
  await assert.rejects(
    () => access.usage(alice, { from: T0, to: T0 }, T0),
    (e) => e instanceof ValidationError && e.issues[0]?.path === 'from',
  );
  const usage = await access.usage(alice, {}, T0);
  assert.deepEqual(usage, { from: T0 - 30 * 24 * HOUR, to: T0, bucket: 'day', items: [] });
});
