/**
 * What UCloud's side does with ucompute's provider endpoints beyond plain calls: Core following a
 * job over its WebSocket, and a browser using the sessions Core opened (a web link, the terminal's
 * WebSocket, the VNC WebSocket). Shapes: SDU-eScience/UCloud IM2 `provider-integration/im2/pkg/
 * controller/jobs.go:1526-1568` (the envelope), `frontend-web/webclient/app/Applications/Jobs/
 * Shell.tsx:199-240` (the terminal), `Vnc.tsx:49` (the VNC URL).
 */
import { request } from 'node:http';
import { WebSocket } from 'ws';
import { PROVIDER_ID, type ProviderWorld } from './provider.ts';
import { until } from './until.ts';

const wsUrl = (w: ProviderWorld, path: string) => `${w.url.replace('http', 'ws')}${path}`;

/** Core's follow of one job: the stream's messages as they come, and its final response. */
export async function followAsCore(w: ProviderWorld, job: Record<string, unknown>) {
  const socket = new WebSocket(wsUrl(w, `/ucloud/jobs.provider.${PROVIDER_ID}/websocket`), {
    headers: { authorization: `Bearer ${await w.core.token()}` },
  });
  const messages: Record<string, unknown>[] = [];
  socket.on('message', (m) => messages.push(JSON.parse(String(m))));
  await new Promise((done, fail) => {
    socket.once('open', done);
    socket.once('error', fail);
  });
  socket.send(
    JSON.stringify({
      call: `jobs.provider.${PROVIDER_ID}.follow`,
      streamId: 'ignored',
      payload: { type: 'init', job },
    }),
  );
  const payloads = () =>
    messages.flatMap((m) =>
      m.type === 'message' ? [m.payload as { rank: number; stdout?: string; stderr?: string }] : [],
    );
  return {
    messages,
    /** What rank `rank` wrote to stdout so far. */
    stdout: (rank = 0) =>
      payloads()
        .filter((p) => p.rank === rank)
        .map((p) => p.stdout ?? '')
        .join(''),
    response: () => messages.find((m) => m.type === 'response'),
    close: () => socket.close(),
  };
}

/** A GET through ucompute's server as the browser sends it to `host` (a job's app origin). */
export function getAt(
  w: ProviderWorld,
  host: string,
  path: string,
  cookie?: string,
): Promise<{ status: number; cookie: string; body: string }> {
  return new Promise((done, fail) => {
    const req = request(`${w.url}${path}`, { headers: { host, ...(cookie ? { cookie } : {}) } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () =>
        done({ status: res.statusCode ?? 0, cookie: String(res.headers['set-cookie'] ?? ''), body }),
      );
    });
    req.on('error', fail);
    req.end();
  });
}

/** Follows a web session's link as a browser does; answers the session cookie (`name=value`). */
export async function signInWithLink(w: ProviderWorld, redirectClientTo: string): Promise<string> {
  const link = new URL(redirectClientTo);
  const landed = await getAt(w, link.host, link.pathname + link.search);
  if (landed.status !== 303) throw new Error(`the link answered ${landed.status}: ${landed.body}`);
  return landed.cookie.split(';')[0]!;
}

/** The browser's terminal on a shell session Core opened: input in, the terminal's text out. */
export async function shellAsBrowser(w: ProviderWorld, sessionIdentifier: string) {
  const socket = new WebSocket(
    wsUrl(w, `/ucloud/${PROVIDER_ID}/websocket?session=${encodeURIComponent(sessionIdentifier)}`),
  );
  let output = '';
  socket.on('message', (m) => {
    const payload = (JSON.parse(String(m)) as { payload?: { type?: string; data?: string } }).payload;
    if (payload?.type === 'data') output += payload.data ?? '';
  });
  await new Promise((done, fail) => {
    socket.once('open', done);
    socket.once('error', fail);
  });
  const call = `jobs.compute.${PROVIDER_ID}.shell.open`;
  const send = (payload: object) => socket.send(JSON.stringify({ call, streamId: 'shell-1', payload }));
  send({ type: 'initialize', sessionIdentifier, cols: 80, rows: 24 });
  return {
    input: (data: string) => send({ type: 'input', data }),
    output: () => output,
    /** Waits until the terminal shows `text`. */
    shows: (text: string) =>
      until(() => output.includes(text), { timeout: 20_000, describe: `the terminal shows ${text}` }),
    close: () => socket.close(),
  };
}

/** The first bytes the VNC server sends through the relay at `url` (as the browser's noVNC opens it). */
export async function vncGreeting(w: ProviderWorld, url: string): Promise<string> {
  const at = new URL(url);
  const socket = new WebSocket(wsUrl(w, at.pathname + at.search));
  try {
    return await new Promise<string>((done, fail) => {
      socket.once('message', (m) => done(Buffer.from(m as Buffer).toString()));
      socket.once('error', fail);
      socket.once('unexpected-response', (_q, r) => fail(new Error(`VNC answered ${r.statusCode}`)));
    });
  } finally {
    socket.close();
  }
}
