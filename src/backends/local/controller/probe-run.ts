import { request } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Clock } from '../../../model/clock.ts';
import type { Pod } from '../runtime.ts';
import { type ProbeWorker, probePort } from './probes.ts';

/**
 * One run of a probe's handler against a pod, as the kubelet's prober does it: exec (exit code 0),
 * httpGet (a status from 200 to 399) and tcpSocket (the connection is accepted), each bounded by
 * the probe's timeoutSeconds on the controller's clock. Reaches the pod through the runtime only
 * (Pod.exec, Pod.connect).
 */

export interface ProbeOutcome {
  ok: boolean;
  /** What failed, in words (the last failure's words are shown when the threshold is reached). */
  why: string;
}

/** As the kubelet's HTTP prober identifies itself. */
const USER_AGENT = 'kube-probe/ucompute';
/** The output of an exec probe kept in the failure's words. */
const OUTPUT_SHOWN = 200;

export async function runProbe(clock: Clock, pod: Pod, worker: ProbeWorker): Promise<ProbeOutcome> {
  const abort = new AbortController();
  const seconds = worker.timing.timeoutMs / 1000;
  const timer = clock.setTimeout(
    () => abort.abort(new Error(`no answer within its timeoutSeconds (${seconds} s)`)),
    worker.timing.timeoutMs,
  );
  try {
    return await handle(pod, worker, abort.signal);
  } catch (err) {
    return { ok: false, why: (err as Error).message };
  } finally {
    timer.cancel();
    abort.abort(new Error('the probe is over'));
  }
}

async function handle(pod: Pod, worker: ProbeWorker, signal: AbortSignal): Promise<ProbeOutcome> {
  const { probe, container } = worker;
  if (probe.exec) {
    const { exitCode, output } = await pod.exec(container.name, probe.exec.command, signal);
    const said = output.trim().slice(0, OUTPUT_SHOWN);
    return { ok: exitCode === 0, why: `exit code ${exitCode}${said ? `: ${said}` : ''}` };
  }
  if (probe.tcpSocket) {
    (await connected(pod, probePort(container, probe.tcpSocket.port), signal)).destroy();
    return { ok: true, why: '' };
  }
  if (probe.httpGet) {
    const port = probePort(container, probe.httpGet.port);
    const socket = await connected(pod, port, signal);
    const status = await httpStatus(socket, pod.ip, port, probe.httpGet, signal);
    return { ok: status >= 200 && status < 400, why: `HTTP status ${status}` };
  }
  throw new Error('the probe has no handler');
}

/** A connection to the pod's port, or the abort's reason (a late connection is closed). */
function connected(pod: Pod, port: number, signal: AbortSignal): Promise<Duplex> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    pod.connect(port).then(
      (socket) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) socket.destroy();
        else resolve(socket);
      },
      (err: Error) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** GET over the open connection, as the kubelet sends it (its headers, Host the pod's address). */
function httpStatus(
  socket: Duplex,
  ip: string,
  port: number,
  get: NonNullable<ProbeWorker['probe']['httpGet']>,
  signal: AbortSignal,
): Promise<number> {
  const headers: Record<string, string> = { Host: `${ip}:${port}`, 'User-Agent': USER_AGENT, Accept: '*/*' };
  for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
  return new Promise((resolve, reject) => {
    const req = request(
      { method: 'GET', path: get.path ?? '/', headers, signal, createConnection: () => socket as Socket },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
        socket.destroy();
      },
    );
    req.once('error', (err) => {
      socket.destroy();
      reject(signal.aborted ? signal.reason : err);
    });
    req.end();
  });
}
