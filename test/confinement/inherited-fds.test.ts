/**
 * Descriptors ucompute's own parent left open must not reach the launcher's children (supervisors,
 * bubblewrap, containers): the launcher closes them when it starts.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';

const MODULE = new URL('../../src/backends/local/inherited-fds.ts', import.meta.url).href;

const SCRIPT = `
import { openSync, readdirSync, readlinkSync } from 'node:fs';
import { closeInheritedDescriptors } from ${JSON.stringify(MODULE)};
const link = (fd) => { try { return readlinkSync('/proc/self/fd/' + fd); } catch { return ''; } };
const inherited = link(100);
openSync('/etc/hostname', 'r');
closeInheritedDescriptors();
console.log(JSON.stringify({ inherited, left: readdirSync('/proc/self/fd').map(link) }));`;

test('a process closes the descriptors it inherited and keeps those it opened', async () => {
  // Descriptor 100 of the child: a socket it inherits without close-on-exec (Node marks a few
  // low ones close-on-exec when it starts, not all).
  const child = spawn(process.execPath, ['--input-type=module', '-e', SCRIPT], {
    stdio: ['ignore', 'pipe', 'inherit', ...Array<'ignore'>(97).fill('ignore'), 'pipe'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (text: string) => {
    out += text;
  });
  const code = await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  assert.equal(code, 0);
  const { inherited, left } = JSON.parse(out) as { inherited: string; left: string[] };
  assert.match(inherited, /^socket:\[\d+\]$/);
  assert.ok(!left.includes(inherited), `${inherited} is still open`);
  assert.ok(left.includes('/etc/hostname'), 'its own descriptor was closed');
});
