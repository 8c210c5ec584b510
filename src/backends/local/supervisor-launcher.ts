import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { PERL, programPath } from './programs.ts';

/**
 * The supervisors' launcher (programs/supervisor-launcher.pl): one long-lived Perl that compiled
 * the supervisor once and forks one per container. Each supervisor used to be a new Perl started
 * by the Node launcher: a fork of Node's heap (~3 ms of CPU) and a Perl's start and compile (~4.5
 * ms) per container, where a fork of this small Perl costs a fraction of a millisecond.
 */
export interface SupervisorStart {
  /** The supervisor's arguments, as supervisor.pl takes them (its name first: see supervisorCommand). */
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Files opened read-only for the supervisor as its descriptors 3, 4, … (e.g. what bubblewrap reads). */
  readFds?: string[];
  /**
   * Paths opened (O_PATH) without following a symlink anywhere on the way, as the descriptors after
   * `readFds`: what bubblewrap binds by descriptor, so that a path a job changes after this open
   * cannot redirect the bind. A path that cannot be opened so fails the start.
   */
  pathFds?: string[];
}

export interface SupervisorLauncher {
  /**
   * Starts a supervisor (its own session: it outlives ucompute); resolves with its pid once it runs
   * under the supervisor's name. `onExit` is called when it ends, unless the launcher ended first.
   */
  start(request: SupervisorStart, onExit: () => void): Promise<number>;
  /** Ends the launcher; the supervisors keep running. */
  close(): void;
}

/** Every field in hex: any bytes pass, and a space or a newline cannot split a field. */
const hex = (text: string) => Buffer.from(text).toString('hex');

/** A request line of the launcher's protocol (see supervisor-launcher.pl). */
export function requestLine(id: number, request: SupervisorStart): string {
  const counted = (items: readonly string[]) => [String(items.length), ...items];
  const fields = [
    request.cwd,
    ...counted(Object.entries(request.env).map(([name, value]) => `${name}=${value}`)),
    ...counted(request.readFds ?? []),
    ...counted(request.pathFds ?? []),
    ...request.args,
  ];
  return `${id} ${fields.map(hex).join(' ')}\n`;
}

/**
 * Starts the launcher when the first supervisor is asked for. It keeps ucompute's event loop alive
 * only while a start is pending or a supervisor it started runs.
 */
export function startSupervisorLauncher(): SupervisorLauncher {
  let child: ChildProcess | null = null;
  let nextId = 1;
  const pending = new Map<
    number,
    { resolve: (pid: number) => void; reject: (e: Error) => void; onExit: () => void }
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

  function answered(line: string) {
    const [kind, id, value] = line.split(' ');
    if (kind === 'exited') {
      const onExit = running.get(Number(id));
      running.delete(Number(id));
      holdLoop();
      onExit?.();
      return;
    }
    const waiter = pending.get(Number(id));
    pending.delete(Number(id));
    if (waiter && kind === 'pid') {
      // Registered now: its end may be on the very next line.
      running.set(Number(value), waiter.onExit);
      waiter.resolve(Number(value));
    } else waiter?.reject(new Error(Buffer.from(value ?? '', 'hex').toString()));
    holdLoop();
  }

  function launch(): ChildProcess {
    const started = spawn(PERL, [programPath('supervisor-launcher.pl')], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    started.stdin!.on('error', () => undefined);
    createInterface({ input: started.stdout! }).on('line', answered);
    // 'close', not 'exit': the answers it wrote before it ended are read first.
    started.once('close', (code, signal) => {
      if (child === started) child = null;
      const lost = new Error(`the supervisors' launcher ended (${signal ?? `exit code ${code}`})`);
      for (const waiter of pending.values()) waiter.reject(lost);
      pending.clear();
      // Its supervisors run on, unwatched until a restarted ucompute recovers them.
      running.clear();
    });
    return started;
  }

  return {
    start(request, onExit) {
      if (closed) return Promise.reject(new Error("the supervisors' launcher is closed"));
      child ??= launch();
      const id = nextId++;
      const pid = new Promise<number>((resolve, reject) => pending.set(id, { resolve, reject, onExit }));
      child.stdin!.write(requestLine(id, request));
      holdLoop();
      return pid;
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
