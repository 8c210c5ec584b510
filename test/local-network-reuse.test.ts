import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  container,
  missingPrerequisite,
  outputDir,
  podReply,
  serverArgv,
  type TestPod,
  testRuntime,
} from './support/local-runtime.ts';
import { until } from './support/until.ts';

/**
 * An ended pod's network namespace goes to a later pod only reset, and only when nothing of the
 * ended pod is left in it (network.ts, programs/configure-netns.pl).
 */

const skip = await missingPrerequisite();

/** The pod's network namespace, from its record. */
const netnsOf = (stateDir: string, pod: TestPod): string =>
  JSON.parse(readFileSync(join(stateDir, 'pods', pod.name, 'pod.json'), 'utf8')).network.netns;

const ipIn = (netns: string, ...args: string[]) =>
  execFileSync('ip', ['-n', netns, ...args], { encoding: 'utf8' });
const inside = (netns: string, ...argv: string[]) =>
  execFileSync('ip', ['netns', 'exec', netns, ...argv], { encoding: 'utf8' });

/** What a pod could find of another in its namespace, its own address written `POD`. */
function networkState(netns: string, podIp: string) {
  const addresses = (
    JSON.parse(ipIn(netns, '-j', '-4', 'addr', 'show')) as {
      ifname: string;
      addr_info: { local: string; prefixlen: number; scope: string }[];
    }[]
  ).map((l) => ({ ifname: l.ifname, addr: l.addr_info.map((a) => [a.local, a.prefixlen, a.scope]) }));
  return JSON.parse(
    JSON.stringify({
      addresses,
      routes: JSON.parse(ipIn(netns, '-j', '-4', 'route', 'show', 'table', 'all')),
      neighbours: ipIn(netns, 'neigh', 'show'),
      // Every socket but TCP's TIME_WAIT, which no one holds and is bound to the address now gone.
      sockets: inside(netns, 'ss', '-H', '-a', '-n', '-A', 'tcp,udp,raw,unix,packet', 'exclude', 'time-wait'),
      conntrack: inside(netns, 'cat', '/proc/net/nf_conntrack'),
      tcpMetrics: ipIn(netns, 'tcp_metrics', 'show'),
      lowPorts: inside(netns, 'cat', '/proc/sys/net/ipv4/ip_unprivileged_port_start'),
    })
      .replaceAll(`"${podIp}"`, '"POD"')
      .replaceAll(`${podIp} `, 'POD '),
  );
}

describe('local runtime network namespaces reused', { skip: skip ?? false }, () => {
  test("an ended pod's namespace goes to the next pod reset: nothing of the ended pod is in it", async (t) => {
    // No pool: a pod takes an ended pod's namespace, or a new one is made for it.
    const { pod, stateDir } = await testRuntime(t, { network: { poolSize: 0 } });
    const out = await outputDir(t);
    const first = await pod('reuse-0');
    const used = netnsOf(stateDir, first);
    await first.start(container(out, 'first', serverArgv(7000, 'first')));
    assert.equal(await podReply(first, 7000), 'first');
    assert.match(ipIn(used, 'neigh', 'show'), /lladdr/, 'the first pod learned its gateway');
    assert.match(inside(used, 'ss', '-H', '-l', '-t', '-n'), /:7000/, 'the first pod listens');
    await first.destroy(0);

    const second = await pod('reuse-1');
    assert.equal(netnsOf(stateDir, second), used, "the second pod has the first one's namespace");
    assert.notEqual(second.ip, first.ip, 'with an address of its own');
    const fresh = await pod('reuse-2');
    assert.notEqual(netnsOf(stateDir, fresh), used);
    assert.deepEqual(
      networkState(used, second.ip),
      networkState(netnsOf(stateDir, fresh), fresh.ip),
      'the reused namespace is as a new one is',
    );
    await second.start(container(out, 'second', serverArgv(7000, 'second')));
    assert.equal(await podReply(second, 7000), 'second');
  });

  test('a namespace a process or a socket (bound or not) of the ended pod is still in is deleted, never reused', async (t) => {
    const { pod, stateDir } = await testRuntime(t, { network: { poolSize: 0 } });
    // A process in the pod's namespace outside its cgroup (as only root could start one).
    const occupied = await pod('occupied');
    const occupiedNetns = netnsOf(stateDir, occupied);
    const stray = spawn('ip', ['netns', 'exec', occupiedNetns, 'sleep', '600'], { stdio: 'ignore' });
    t.after(() => void stray.kill('SIGKILL'));
    const pidsIn = (netns: string) => execFileSync('ip', ['netns', 'pids', netns], { encoding: 'utf8' });
    await until(() => pidsIn(occupiedNetns) !== '', { describe: 'the stray process is in the namespace' });
    // Sockets made in a pod's namespace, held by a process that left it (as one passed over a Unix
    // socket would be): no process is in the namespace, the socket still is. A listening one, and
    // one never bound (which no table of /proc/net lists: bound or listening later, in the next
    // pod's namespace, it would take the next pod's address and traffic).
    async function holdSocket(name: string, make: string): Promise<{ pod: TestPod; netns: string }> {
      const holding = await pod(name);
      const netns = netnsOf(stateDir, holding);
      const holder = spawn(
        'python3',
        [
          '-c',
          `import ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
host = os.open('/proc/self/ns/net', os.O_RDONLY)
pod = os.open('/run/netns/${netns}', os.O_RDONLY)
assert libc.setns(pod, 0x40000000) == 0
${make}
assert libc.setns(host, 0x40000000) == 0
print('ready', flush=True)
time.sleep(600)`,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      t.after(() => void holder.kill('SIGKILL'));
      let said = '';
      holder.stdout.on('data', (chunk) => {
        said += chunk;
      });
      await until(() => said.includes('ready'), { describe: `the socket holder of ${name} is ready` });
      assert.equal(pidsIn(netns), '', `no process is in the namespace of ${name}`);
      return { pod: holding, netns };
    }
    const listening = await holdSocket(
      'holding',
      "s = socket.socket()\ns.bind(('0.0.0.0', 7000))\ns.listen()",
    );
    const unbound = await holdSocket('unbound', 's = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)');

    await occupied.destroy(0);
    await listening.pod.destroy(0);
    await unbound.pod.destroy(0);
    const kept = [occupiedNetns, listening.netns, unbound.netns];
    const next = await pod('next');
    assert.ok(!kept.includes(netnsOf(stateDir, next)), 'the next pod has a new one');
    await until(() => kept.every((netns) => !existsSync(`/run/netns/${netns}`)), {
      describe: 'the three namespaces are deleted',
    });
  });
});
