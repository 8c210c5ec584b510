import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parsePublicKey } from '../src/jobs/ssh-keys.ts';
import { needs } from './support/local-tools.ts';
import { type TestServer, testServer } from './support/server.ts';
import { openTestStore } from './support/store.ts';

/** Users' SSH public keys: UCloud's ssh.create, ssh.browse and ssh.delete, each user's own. */

const tools = await needs('ssh-keygen');
const dir = await mkdtemp(join(tmpdir(), 'ucompute-keys-'));

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('ssh keys', () => {
  after(() => rm(dir, { recursive: true, force: true }));

  /** A new public key of this type (and size), made by ssh-keygen. */
  async function generated(name: string, ...args: string[]): Promise<string> {
    const file = join(dir, name);
    execFileSync('ssh-keygen', ['-q', '-N', '', '-C', `${name}@test`, '-f', file, ...args]);
    return (await readFile(`${file}.pub`, 'utf8')).trim();
  }

  /** What ssh-keygen says the key's fingerprint is. */
  function fingerprintOf(name: string): string {
    return execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', join(dir, `${name}.pub`)], {
      encoding: 'utf8',
    }).split(' ')[1]!;
  }

  test(
    'public keys of the accepted types are read as ssh-keygen reads them; others are refused saying why',
    tools,
    async () => {
      for (const [name, args] of [
        ['ed', ['-t', 'ed25519']],
        ['ec256', ['-t', 'ecdsa', '-b', '256']],
        ['ec521', ['-t', 'ecdsa', '-b', '521']],
        ['rsa', ['-t', 'rsa', '-b', '2048']],
      ] as const) {
        const key = await generated(name, ...args);
        const parsed = parsePublicKey(`  ${key}\n`);
        assert.ok('line' in parsed, `${name}: ${JSON.stringify(parsed)}`);
        assert.equal(parsed.line, key);
        assert.equal(parsed.fingerprint, fingerprintOf(name));
      }
      const small = await generated('small', '-t', 'rsa', '-b', '1024');
      assert.deepEqual(parsePublicKey(small), {
        problem: 'is a 1024-bit RSA key; at least 2048 bits are needed',
      });
      const ed = await generated('ed2', '-t', 'ed25519');
      const [, data] = ed.split(' ');
      const refused = [
        `command="/bin/evil" ${ed}`, // options would be obeyed by sshd
        `${ed}\nssh-ed25519 ${data}`, // a second line would be a second key
        'ssh-dss AAAAB3NzaC1kc3M=',
        `ssh-rsa ${data}`, // an ed25519 blob under another type
        `ssh-ed25519 ${data!.slice(0, -4)}`,
        'ssh-ed25519 not*base64',
        '',
      ];
      for (const key of refused) assert.ok('problem' in parsePublicKey(key), key);
    },
  );

  describe('the ssh keys API', () => {
    let server: TestServer;
    const tokens: Record<string, string> = {};
    before(async () => {
      const store = await openTestStore();
      for (const user of ['alice', 'bob']) {
        await store.users.createUser(user, false);
        tokens[user] = await store.users.createToken(user, 'test');
      }
      server = await testServer(store);
    });
    after(() => server.close());
    const call = (user: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) =>
      server.app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${tokens[user]}` },
        ...(payload !== undefined ? { payload: payload as object } : {}),
      });

    test(
      'create (UCloud bulk shape), browse (PageV2, own keys only), delete (all or none)',
      tools,
      async () => {
        const ed = await generated('api-ed', '-t', 'ed25519');
        const ec = await generated('api-ec', '-t', 'ecdsa');
        const created = await call('alice', 'POST', '/api/ssh', {
          items: [
            { title: 'laptop', key: ed },
            { title: 'desktop', key: ec },
          ],
        });
        assert.equal(created.statusCode, 200, created.body);
        const [first, second] = (created.json() as { responses: { id: string }[] }).responses.map(
          (r) => r.id,
        );
        const viaIssuePath = await call('bob', 'POST', '/api/ssh/keys', {
          items: [{ title: 'bob', key: ed }],
        });
        assert.equal(viaIssuePath.statusCode, 200, viaIssuePath.body);

        const page = await call('alice', 'GET', '/api/ssh/browse?itemsPerPage=1');
        assert.equal(page.statusCode, 200, page.body);
        const body = page.json() as {
          items: { id: string; owner: string; fingerprint: string; specification: unknown }[];
          next: string;
        };
        assert.deepEqual(
          body.items.map(({ id, owner, fingerprint, specification }) => ({
            id,
            owner,
            fingerprint,
            specification,
          })),
          [
            {
              id: first,
              owner: 'alice',
              fingerprint: fingerprintOf('api-ed'),
              specification: { title: 'laptop', key: ed },
            },
          ],
        );
        const rest = (await call('alice', 'GET', `/api/ssh/browse?next=${body.next}`)).json() as {
          items: { id: string }[];
          next: null;
        };
        assert.deepEqual(
          rest.items.map((k) => k.id),
          [second],
        );
        assert.equal(rest.next, null);

        // Another user's key is not found, and nothing of the request is removed.
        const bobs = (await call('bob', 'GET', '/api/ssh/browse')).json() as { items: { id: string }[] };
        const mixed = await call('alice', 'DELETE', '/api/ssh', {
          items: [{ id: first }, { id: bobs.items[0]!.id }],
        });
        assert.equal(mixed.statusCode, 404, mixed.body);
        assert.match(mixed.json().message, /^items\[1\]\.id: ssh key/);
        assert.equal(
          ((await call('alice', 'GET', '/api/ssh/browse')).json() as { items: unknown[] }).items.length,
          2,
        );
        assert.equal(
          ((await call('bob', 'GET', '/api/ssh/browse')).json() as { items: unknown[] }).items.length,
          1,
        );

        const deleted = await call('alice', 'DELETE', '/api/ssh', { items: [{ id: first }] });
        assert.equal(deleted.statusCode, 200, deleted.body);
        const left = (await call('alice', 'GET', '/api/ssh/browse')).json() as { items: { id: string }[] };
        assert.deepEqual(
          left.items.map((k) => k.id),
          [second],
        );
      },
    );

    test('bad keys and titles are refused naming the item and field; nothing is stored', tools, async () => {
      const before = ((await call('bob', 'GET', '/api/ssh/browse')).json() as { items: unknown[] }).items
        .length;
      const ed = await generated('api-ed2', '-t', 'ed25519');
      const answer = await call('bob', 'POST', '/api/ssh', {
        items: [
          { title: 'fine', key: ed },
          { title: ' ', key: 'ssh-rsa AAAA' },
        ],
      });
      assert.equal(answer.statusCode, 400, answer.body);
      const issues = (answer.json() as { issues: { path: string }[] }).issues.map((i) => i.path);
      assert.deepEqual(issues, ['items[1].title', 'items[1].key']);
      const after = ((await call('bob', 'GET', '/api/ssh/browse')).json() as { items: unknown[] }).items
        .length;
      assert.equal(after, before);
      const unknownField = await call('bob', 'POST', '/api/ssh', {
        items: [{ title: 'x', key: ed, extra: 1 }],
      });
      assert.equal(unknownField.statusCode, 400);
    });
  });
});
