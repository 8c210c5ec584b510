/**
 * What the files of one test process share: several browser files in one process
 * (`--test-isolation=none`, the runner's browser lane) start a program or a server once, as they
 * share Chromium (chromium.ts). Started by the first file that asks; stopped when the process's last
 * test has run (after the last file's), not by a file's own `after`.
 */
import { after } from 'node:test';

/** `start` once per process at the first call of the function returned; its `stop` at the end. */
export function perProcess<T>(start: () => Promise<T & { stop(): Promise<void> }>): () => Promise<T> {
  let shared: Promise<T & { stop(): Promise<void> }> | undefined;
  after(async () => {
    const stopping = shared;
    shared = undefined;
    await (await stopping?.catch(() => undefined))?.stop();
  });
  return () => {
    shared ??= start();
    return shared;
  };
}
