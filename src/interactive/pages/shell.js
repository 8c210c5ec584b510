// The terminal page: xterm.js on UCloud's shell protocol. The session identifier comes in the
// URL's fragment, which the browser never sends to a server; it is dropped from the address bar.
const sessionIdentifier = location.hash.slice(1);
history.replaceState(null, '', location.pathname + location.search);
const status = document.getElementById('status');
const terminal = new Terminal({ cursorBlink: true });
const fit = new FitAddon.FitAddon();
terminal.loadAddon(fit);
terminal.open(document.getElementById('terminal'));
fit.fit();

const socket = new WebSocket(
  `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/jobs/shell`,
);
const send = (message) => {
  if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
};
socket.onopen = () => {
  send({ type: 'initialize', sessionIdentifier, cols: terminal.cols, rows: terminal.rows });
  terminal.focus();
};
socket.onmessage = (event) => {
  const message = JSON.parse(event.data);
  if (message.type === 'data') terminal.write(message.data);
  else if (message.type === 'closed') status.textContent = 'The shell has ended.';
};
socket.onclose = (event) => {
  status.textContent = event.reason || 'Disconnected.';
};
terminal.onData((data) => send({ type: 'input', data }));
terminal.onResize(({ cols, rows }) => send({ type: 'resize', cols, rows }));
window.addEventListener('resize', () => fit.fit());
