import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { type Leadership, leadership } from '../src/jobs/leadership.ts';
import { systemClock } from '../src/model/clock.ts';
import { FencedError } from '../src/store/leases.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import type { Store, Transactional } from '../src/store/store.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { openTestStore, STORE_KINDS } from './support/store.ts';
import { until } from './support/until.ts';

/** Of the replicas on one store, one leads at a time; when it goes, another takes over. */

const TTL_MS = 400;
const RENEW_MS = 50;

interface Replica {
  name: string;
  leadership: Leadership;
  /** The fenced stores it was handed, newest last, and whether it leads now. */
  fenced: Transactional[];
  leading: boolean;
}

function replica(name: string, store: Store): Replica {
  const r: Replica = { name, fenced: [], leading: false, leadership: undefined as unknown as Leadership };
  r.leadership = leadership({
    store,
    lease: 'backend',
    holder: `${name}-${randomUUID()}`,
    ttlMs: TTL_MS,
    renewMs: RENEW_MS,
    clock: systemClock,
    async lead(fenced) {
      r.fenced.push(fenced);
      r.leading = true;
      return async () => {
        r.leading = false;
      };
    },
  });
  r.leadership.start();
  return r;
}

const leaderOf = (replicas: Replica[]) => {
  const leading = replicas.filter((r) => r.leading);
  return leading.length === 1 && leading[0];
};

for (const kind of STORE_KINDS) {
  describe(`leadership on ${kind}`, () => {
    const closers: (() => Promise<void>)[] = [];
    after(async () => {
      for (const close of closers.reverse()) await close();
    });

    test('one replica leads; when it stops, the other leads with a new epoch and the first is fenced', async () => {
      const store = await openTestStore(kind);
      closers.push(() => store.close());
      const replicas = [replica('a', store), replica('b', store)];
      closers.push(async () => {
        for (const r of replicas) await r.leadership.stop();
      });
      const first = await until(() => leaderOf(replicas), { describe: 'one replica leads' });
      const firstEpoch = first.leadership.epoch!;
      await first.fenced.at(-1)!.users.createUser('by-first', false);
      await first.leadership.stop();
      const second = await until(() => leaderOf(replicas), { describe: 'the other leads', timeout: 30_000 });
      assert.notEqual(second, first);
      assert.equal(second.leadership.epoch, firstEpoch + 1);
      await assert.rejects(first.fenced.at(-1)!.users.createUser('by-first-later', false), FencedError);
      await second.fenced.at(-1)!.users.createUser('by-second', false);
      assert.equal(await store.users.getUser('by-first-later'), undefined);
      assert.ok(await store.users.getUser('by-second'));
    });
  });
}

test('postgres: a leader that cannot reach the database steps down, and another replica takes over', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async () => {
  const url = await newPostgresDatabase();
  const stores = [await openPostgresStore(url), await openPostgresStore(url)];
  const replicas = stores.map((store, i) => replica(`r${i}`, store));
  try {
    const first = await until(() => leaderOf(replicas), { describe: 'one replica leads' });
    const epoch = first.leadership.epoch!;
    // Its database goes away (its connections end): it cannot renew, and the lease runs out.
    await stores[replicas.indexOf(first)]!.close();
    const second = await until(() => replicas.find((r) => r !== first && r.leading), {
      describe: 'another replica leads',
      timeout: 30_000,
    });
    assert.equal(second.leadership.epoch, epoch + 1);
    await until(() => !first.leading, { describe: 'the first steps down', timeout: 30_000 });
  } finally {
    for (const r of replicas) await r.leadership.stop().catch(() => {});
    for (const store of stores) await store.close().catch(() => {});
  }
});
