import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { run } from './exec.ts';
import { type SupervisorStart, startSupervisorLauncher } from './supervisor-launcher.ts';

/**
 * Long-lived helper processes that start what the runtime runs: a Node one for commands (`ip`,
 * `nft`, the namespace set-up) and a Perl one for the pods' supervisors (supervisor-launcher.ts).
 * Forking ucompute itself costs milliseconds of its event loop per command once its heap is large
 * (page tables are copied); the helpers are small and fork on their own time, so a pod's start
 * costs ucompute one line written to a pipe.
 */
export interface Launcher {
  /** Runs a command to completion; the error names the command and carries its stderr. */
  run(file: string, args: readonly string[], input?: string): Promise<string>;
  /** Starts a container's supervisor (see supervisor-launcher.ts); resolves with its pid. */
  startSupervisor(request: SupervisorStart, onExit: () => void): Promise<number>;
  /** Ends the helpers; supervisors keep running. */
  close(): void;
}

/** The protocol: one JSON object per line each way. */
export type LauncherRequest = {
  id: number;
  run: { file: string; args: string[]; input?: string; timeoutMs: number };
};
export type LauncherAnswer = { id: number; stdout: string } | { id: number; error: string };

const MAIN = fileURLToPath(new URL('./launcher-main.ts', import.meta.url));

/**
 * How long a command (`ip`, `nft`, the namespace set-up) may run: they take milliseconds, but one
 * blocked in the kernel would hold up its pod's start or stop, and ucompute's close, for ever.
 */
const COMMAND_TIMEOUT_MS = 120_000;

/**
 * Starts the launcher. It keeps ucompute's event loop alive only while a command it ran is
 * pending or a process it started runs, as the commands themselves would. A command still running
 * after `commandTimeoutMs` is killed and fails, saying so.
 */
export function startLauncher({ commandTimeoutMs = COMMAND_TIMEOUT_MS } = {}): Launcher {
  let child: ChildProcess | null = null;
  let nextId = 1;
  const pending = new Map<number, { resolve: (a: LauncherAnswer) => void; reject: (e: Error) => void }>();
  let closed = false;
  const supervisors = startSupervisorLauncher();

  function holdLoop() {
    if (!child) return;
    for (const handle of [child, child.stdin, child.stdout] as { ref(): void; unref(): void }[]) {
      if (pending.size > 0) handle.ref();
      else handle.unref();
    }
  }

  function launch(): ChildProcess {
    const started = spawn(process.execPath, [MAIN], { stdio: ['pipe', 'pipe', 'inherit'] });
    started.stdin!.on('error', () => undefined);
    createInterface({ input: started.stdout! }).on('line', (line) => {
      const a = JSON.parse(line) as LauncherAnswer;
      const waiter = pending.get(a.id);
      pending.delete(a.id);
      holdLoop();
      if (!waiter) return;
      if ('error' in a) waiter.reject(new Error(a.error));
      else waiter.resolve(a);
    });
    started.once('exit', (code, signal) => {
      if (child === started) child = null;
      const lost = new Error(`the launcher process ended (${signal ?? `exit code ${code}`})`);
      for (const waiter of pending.values()) waiter.reject(lost);
      pending.clear();
    });
    return started;
  }

  function request(body: Omit<LauncherRequest, 'id'>): Promise<LauncherAnswer> {
    if (closed) return Promise.reject(new Error('the launcher is closed'));
    child ??= launch();
    const id = nextId++;
    const answered = new Promise<LauncherAnswer>((resolve, reject) => pending.set(id, { resolve, reject }));
    child.stdin!.write(`${JSON.stringify({ id, ...body })}\n`);
    holdLoop();
    return answered;
  }

  return {
    async run(file, args, input) {
      // A pod destroyed after close (ucompute stopping while a job's pods go) still deletes its
      // namespace and rules: the helper is gone, so the command is started from here.
      if (closed) return run(file, args, input);
      const a = await request({
        run: {
          file,
          args: [...args],
          ...(input !== undefined ? { input } : {}),
          timeoutMs: commandTimeoutMs,
        },
      });
      return 'stdout' in a ? a.stdout : '';
    },
    startSupervisor: (request, onExit) => supervisors.start(request, onExit),
    close() {
      closed = true;
      supervisors.close();
      if (!child) return;
      child.stdin!.end();
      holdLoop();
    },
  };
}
