import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, test } from 'node:test';
import {
  container,
  fileRuntime,
  missingPrerequisite,
  outputDir,
  podReply,
  probeArgv,
  serverArgv,
  type TestPod,
} from './support/local-runtime.ts';

const skip = await missingPrerequisite();

describe('local runtime network', { skip: skip ?? false }, () => {
  // One runtime for the file, each test its own pods (fileRuntime).
  const shared = fileRuntime();

  test('pods have their own addresses, so replicas listen on the same port', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const first = await pod('replica-0');
    const second = await pod('replica-1');
    assert.notEqual(first.ip, second.ip);
    await first.start(container(out, 'first', serverArgv(8080, 'first')));
    await second.start(container(out, 'second', serverArgv(8080, 'second')));
    assert.equal(await podReply(first, 8080), 'first');
    assert.equal(await podReply(second, 8080), 'second');
  });

  test('pods exchange traffic only with the peers both allow; two jobs are isolated', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const a = await pod('job1-a');
    const b = await pod('job1-b');
    const stranger = await pod('job2-c');
    await a.allowPeers([b.ip]);
    await b.allowPeers([a.ip]);
    await stranger.allowPeers([]);
    for (const p of [a, b, stranger])
      await p.start(container(out, `${p.name}-server`, serverArgv(7000, p.name)));
    await Promise.all([a, b, stranger].map((p) => podReply(p, 7000)));

    let probes = 0;
    const reaches = async (from: TestPod, to: TestPod) => {
      const probe = await from.start(container(out, `probe-${probes++}`, probeArgv(to.ip, 7000)));
      return (await probe.exited).exitCode === 0;
    };
    assert.equal(await reaches(a, b), true, 'a reaches b');
    assert.equal(await reaches(b, a), true, 'b reaches a');
    assert.equal(await reaches(stranger, b), false, 'the other job cannot reach b');
    assert.equal(await reaches(a, stranger), false, 'a cannot reach the other job');

    // One side allowing is not enough: the other side must allow it too.
    await stranger.allowPeers([a.ip]);
    assert.equal(await reaches(stranger, a), false, 'a does not allow the stranger');
    // allowPeers replaces the set.
    await a.allowPeers([]);
    assert.equal(await reaches(b, a), false, 'a no longer allows b');
  });

  test('pods add no address on the host: browsers there see no network change as pods come and go', async () => {
    const { pod, bridge } = shared();
    await pod('quiet-0');
    await pod('quiet-1');
    const show = (...args: string[]) =>
      JSON.parse(execFileSync('ip', ['-j', ...args, 'show', 'master', bridge], { encoding: 'utf8' })) as {
        ifname: string;
        inet6_addr_gen_mode?: string;
        addr_info?: unknown[];
      }[];
    const ports = show('-d', 'link');
    assert.ok(ports.length >= 2, `the bridge ${bridge} has the pods' host ends`);
    // Without it each host end gets an fe80:: address the moment its peer is up.
    assert.deepEqual(
      ports.filter((p) => p.inet6_addr_gen_mode !== 'none').map((p) => p.ifname),
      [],
      'every host end is made with addrgenmode none',
    );
    assert.deepEqual(
      show('addr')
        .filter((p) => (p.addr_info ?? []).length > 0)
        .map((p) => p.ifname),
      [],
      'no host end carries an address',
    );
  });

  test('a container that is not root listens on a low port of its pod, as with Docker', async (t) => {
    const { pod } = shared();
    const out = await outputDir(t);
    const web = await pod('low-port');
    await web.start(container(out, 'web', serverArgv(80, 'low'), { uid: 1000, gid: 1000 }));
    assert.equal(await podReply(web, 80), 'low');
  });
});
