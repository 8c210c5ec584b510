import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer } from 'node:net';
import { test } from 'node:test';
import { sshForwards } from '../src/backends/local/ssh-forwards.ts';

/** The local backend's SSH ports: one per job from the range, relayed, kept across a restart, released. */

test('ports come from the range, the one a job had is taken again, each relays to its job', async (t) => {
  const echo = createServer((socket) => socket.on('data', (d) => socket.end(`${d}`.toUpperCase())));
  echo.listen(0, '127.0.0.1');
  await once(echo, 'listening');
  t.after(() => echo.close());
  const reached: string[] = [];
  const first = 40000 + (process.pid % 1000) * 5;
  const forwards = sshForwards({
    listen: '127.0.0.1',
    first,
    last: first + 2,
    connect: async (jobId) => {
      reached.push(jobId);
      const socket = connect((echo.address() as AddressInfo).port, '127.0.0.1');
      await once(socket, 'connect');
      return socket;
    },
  });
  t.after(() => forwards.closeAll());
  const a = await forwards.open('a');
  assert.equal(a, first);
  assert.equal(await forwards.open('a'), a, 'the same port for the same job');
  // After a restart the job asks for the port its updates announced.
  assert.equal(await forwards.open('b', first + 2), first + 2);
  assert.equal(await forwards.open('c', first), first + 1, 'a port another job holds is not given twice');
  await assert.rejects(forwards.open('d'), /no free ssh port in \d+-\d+/);

  const client = connect(a, '127.0.0.1');
  client.end('hello');
  let answer = '';
  for await (const chunk of client) answer += chunk;
  assert.equal(answer, 'HELLO');
  assert.deepEqual(reached, ['a']);

  forwards.close('a');
  assert.equal(await forwards.open('d'), first, 'a closed port is free again');
});
