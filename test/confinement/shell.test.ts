/**
 * A shell opened in a running container (`ucompute shell`, the web terminal) is confined as the
 * container's own command is: same user, capabilities, no_new_privs, seccomp, cgroup and mounts.
 */
import assert from 'node:assert/strict';
import { chown, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { container, missingPrerequisite, output, outputDir, testRuntime } from '../support/local-runtime.ts';
import { until } from '../support/until.ts';

const skip = (await missingPrerequisite()) ?? null;

/** What the kernel says of a process's confinement, and its cgroup; written to `file`. */
const LIMITS = (file: string) =>
  `{ grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; cat /proc/self/uid_map /proc/self/cgroup; } > ${file}`;

for (const [who, ids] of [
  ['root', { uid: 0, gid: 0 }],
  ['non-root', { uid: 1000, gid: 1000 }],
] as const) {
  test(`a shell in a ${who} container has the container's limits and cannot make a read-only mount writable or use ucompute's descriptors`, {
    skip: skip ?? false,
  }, async (t) => {
    const { pod } = await testRuntime(t);
    const out = await outputDir(t);
    const p = await pod(`shell-${who}`);
    // Writable by the container's user but for the read-only mount.
    const data = join(out, 'data');
    await mkdir(data);
    const owner = p.hostIds(ids.uid, ids.gid);
    await chown(data, owner.hostUid, owner.hostGid);
    const spec = container(out, 'main', ['sh', '-c', `${LIMITS('/tmp/container')}; echo ready; sleep 1000`], {
      ...ids,
      mounts: [{ source: data, target: '/data', readOnly: true }],
    });
    await p.start(spec);
    await until(async () => (await output(spec).catch(() => '')) === 'ready\n', {
      describe: 'the container is ready',
    });
    const shell = await p.shell({ cols: 200, rows: 24 });
    let seen = '';
    shell.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
    });
    // Quotes split the markers: the terminal echoes the command line itself.
    shell.write(
      [
        LIMITS('/tmp/shell'),
        `diff /tmp/container /tmp/shell && echo "SAME""-LIMITS"`,
        'mount -o remount,bind,rw /data; touch /data/planted && echo "WRO""TE"',
        // What the shell's commands inherit: the terminal only.
        `echo "<$(sh -c 'ls /proc/$$/fd' | tr '\\n' ' ')>"`,
        'echo "DO""NE"',
      ].join('; ') + '\n',
    );
    await until(() => seen.includes('DONE'), { describe: 'the shell answers', timeout: 10_000 }).catch((e) =>
      assert.fail(`${e.message}: ${seen}`),
    );
    shell.end();
    assert.match(seen, /SAME-LIMITS/, seen);
    assert.doesNotMatch(seen, /WROTE/, seen);
    assert.match(seen, /<0 1 2 >/, seen);
    assert.deepEqual(await readdir(data), []);
  });
}
