import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import { socketTo } from '../api.ts';

/**
 * A terminal in a job (xterm.js on UCloud's shell protocol at /api/jobs/shell). The session
 * identifier, from interactiveSession, is the credential and opens this one terminal.
 */
export function JobTerminal({ sessionIdentifier }: { sessionIdentifier: string }) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('Connecting…');
  useEffect(() => {
    const terminal = new Terminal({ cursorBlink: true, fontSize: 14 });
    const fit = new FitAddon();
    terminal.loadAddon(fit);
    terminal.open(host.current!);
    fit.fit();
    const socket = socketTo('/api/jobs/shell');
    const send = (message: object) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
    };
    socket.onopen = () => {
      send({ type: 'initialize', sessionIdentifier, cols: terminal.cols, rows: terminal.rows });
      setStatus('');
      terminal.focus();
    };
    socket.onmessage = (event) => {
      const message = JSON.parse(String(event.data)) as { type: string; data?: string };
      if (message.type === 'data' && message.data !== undefined) terminal.write(message.data);
      else if (message.type === 'closed') setStatus('The shell has ended.');
    };
    socket.onclose = (event) => setStatus(event.reason || 'Disconnected.');
    const input = terminal.onData((data) => send({ type: 'input', data }));
    const resize = terminal.onResize(({ cols, rows }) => send({ type: 'resize', cols, rows }));
    const refit = () => fit.fit();
    window.addEventListener('resize', refit);
    return () => {
      window.removeEventListener('resize', refit);
      input.dispose();
      resize.dispose();
      socket.close();
      terminal.dispose();
    };
  }, [sessionIdentifier]);
  return (
    <div class="terminal-frame">
      <div ref={host} class="terminal" role="application" aria-label="Terminal" />
      {status !== '' && <p class="muted">{status}</p>}
    </div>
  );
}
