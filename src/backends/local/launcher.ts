import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * A long-lived helper process that starts commands for the runtime: `ip`, `nft` and the pods'
 * supervisors. Forking ucompute itself costs milliseconds of its event loop per command once its
 * heap is large (page tables are copied); the launcher is small and forks on its own time, so a
 * pod's start costs ucompute one line written to a pipe.
 */
export interface Launcher {
  /** Runs a command to completion; the error names the command and carries its stderr. */
  run(file: string, args: readonly string[], input?: string): Promise<string>;
  /**
   * Starts a detached process (its own session: it outlives ucompute) whose output is appended to
   * two files; resolves with its pid once it runs. `onExit` is called when it ends, unless the
   * launcher ended first (it ends with ucompute's close, or if it crashes).
   */
  spawnDetached(command: DetachedCommand, onExit: () => void): Promise<number>;
  /** Ends the helper; detached processes keep running. */
  close(): void;
}

export interface DetachedCommand {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Files the process's stdout and stderr are appended to; none: they go nowhere. */
  stdout?: string;
  stderr?: string;
  /** Files opened read-only for the process as its descriptors 3, 4, … (e.g. what bubblewrap reads). */
  readFds?: string[];
  /**
   * Paths opened (O_PATH) without following a symlink anywhere on the way (see open-path.ts), as
   * the descriptors after `readFds`: what bubblewrap binds by descriptor, so that a path a job
   * changes after this open cannot redirect the bind. A path that cannot be opened so fails the start.
   */
  pathFds?: string[];
}

/** The protocol: one JSON object per line each way. */
export type LauncherRequest =
  | { id: number; run: { file: string; args: string[]; input?: string; timeoutMs: number } }
  | { id: number; spawn: DetachedCommand };
export type LauncherAnswer =
  | { id: number; stdout: string }
  | { id: number; pid: number }
  | { id: number; error: string }
  | { exited: number };

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
  const pending = new Map<
    number,
    { resolve: (a: LauncherAnswer) => void; reject: (e: Error) => void; onExit?: () => void }
  >();
  const running = new Map<number, () => void>();
  let closed = false;

  function holdLoop() {
    if (!child) return;
    const busy = pending.size > 0 || running.size > 0;
    for (const handle of [child, child.stdin, child.stdout] as { ref(): void; unref(): void }[]) {
      if (busy) handle.ref();
      else handle.unref();
    }
  }

  function launch(): ChildProcess {
    const started = spawn(process.execPath, [MAIN], { stdio: ['pipe', 'pipe', 'inherit'] });
    started.stdin!.on('error', () => undefined);
    createInterface({ input: started.stdout! }).on('line', (line) => {
      const a = JSON.parse(line) as LauncherAnswer;
      if ('exited' in a) {
        const onExit = running.get(a.exited);
        running.delete(a.exited);
        holdLoop();
        onExit?.();
        return;
      }
      const waiter = pending.get(a.id);
      pending.delete(a.id);
      // Registered now: its end may be on the very next line.
      if (waiter?.onExit && 'pid' in a) running.set(a.pid, waiter.onExit);
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
      // Its processes run on, unwatched until a restarted ucompute recovers them.
      running.clear();
    });
    return started;
  }

  function request(body: Omit<LauncherRequest, 'id'>, onExit?: () => void): Promise<LauncherAnswer> {
    if (closed) return Promise.reject(new Error('the launcher is closed'));
    child ??= launch();
    const id = nextId++;
    const answered = new Promise<LauncherAnswer>((resolve, reject) =>
      pending.set(id, { resolve, reject, ...(onExit ? { onExit } : {}) }),
    );
    child.stdin!.write(`${JSON.stringify({ id, ...body })}\n`);
    holdLoop();
    return answered;
  }

  return {
    async run(file, args, input) {
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
    async spawnDetached(command, onExit) {
      const a = await request({ spawn: command }, onExit);
      if (!('pid' in a)) throw new Error(`the launcher did not start ${command.file}`);
      return a.pid;
    },
    close() {
      closed = true;
      running.clear();
      if (!child) return;
      child.stdin!.end();
      holdLoop();
    },
  };
}
