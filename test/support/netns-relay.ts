/**
 * Run inside the browser's network namespace (see chromium.ts): listens on 127.0.0.1:PORT for each
 * PORT given and relays every connection to the Unix socket DIR/PORT.sock, which the test process
 * serves from the host's namespace (a socket file is reachable from any network namespace).
 * Usage: netns-relay.ts DIR PORT...; prints "listening" once every port is bound.
 */
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';

const [dir, ...ports] = process.argv.slice(2);
if (dir === undefined || ports.length === 0) throw new Error('usage: netns-relay.ts DIR PORT...');

await Promise.all(
  ports.map(async (port) => {
    const server = createServer((client) => {
      const upstream = connect(join(dir, `${port}.sock`));
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
  }),
);
process.stdout.write('listening\n');
