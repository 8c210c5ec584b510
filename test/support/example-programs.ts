/**
 * The example apps' programs (Jupyter Notebook, the Xtigervnc desktop with its xterm) that browser
 * files start on this machine to stand for a job's, once per test process: several browser files in
 * one process (`--test-isolation=none`, the runner's browser lane) share them as they share
 * Chromium. What a file checks must not depend on what another did with them: a notebook page of
 * its own (a saved output would pass another's check), its own noVNC connection; `ONE_PLUS_ONE`
 * computes in any kernel there is, or one it starts.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Started, startDesktop, startJupyter } from './browser.ts';
import { ROOT } from './paths.ts';
import { perProcess } from './per-process.ts';

export interface ExamplePrograms {
  /** Jupyter on a Unix socket, serving a folder with an empty notebook test.ipynb. */
  jupyter: Started;
  /** Xtigervnc (RFB on a Unix socket) with a white xterm drawn on it. */
  desktop: Started;
}

const ARTIFACTS = join(ROOT, 'test-artifacts', 'browser');

async function start(): Promise<ExamplePrograms & { stop(): Promise<void> }> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'ucompute-example-programs-'));
  const [jupyter, desktop] = await Promise.allSettled([
    startJupyter(work, join(ARTIFACTS, 'jupyter.log')),
    startDesktop(work, join(ARTIFACTS, 'xtigervnc.log')),
  ]);
  const stop = async () => {
    for (const s of [jupyter, desktop]) if (s.status === 'fulfilled') await s.value.stop();
    rmSync(work, { recursive: true, force: true });
  };
  if (jupyter.status === 'rejected' || desktop.status === 'rejected') {
    await stop();
    throw jupyter.status === 'rejected' ? jupyter.reason : (desktop as PromiseRejectedResult).reason;
  }
  return { jupyter: jupyter.value, desktop: desktop.value, stop };
}

/** The process's Jupyter and desktop, started by the first file that asks. */
export const examplePrograms = perProcess(start);
