import { Socket } from 'node:net';
import pg from 'pg';

/** Wait before listening again after the connection was lost. */
const RECONNECT_MS = 1000;

export interface ChannelHandlers {
  /** Listening (again) from now on: what was announced before is not heard. */
  listening(): void;
  notified(payload: string): void;
  /** The connection is lost: nothing is heard until `listening` is called again. */
  lost?(): void;
}

/**
 * LISTEN on `channel` on a connection of its own, made again when it is lost, until `end`.
 */
export function listenOn(url: string, channel: string, handlers: ChannelHandlers): { end(): Promise<void> } {
  let client: pg.Client | undefined;
  let ended = false;
  let retry: NodeJS.Timeout | undefined;

  function connect(): void {
    retry = undefined;
    // Listening does not keep the process alive, as idle connections of the pool do not.
    const c = new pg.Client({ connectionString: url, stream: () => new Socket().unref() });
    client = c;
    let lost = false;
    const reconnect = () => {
      if (lost) return;
      lost = true;
      c.end().catch(() => {});
      if (client === c) client = undefined;
      handlers.lost?.();
      if (ended) return;
      retry = setTimeout(connect, RECONNECT_MS);
      retry.unref();
    };
    c.on('error', reconnect);
    c.on('end', reconnect);
    c.on('notification', (n) => handlers.notified(n.payload ?? ''));
    c.connect()
      .then(async () => {
        // Ended while connecting: `end` found no connection to end yet.
        if (ended) return void c.end().catch(() => {});
        await c.query(`listen ${channel}`);
        if (!lost) handlers.listening();
      })
      .catch(reconnect);
  }

  connect();
  return {
    async end() {
      ended = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
