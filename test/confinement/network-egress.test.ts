import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { run } from '../../src/backends/local/exec.ts';
import { bridgeNetwork } from '../../src/backends/local/network.ts';
import {
  container,
  fileRuntime,
  missingPrerequisite,
  outputDir,
  probeArgv,
  type TestPod,
  type TestRuntime,
} from '../support/local-runtime.ts';

/**
 * Egress from pods (issue 9 item 4). The destinations are a test host of our own: a network
 * namespace this file creates, joined to the host by a veth, holding a link-local, a private, a
 * carrier-NAT and a documentation ("public") address, each routed to it by a /32 route while the
 * test runs. No traffic leaves this machine.
 */

const skip = await missingPrerequisite();
const tag = process.pid.toString(36).slice(-4) + Math.random().toString(36).slice(2, 4);
const byte = () => 1 + Math.floor(Math.random() * 250);
const TARGETS = {
  linkLocal: `169.254.${byte()}.${byte()}`,
  private: `192.168.${byte()}.${byte()}`,
  carrierNat: `100.${64 + Math.floor(Math.random() * 64)}.${byte()}.${byte()}`,
  public: `198.51.100.${byte()}`, // below HOST_END
};
const PORT = 7080;

/** The host's end of the veth: pods' traffic leaves masqueraded from it (documentation range). */
const HOST_END = '198.51.100.254';

/** The test host: a namespace with the target addresses, a veth to the host, and a server in it. */
async function testHost(t: { after(fn: () => Promise<void>): void }) {
  const netns = `ute${tag}`;
  const veth = `ute${tag}`;
  const server: ChildProcess[] = [];
  t.after(async () => {
    for (const child of server) child.kill('SIGKILL');
    await run('ip', ['link', 'del', veth]).catch(() => undefined);
    await run('ip', ['netns', 'del', netns]).catch(() => undefined);
  });
  const targets = Object.values(TARGETS);
  await run(
    'ip',
    ['-batch', '-'],
    [
      `netns add ${netns}`,
      `link add ${veth} type veth peer name eth0 netns ${netns}`,
      `addr add ${HOST_END}/32 dev ${veth}`,
      `link set ${veth} up`,
      ...targets.map((ip) => `route add ${ip}/32 dev ${veth}`),
      '',
    ].join('\n'),
  );
  await run(
    'ip',
    ['-n', netns, '-batch', '-'],
    [
      'link set lo up',
      'link set eth0 up',
      ...targets.map((ip) => `addr add ${ip}/32 dev eth0`),
      `route add ${HOST_END}/32 dev eth0`,
      '',
    ].join('\n'),
  );
  // Probes hang up at once: the server must outlive their resets.
  const serve = `require('node:net').createServer((s) => s.on('error', () => {}).end('test host')).listen(${PORT})`;
  const child = spawn('ip', ['netns', 'exec', netns, process.execPath, '-e', serve], { stdio: 'ignore' });
  server.push(child);
  // Up once it answers from inside its own namespace.
  for (let i = 0; i < 100; i++) {
    const ok = await run('ip', ['netns', 'exec', netns, ...probeArgv(TARGETS.public, PORT)]).then(
      () => true,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail('the test host never listened');
}

/** The host's address on the runtime's bridge: its pods' gateway. */
async function gatewayOf(rt: TestRuntime): Promise<string> {
  const links = JSON.parse(await run('ip', ['-j', '-4', 'addr', 'show', 'dev', rt.bridge])) as {
    addr_info: { local: string }[];
  }[];
  const address = links[0]?.addr_info[0]?.local;
  assert.ok(address, `bridge ${rt.bridge} has an IPv4 address`);
  return address;
}

/**
 * Probes from one pod of the runtime's: each probe is a container of its own, run side by side
 * (a blocked address costs the probe's one-second connect timeout, not one second each in turn).
 */
async function prober(t: { after(fn: () => Promise<void>): void }, rt: TestRuntime) {
  const out = await outputDir(t);
  const pod: TestPod = await rt.pod('egress');
  let probes = 0;
  const reaches = async (ip: string, port = PORT) => {
    const probe = await pod.start(container(out, `probe-${probes++}`, probeArgv(ip, port)));
    return (await probe.exited).exitCode === 0;
  };
  /** Whether each address is reached, probed at once. */
  return (ips: string[]) => Promise.all(ips.map((ip) => reaches(ip)));
}

const rules = (rt: TestRuntime) => run('nft', ['list', 'table', 'inet', rt.bridge]);

/** Hooks' cleanups, run after the file's tests (as t.after runs them after one test). */
function fileScope() {
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  return { after: (fn: () => Promise<void>) => void cleanups.push(fn) };
}

describe('pod egress', { skip: skip ?? false }, () => {
  // Two runtimes for the file (a runtime's start and close cost more than a test): the default
  // rules, and closed ones (no internet; one link-local address and two documentation CIDRs allowed).
  const open = fileRuntime();
  const closed = fileRuntime({
    network: {
      allowEgressTo: [`${TARGETS.linkLocal}/32`, '203.0.113.0/24', 'fd12::/64'],
      allowInternet: false,
    },
  });
  const scope = fileScope();
  let probeOpen: (ips: string[]) => Promise<boolean[]>;
  let probeClosed: (ips: string[]) => Promise<boolean[]>;
  before(async () => {
    await testHost(scope);
    probeOpen = await prober(scope, open());
    probeClosed = await prober(scope, closed());
  });

  test('by default pods reach the internet but no link-local, private or carrier-NAT address', async () => {
    const [publicIp, linkLocal, privateIp, carrierNat] = await probeOpen([
      TARGETS.public,
      TARGETS.linkLocal,
      TARGETS.private,
      TARGETS.carrierNat,
    ]);
    assert.equal(publicIp, true, 'a public address is reachable (the test host works)');
    assert.equal(linkLocal, false, `link-local ${TARGETS.linkLocal} (cloud metadata)`);
    assert.equal(privateIp, false, `private ${TARGETS.private}`);
    assert.equal(carrierNat, false, `carrier NAT ${TARGETS.carrierNat}`);
  });

  test('allowEgressTo opens a private destination; allowInternet: false closes the rest', async () => {
    const [linkLocal, publicIp, privateIp] = await probeClosed([
      TARGETS.linkLocal,
      TARGETS.public,
      TARGETS.private,
    ]);
    assert.equal(linkLocal, true, 'the allowed address is reachable');
    assert.equal(publicIp, false, 'no internet');
    assert.equal(privateIp, false, 'other private addresses stay closed');
  });

  test("pods cannot open connections to the host's own addresses", async (t) => {
    const gateway = await gatewayOf(open());
    const listener = createServer((s) => s.end('host'));
    await new Promise<void>((resolve) => listener.listen(PORT, gateway, resolve));
    t.after(() => new Promise<void>((resolve) => listener.close(() => resolve())));
    assert.deepEqual(await probeOpen([gateway]), [false], `the host at ${gateway}`);
  });

  test('the installed rules drop the ranges, let DNS to the name servers through, and name allowed CIDRs', async () => {
    const text = await rules(open());
    for (const range of [
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '169.254.0.0/16',
      '100.64.0.0/10',
    ]) {
      assert.match(text, new RegExp(`ip daddr \\{[^}]*${range.replace(/\./g, '\\.')}[^}]*\\} drop`), range);
    }
    assert.match(text, /ip6 daddr \{[^}]*fc00::\/7[^}]*fe80::\/10[^}]*\} drop/);
    assert.match(text, /th dport 53 accept/, 'DNS to the name servers of resolv.conf');
    assert.match(text, new RegExp(`iifname "${open().bridge}" accept`));

    const closedText = await rules(closed());
    // One accept rule for the allowed IPv4 destinations (a set of them, as nft prints several).
    const allowed = /ip daddr \{?([^}\n]*?)\}? accept/
      .exec(closedText)?.[1]
      ?.split(/,\s*/)
      .map((a) => a.trim());
    assert.deepEqual(allowed?.sort(), [TARGETS.linkLocal, '203.0.113.0/24'].sort(), closedText);
    assert.match(closedText, /ip6 daddr fd12::\/64 accept/);
    assert.doesNotMatch(closedText, new RegExp(`iifname "${closed().bridge}" accept`));
    assert.match(closedText, new RegExp(`iifname "${closed().bridge}" drop`));
  });

  test('a malformed allowEgressTo entry is refused, naming it, before anything is set up', async () => {
    const bridge = `utx${tag}`;
    await assert.rejects(
      bridgeNetwork(
        { bridge, subnet: '10.1.2.0/24', allowEgressTo: ['10.1.2.0/24', '10.1.2.0/33'] },
        // No namespace is made, so no setns is called and nothing is written down.
        { journal: '/nonexistent/namespaces', reserved: [], nameservers: [], run, setns: 0 },
      ),
      /local\.network\.allowEgressTo\[1\]: "10\.1\.2\.0\/33" is not an IPv4 or IPv6 CIDR/,
    );
    await assert.rejects(readFile(`/sys/class/net/${bridge}/operstate`), { code: 'ENOENT' });
  });
});
