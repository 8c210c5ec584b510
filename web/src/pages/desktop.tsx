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

/** The job's desktop: noVNC on the VNC relay at /api/jobs/vnc. */
export function JobDesktop({ jobId, rank, secret, password }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('Connecting…');
  useEffect(() => {
    const url = socketUrl(`/api/jobs/vnc?jobId=${jobId}&rank=${rank}`);
    const rfb = new RFB(host.current!, url, { wsProtocols: ['binary', `session.${secret}`] });
    rfb.scaleViewport = true;
    rfb.addEventListener('connect', () => setStatus(''));
    rfb.addEventListener('disconnect', (event) =>
      setStatus(
        (event as CustomEvent<{ clean: boolean }>).detail.clean ? 'The desktop has closed.' : 'Disconnected.',
      ),
    );
    rfb.addEventListener('credentialsrequired', () => rfb.sendCredentials({ password: password ?? '' }));
    return () => rfb.disconnect();
  }, [jobId, rank, secret]);
  return (
    <div class="desktop-frame">
      <div ref={host} id="screen" class="desktop" role="application" aria-label="Remote desktop" />
      {status !== '' && <p class="muted">{status}</p>}
    </div>
  );
}
