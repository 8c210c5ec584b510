#!/bin/sh
# Chromium in the network namespace named by $UCOMPUTE_CHROMIUM_NETNS (made by launchChromium in
# chromium.ts): Playwright starts this file as the browser; `ip netns exec` execs Chromium in place,
# so the debugging pipe (fds 3, 4) and the process Playwright stops are Chromium's own.
set -eu
exec ip netns exec "$UCOMPUTE_CHROMIUM_NETNS" /usr/bin/chromium "$@"
