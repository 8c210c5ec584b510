/**
 * The launcher process (see launcher.ts): runs the commands ucompute asks for, so that ucompute's
 * own event loop never forks its large heap. Requests and answers are JSON lines on stdin and
 * stdout; it ends when its stdin closes.
 */
import { execFile } from 'node:child_process';
import { createInterface } from 'node:readline';
import { closeInheritedDescriptors } from './inherited-fds.ts';
import type { LauncherAnswer, LauncherRequest } from './launcher.ts';

// What ucompute inherited from its own parent is not passed on to the commands.
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

for await (const line of createInterface({ input: process.stdin })) {
  const request = JSON.parse(line) as LauncherRequest;
  runCommand(request.id, request.run);
}
process.exit(0);
