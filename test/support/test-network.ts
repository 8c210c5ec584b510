/**
 * A test's bridge name, apart from ./local-backend.ts so that what needs only the name (the browser
 * tests' `ucompute serve` children) does not import the whole local backend (~1 CPU-s a process).
 */
import { createHash } from 'node:crypto';

/**
 * A bridge of the test's own (remove it with removeBridgeNetwork once the backend closed), so the
 * test's namespaces are found by name; named after `folder` when given, so that a backend opened
 * again on its data folder (a restart) has its bridge again, as a configured one would. The subnet
 * is left to the backend: it derives one no other instance holds, under the host registry's lock.
 * A subnet drawn at random here was once the one another test's instance held, and the backend
 * rightly refused to start beside it.
 */
export function testNetwork(folder?: string) {
  const tag =
    folder === undefined
      ? process.pid.toString(36).slice(-4) + Math.random().toString(36).slice(2, 5)
      : createHash('sha256').update(folder).digest('hex').slice(0, 7);
  return { bridge: `ub${tag}`.slice(0, 9) };
}
