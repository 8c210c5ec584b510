import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { run } from '../../src/backends/local/exec.ts';
import { bridgeNetwork } from '../../src/backends/local/network.ts';
import {
  container,
  missingPrerequisite,
  outputDir,
  probeArgv,
  type TestPod,
  type TestRuntime,
  testRuntime,
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

async function prober(t: { after(fn: () => Promise<void>): void }, rt: TestRuntime) {
  const out = await outputDir(t);
  const pod: TestPod = await rt.pod('egress');
  let probes = 0;
  return async (ip: string, port = PORT) => {
    const probe = await pod.start(container(out, `probe-${probes++}`, probeArgv(ip, port)));
    return (await probe.exited).exitCode === 0;
  };
}

const rules = (rt: TestRuntime) => run('nft', ['list', 'table', 'inet', rt.bridge]);

describe('pod egress', { skip: skip ?? false }, () => {
  test('by default pods reach the internet but no link-local, private or carrier-NAT address', async (t) => {
    const rt = await testRuntime(t);
    await testHost(t);
    const reaches = await prober(t, rt);
    assert.equal(await reaches(TARGETS.public), true, 'a public address is reachable (the test host works)');
    assert.equal(await reaches(TARGETS.linkLocal), false, `link-local ${TARGETS.linkLocal} (cloud metadata)`);
    assert.equal(await reaches(TARGETS.private), false, `private ${TARGETS.private}`);
    assert.equal(await reaches(TARGETS.carrierNat), false, `carrier NAT ${TARGETS.carrierNat}`);
  });

  test('allowEgressTo opens a private destination; allowInternet: false closes the rest', async (t) => {
    const rt = await testRuntime(t, {
      network: { allowEgressTo: [`${TARGETS.linkLocal}/32`], allowInternet: false },
    });
    await testHost(t);
    const reaches = await prober(t, rt);
    assert.equal(await reaches(TARGETS.linkLocal), true, 'the allowed address is reachable');
    assert.equal(await reaches(TARGETS.public), false, 'no internet');
    assert.equal(await reaches(TARGETS.private), false, 'other private addresses stay closed');
  });

  test("pods cannot open connections to the host's own addresses", async (t) => {
    const rt = await testRuntime(t);
    const gateway = await gatewayOf(rt);
    const listener = createServer((s) => s.end('host'));
    await new Promise<void>((resolve) => listener.listen(PORT, gateway, resolve));
    t.after(() => new Promise<void>((resolve) => listener.close(() => resolve())));
    const reaches = await prober(t, rt);
    assert.equal(await reaches(gateway), false, `the host at ${gateway}`);
  });

  test('the installed rules drop the ranges, let DNS to the name servers through, and name allowed CIDRs', async (t) => {
    const open = await testRuntime(t);
    const text = await rules(open);
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
    assert.match(text, new RegExp(`iifname "${open.bridge}" accept`));

    const closed = await testRuntime(t, {
      network: { allowEgressTo: ['203.0.113.0/24', 'fd12::/64'], allowInternet: false },
    });
    const closedText = await rules(closed);
    assert.match(closedText, /ip daddr 203\.0\.113\.0\/24 accept/);
    assert.match(closedText, /ip6 daddr fd12::\/64 accept/);
    assert.doesNotMatch(closedText, new RegExp(`iifname "${closed.bridge}" accept`));
    assert.match(closedText, new RegExp(`iifname "${closed.bridge}" drop`));
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
