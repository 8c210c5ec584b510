import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  CHUNK_SIZE,
  type Claim,
  chooseNames,
  collisions,
  FIRST_DERIVED_ID,
  type HostNames,
  type Taken,
} from '../src/backends/local/host-names.ts';
import { claimHostNames } from '../src/backends/local/host-registry.ts';
import { freeRange } from '../src/backends/local/userns.ts';

/** Two instances on one host: the names each holds, and who refuses whom. */

const nothing: Taken = { claims: [], links: new Set(), routes: [] };
const claimOf = (names: HostNames, dataDir: string): Claim => ({
  ...names,
  dataDir,
  stateDir: `${dataDir}/local/runtime`,
});

test('two data folders derive different bridges, subnets, cgroup folders and host ids', () => {
  const a = chooseNames('/srv/a/local/runtime', {}, null, nothing);
  const b = chooseNames('/srv/b/local/runtime', {}, null, { ...nothing, claims: [claimOf(a, '/srv/a')] });
  assert.match(a.bridge, /^uc[a-z0-9]{7}$/);
  assert.match(a.subnet, /^10\.\d+\.\d+\.0\/20$/);
  assert.equal(a.cgroupParent, `ucompute-${a.bridge}`);
  assert.deepEqual(a.hostIds, [[FIRST_DERIVED_ID, CHUNK_SIZE]]);
  assert.notEqual(a.bridge, b.bridge);
  assert.notEqual(a.cgroupParent, b.cgroupParent);
  assert.deepEqual(b.hostIds, [[FIRST_DERIVED_ID + CHUNK_SIZE, CHUNK_SIZE]]);
  assert.deepEqual(collisions(b, claimOf(a, '/srv/a')), []);
  // The same folder derives the same names again.
  assert.deepEqual(chooseNames('/srv/a/local/runtime', {}, null, nothing), a);
});

test('a derived subnet steps past host routes and other instances; a derived bridge past existing links', () => {
  const first = chooseNames('/srv/a/local/runtime', {}, null, nothing);
  const moved = chooseNames('/srv/a/local/runtime', {}, null, {
    claims: [],
    links: new Set([first.bridge]),
    routes: [first.subnet.replace('/20', '/16')],
  });
  assert.notEqual(moved.bridge, first.bridge);
  assert.ok(!moved.subnet.startsWith(first.subnet.split('.').slice(0, 2).join('.') + '.'), moved.subnet);
});

test('configured and saved names win over derived ones, and a collision names the other data folder', () => {
  const saved: HostNames = {
    bridge: 'ucsaved',
    subnet: '10.70.0.0/20',
    cgroupParent: 'mine',
    hostIds: [[5_000_000, CHUNK_SIZE]],
  };
  assert.deepEqual(chooseNames('/x', {}, saved, nothing), saved);
  const configured = chooseNames(
    '/x',
    { bridge: 'ubtest', subnet: '10.150.3.0/24', firstHostId: 2_000_000 },
    saved,
    nothing,
  );
  assert.equal(configured.bridge, 'ubtest');
  assert.equal(configured.subnet, '10.150.3.0/24');
  assert.deepEqual(configured.hostIds, [[2_000_000, CHUNK_SIZE]]);

  const other = claimOf(
    { bridge: 'ubtest', subnet: '10.150.0.0/16', cgroupParent: 'mine', hostIds: [[2_100_000, 65536]] },
    '/home/bob/ucompute',
  );
  const found = collisions(configured, other);
  assert.equal(found.length, 4, found.join('\n'));
  for (const sentence of found)
    assert.match(sentence, /the ucompute instance whose data folder is \/home\/bob\/ucompute/);
  assert.deepEqual(
    collisions(
      {
        ...configured,
        bridge: 'other',
        subnet: '10.151.0.0/24',
        cgroupParent: 'x',
        hostIds: [[9_000_000, 65536]],
      },
      other,
    ),
    [],
  );
});

test('owners take ranges inside the chunks the instance holds', () => {
  const chunks: [number, number][] = [
    [1_000_000, 2 * 65536],
    [9_000_000, 65536],
  ];
  assert.equal(freeRange(chunks, new Set()), 1_000_000);
  assert.equal(freeRange(chunks, new Set([1_000_000])), 1_065_536);
  assert.equal(freeRange(chunks, new Set([1_000_000, 1_065_536])), 9_000_000);
  assert.equal(freeRange(chunks, new Set([1_000_000, 1_065_536, 9_000_000])), null);
});

test('the registry: a second instance on the subnet of the first is refused naming its folder; a gone folder frees its names', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-registry-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const registry = join(dir, 'registry');
  const a = join(dir, 'a', 'local', 'runtime');
  const b = join(dir, 'b', 'local', 'runtime');
  const first = await claimHostNames({ stateDir: a, dataDir: join(dir, 'a'), configured: {}, registry });
  assert.deepEqual(JSON.parse(await readFile(join(a, 'host-names.json'), 'utf8')), first.names);
  await assert.rejects(
    claimHostNames({
      stateDir: b,
      dataDir: join(dir, 'b'),
      configured: { subnet: first.names.subnet },
      registry,
    }),
    (error: Error) => {
      assert.match(error.message, new RegExp(`whose data folder is ${join(dir, 'a')}`));
      assert.match(error.message, /local\.network\.subnet/);
      return true;
    },
  );
  const second = await claimHostNames({ stateDir: b, dataDir: join(dir, 'b'), configured: {}, registry });
  assert.deepEqual(collisions(second.names, { ...first.names, dataDir: 'a', stateDir: a }), []);
  // More ids for the second: a chunk nobody holds.
  const more = await second.moreHostIds();
  assert.equal(more.length, 2);
  assert.deepEqual(
    collisions({ ...second.names, hostIds: [more[1]!] }, { ...first.names, dataDir: 'a', stateDir: a }),
    [],
  );
  // The first restarts on its saved names.
  assert.deepEqual((await claimHostNames({ stateDir: a, configured: {}, registry })).names, first.names);
  // Its folder removed, its claim is forgotten and its names are free again.
  await rm(join(dir, 'a'), { recursive: true });
  await claimHostNames({
    stateDir: b,
    dataDir: join(dir, 'b'),
    configured: { subnet: first.names.subnet },
    registry,
  });
  assert.equal((await readdir(registry)).length, 1);
});

test("a data folder with pods from before instances owned names keeps the old names and its owners' ids", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ucompute-registry-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const stateDir = join(dir, 'local', 'runtime');
  await mkdir(join(stateDir, 'userns'), { recursive: true });
  await writeFile(
    join(stateDir, 'userns', 'ranges.json'),
    JSON.stringify({ alice: 1_000_000, bob: 1_000_000 + 70 * 65536 }),
  );
  // A host without routes or links: another instance's bridge in 10.89.0.0/16 (a suite running
  // beside this one) would refuse the legacy subnet, rightly, and this test is about the names kept.
  const { names } = await claimHostNames({
    stateDir,
    configured: {},
    registry: join(dir, 'registry'),
    hostNetwork: async () => ({ links: new Set(), routes: [] }),
  });
  assert.equal(names.bridge, 'ucompute0');
  assert.equal(names.subnet, '10.89.0.0/16');
  assert.equal(names.cgroupParent, 'ucompute');
  assert.deepEqual(names.hostIds, [
    [1_000_000, CHUNK_SIZE],
    [1_000_000 + CHUNK_SIZE, CHUNK_SIZE],
  ]);
});
