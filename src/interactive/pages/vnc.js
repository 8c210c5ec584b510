// The desktop page: noVNC on the VNC relay. The session secret comes in the URL's fragment (never
// sent to a server) and travels as a WebSocket subprotocol; the password is asked for only when
// the application has one.
import RFB from '/sessions/assets/novnc/core/rfb.js';

const secret = location.hash.slice(1);
history.replaceState(null, '', location.pathname + location.search);
const query = new URLSearchParams(location.search);
const status = document.getElementById('status');
const url =
  `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/jobs/vnc` +
  `?jobId=${encodeURIComponent(query.get('jobId') ?? '')}&rank=${encodeURIComponent(query.get('rank') ?? '0')}`;
const rfb = new RFB(document.getElementById('screen'), url, { wsProtocols: ['binary', `session.${secret}`] });
rfb.scaleViewport = true;
rfb.addEventListener('connect', () => {
  status.textContent = '';
});
rfb.addEventListener('disconnect', (event) => {
  status.textContent = event.detail.clean ? 'The desktop has closed.' : 'Disconnected.';
});
rfb.addEventListener('credentialsrequired', () => {
  const password = query.get('password') === '1' ? prompt('Password of the desktop') : '';
  rfb.sendCredentials({ password: password ?? '' });
});
