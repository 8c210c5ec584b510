// The desktop page: noVNC on the VNC relay. The session secret comes in the URL's fragment (never
// sent to a server) and travels as a WebSocket subprotocol; the password is asked for only when
// the application has one. The desktop follows the window's size (the VNC server is asked to
// resize; noVNC scales where it cannot), goes full screen, and shares its clipboard through a
// text box. `body[data-state]` says where the connection is: connecting, connected, closed.
import RFB from '/sessions/assets/novnc/core/rfb.js';

const secret = location.hash.slice(1);
history.replaceState(null, '', location.pathname + location.search);
const query = new URLSearchParams(location.search);
const status = document.getElementById('status');
const screen = document.getElementById('screen');
const clipboard = document.getElementById('clipboard');
const url =
  `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/jobs/vnc` +
  `?jobId=${encodeURIComponent(query.get('jobId') ?? '')}&rank=${encodeURIComponent(query.get('rank') ?? '0')}`;

/**
 * Tries again while the desktop is still starting (the relay closes at once until it answers), for
 * up to two minutes from the page's opening: on a loaded machine a desktop's X server alone can
 * take longer than the quarter minute ten tries gave.
 */
const START_WAIT_MS = 120_000;
const RETRY_MS = 1500;
const opened = Date.now();
let rfb;

function say(state, text) {
  document.body.dataset.state = state;
  status.textContent = text;
}

function connect() {
  let connected = false;
  rfb = new RFB(screen, url, { wsProtocols: ['binary', `session.${secret}`] });
  rfb.resizeSession = true;
  rfb.scaleViewport = true;
  rfb.addEventListener('connect', () => {
    connected = true;
    say('connected', 'Connected');
  });
  rfb.addEventListener('disconnect', (event) => {
    if (!connected && Date.now() - opened < START_WAIT_MS) {
      say('connecting', 'Waiting for the desktop to start…');
      setTimeout(connect, RETRY_MS);
      return;
    }
    say('closed', event.detail.clean ? 'The desktop has closed.' : 'Disconnected.');
  });
  rfb.addEventListener('credentialsrequired', () => {
    const password = query.get('password') === '1' ? prompt('Password of the desktop') : '';
    rfb.sendCredentials({ password: password ?? '' });
  });
  rfb.addEventListener('clipboard', (event) => {
    clipboard.value = event.detail.text;
  });
}

document.getElementById('send-clipboard').addEventListener('click', () => {
  rfb?.clipboardPasteFrom(clipboard.value);
  rfb?.focus();
});
const toggle = document.getElementById('clipboard-toggle');
toggle.addEventListener('click', () => {
  const panel = document.getElementById('clipboard-panel');
  panel.hidden = !panel.hidden;
  toggle.setAttribute('aria-expanded', String(!panel.hidden));
  if (!panel.hidden) clipboard.focus();
});
const fullscreen = document.getElementById('fullscreen');
fullscreen.addEventListener('click', () => {
  if (document.fullscreenElement) void document.exitFullscreen();
  else void document.documentElement.requestFullscreen();
});
document.addEventListener('fullscreenchange', () => {
  fullscreen.textContent = document.fullscreenElement ? 'Leave full screen' : 'Full screen';
});

connect();
