/**
 * The launcher process (see launcher.ts): starts the commands ucompute asks for, so that ucompute's
 * own event loop never forks its large heap. Requests and answers are JSON lines on stdin and
 * stdout; it ends when its stdin closes, leaving detached processes running.
 */
import { execFile, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { closeInheritedDescriptors } from './inherited-fds.ts';
import type { LauncherAnswer, LauncherRequest } from './launcher.ts';
import { openWithoutSymlinks } from './open-path.ts';

// What ucompute inherited from its own parent is not passed on to supervisors and containers.
closeInheritedDescriptors();
// ucompute went away: nobody is left to answer.
process.stdout.on('error', () => process.exit(0));
const answer = (a: LauncherAnswer) => process.stdout.write(`${JSON.stringify(a)}\n`);

function runCommand(id: number, run: Extract<LauncherRequest, { run: unknown }>['run']) {
  const { file, args, input, timeoutMs } = run;
  const options = { maxBuffer: 16 * 1024 * 1024, timeout: timeoutMs, killSignal: 'SIGKILL' as const };
  const started = Date.now();
  const child = execFile(file, args, options, (error, stdout, stderr) => {
    if (error) {
      const late = error.killed && Date.now() - started >= timeoutMs;
      const detail = late
        ? `it did not finish within ${timeoutMs / 1000} s`
        : String(stderr).trim() || error.message;
      answer({ id, error: `${file} ${args.join(' ')} failed: ${detail}` });
    } else answer({ id, stdout: String(stdout) });
  });
  child.stdin?.on('error', () => undefined);
  if (input !== undefined) child.stdin?.end(input);
}

function spawnDetached(id: number, request: Extract<LauncherRequest, { spawn: unknown }>['spawn']) {
  const fds: number[] = [];
  try {
    const output: ('ignore' | number)[] = ['ignore', 'ignore'];
    if (request.stdout && request.stderr) {
      for (const [i, file] of [request.stdout, request.stderr].entries()) {
        output[i] = openSync(file, 'a', 0o600);
        fds.push(output[i] as number);
      }
    }
    // Each one kept as soon as it is open: the finally closes them whatever fails after.
    const kept = (fd: number) => {
      fds.push(fd);
      return fd;
    };
    const extra = [
      ...(request.readFds ?? []).map((file) => kept(openSync(file, 'r'))),
      ...(request.pathFds ?? []).map((path) => kept(openWithoutSymlinks(path))),
    ];
    const child = spawn(request.file, request.args, {
      detached: true,
      stdio: ['ignore', ...output, ...extra],
      cwd: request.cwd,
      env: request.env,
    });
    child.once('spawn', () => answer({ id, pid: child.pid! }));
    child.once('error', (error) => answer({ id, error: error.message }));
    child.once('exit', () => answer({ exited: child.pid! }));
  } catch (error) {
    answer({ id, error: (error as Error).message });
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  const request = JSON.parse(line) as LauncherRequest;
  if ('run' in request) runCommand(request.id, request.run);
  else spawnDetached(request.id, request.spawn);
}
// Detached children keep running; only our pipes to them go.
process.exit(0);
