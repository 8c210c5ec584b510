import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import type { Backend } from '../jobs/backend.ts';

// The VNC relay: the browser's binary WebSocket messages to the job's VNC port as raw TCP and
// back, so that nothing (no websockify) is needed in the job.

export interface VncTarget {
  jobId: string;
  rank: number;
  port: number;
}

export function relayVnc(
  socket: WebSocket,
  target: VncTarget,
  backend: Pick<Backend, 'connect'>,
  log: { warn(obj: object, msg?: string): void },
): void {
  let vnc: Duplex | undefined;
  // What the browser sends before the connection is up (RFB's client speaks second, but be safe).
  const early: Buffer[] = [];
  socket.on('message', (data: Buffer) => {
    if (vnc) vnc.write(data);
    else early.push(data);
  });
  socket.on('close', () => vnc?.destroy());
  backend.connect(target.jobId, target.rank, target.port).then(
    (stream) => {
      if (socket.readyState !== WebSocket.OPEN) {
        stream.destroy();
        return;
      }
      vnc = stream;
      for (const chunk of early.splice(0)) stream.write(chunk);
      stream.on('data', (chunk: Buffer) => socket.send(chunk, { binary: true }));
      stream.on('error', () => stream.destroy());
      stream.on('close', () => socket.close(1000, 'the desktop has closed'));
    },
    (err: unknown) => {
      log.warn({ err, jobId: target.jobId, rank: target.rank }, 'the VNC server did not answer');
      socket.close(4502, 'the desktop is not answering (yet)');
    },
  );
}
