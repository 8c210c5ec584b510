/**
 * Run inside the browser's network namespace (see chromium.ts): listens on 127.0.0.1:PORT for each
 * PORT given and relays every connection to the Unix socket DIR/PORT.sock, which the test process
 * serves from the host's namespace (a socket file is reachable from any network namespace).
 * Usage: netns-relay.ts DIR [PORT...]; prints "listening" once every port is bound. Then each line
 * PORT read from stdin binds one more, answered "listening PORT" (or "failed PORT: why"); it exits
 * when stdin ends.
 */
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const [dir, ...ports] = process.argv.slice(2);
if (dir === undefined) throw new Error('usage: netns-relay.ts DIR [PORT...]');

async function relay(port: string): Promise<void> {
  const server = createServer((client) => {
    const upstream = connect(join(dir!, `${port}.sock`));
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.pipe(upstream).pipe(client);
  });
  server.listen(Number(port), '127.0.0.1');
  await once(server, 'listening');
}

await Promise.all(ports.map(relay));
process.stdout.write('listening\n');
for await (const line of createInterface({ input: process.stdin })) {
  const port = line.trim();
  if (!/^\d+$/.test(port)) continue;
  await relay(port).then(
    () => process.stdout.write(`listening ${port}\n`),
    (error: unknown) => process.stdout.write(`failed ${port}: ${String(error)}\n`),
  );
}
process.exit(0);
