// Loads the desktop page's module (vnc.js and noVNC's modules under it). Chromium aborts a page's
// pending loads with ERR_NETWORK_CHANGED whenever the host's network interfaces change (on a
// compute host, every job's pod link does), and a module graph that failed once stays failed for
// the document: so the page reloads itself, a few times at most, the session secret still in its
// fragment (vnc.js takes it out of the address only once it runs).
const RELOADS = 'ucompute-vnc-reloads';
const MAX_RELOADS = 5;

import('/sessions/assets/vnc.js').then(
  () => sessionStorage.removeItem(RELOADS),
  (error) => {
    const reloads = Number(sessionStorage.getItem(RELOADS) ?? '0');
    const status = document.getElementById('status');
    if (reloads >= MAX_RELOADS) {
      document.body.dataset.state = 'closed';
      status.textContent = `The desktop page could not load: ${error}`;
      return;
    }
    sessionStorage.setItem(RELOADS, String(reloads + 1));
    status.textContent = 'Loading the desktop page again…';
    setTimeout(() => location.reload(), 500 * (reloads + 1));
  },
);
