#!/bin/sh
# Chromium in the network namespace named by $UCOMPUTE_CHROMIUM_NETNS (made by launchChromium in
# chromium.ts): Playwright starts this file as the browser; `ip netns exec` execs Chromium in place,
# so the debugging pipe (fds 3, 4) and the process Playwright stops are Chromium's own. The browser
# is Debian's chromium-headless-shell, Chromium's old headless mode (what Playwright itself runs
# headless), started as its /usr/bin wrapper would but without that wrapper's shell, which stays
# the parent: in the browser lane its pages took ~38 % less CPU than /usr/bin/chromium's.
set -eu
exec ip netns exec "$UCOMPUTE_CHROMIUM_NETNS" /usr/lib/chromium/chromium-headless-shell "$@"
