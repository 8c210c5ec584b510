import RFB from '@novnc/novnc';
import { useEffect, useRef, useState } from 'preact/hooks';
import { socketUrl } from '../api.ts';

interface Props {
  jobId: string;
  rank: number;
  /** The VNC session's secret, offered to the relay as the subprotocol `session.<secret>`. */
  secret: string;
  password?: string;
}

/** Tries while the job's VNC server is still starting (the relay closes at once until it listens). */
const START_ATTEMPTS = 30;
const RETRY_MS = 1500;

/** The job's desktop: noVNC on the VNC relay at /api/jobs/vnc. */
export function JobDesktop({ jobId, rank, secret, password }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('Connecting…');
  useEffect(() => {
    let rfb: RFB | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let closed = false;
    const connect = (attempt: number) => {
      let connected = false;
      const current = new RFB(host.current!, socketUrl(`/api/jobs/vnc?jobId=${jobId}&rank=${rank}`), {
        wsProtocols: ['binary', `session.${secret}`],
      });
      rfb = current;
      current.scaleViewport = true;
      current.addEventListener('connect', () => {
        connected = true;
        setStatus('');
      });
      current.addEventListener('disconnect', (event) => {
        rfb = null;
        if (closed) return;
        if (!connected && attempt < START_ATTEMPTS) {
          setStatus('Waiting for the desktop to start…');
          timer = setTimeout(() => connect(attempt + 1), RETRY_MS);
          return;
        }
        const clean = (event as CustomEvent<{ clean: boolean }>).detail.clean;
        setStatus(clean ? 'The desktop has closed.' : 'Disconnected.');
      });
      current.addEventListener('credentialsrequired', () =>
        current.sendCredentials({ password: password ?? '' }),
      );
    };
    connect(1);
    return () => {
      closed = true;
      clearTimeout(timer);
      rfb?.disconnect();
    };
  }, [jobId, rank, secret]);
  return (
    <div class="desktop-frame">
      <div ref={host} id="screen" class="desktop" role="application" aria-label="Remote desktop" />
      {status !== '' && (
        <p class="muted" role="status">
          {status}
        </p>
      )}
    </div>
  );
}
