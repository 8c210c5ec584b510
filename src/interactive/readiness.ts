import type { Duplex } from 'node:stream';
import type { Backend } from '../jobs/backend.ts';

// Whether a job's app answers yet, in its own protocol: the session pages wait for this before
// sending the browser there ("starting…", as Open OnDemand and JupyterHub do), instead of showing
// a proxy error. A port that accepts a connection is not enough: Jupyter accepts before it serves.

export type AppProtocol = 'http' | 'rfb';

/** How long one probe may take before it counts as no answer. */
const PROBE_MS = 3000;
const MAX_BYTES = 4096;

/**
 * Whether the app on (job, rank, port) answers: an HTTP status line to `GET /` (any status: the
 * app is up), or VNC's RFB greeting. Never throws.
 */
export async function appAnswers(
  backend: Pick<Backend, 'connect'>,
  target: { jobId: string; rank: number; port: number },
  protocol: AppProtocol,
): Promise<boolean> {
  let stream: Duplex | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const answered = (async () => {
      stream = await backend.connect(target.jobId, target.rank, target.port);
      if (protocol === 'http') stream.write('GET / HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n');
      return firstWords(
        stream,
        protocol === 'http' ? /^HTTP\/1\.[01] [1-5][0-9][0-9]/ : /^RFB \d{3}\.\d{3}\n/,
      );
    })();
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), PROBE_MS);
    });
    return await Promise.race([answered, late]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    stream?.destroy();
  }
}

/** Whether the first bytes the stream sends (before it ends) match `greeting`. */
function firstWords(stream: Duplex, greeting: RegExp): Promise<boolean> {
  return new Promise((resolve) => {
    let text = '';
    const done = (result: boolean) => {
      stream.removeAllListeners('data');
      resolve(result);
    };
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (greeting.test(text)) done(true);
      else if (text.length >= MAX_BYTES || text.includes('\n')) done(false);
    });
    stream.once('end', () => done(greeting.test(text)));
    stream.once('close', () => done(greeting.test(text)));
    stream.once('error', () => done(false));
  });
}
