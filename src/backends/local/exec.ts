import { execFile } from 'node:child_process';

/** Runs a command to completion; the error names the command and carries its stderr. */
export function run(file: string, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) {
        const detail = String(stderr).trim() || error.message;
        reject(new Error(`${file} ${args.join(' ')} failed: ${detail}`));
      } else {
        resolve(String(stdout));
      }
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** The absolute path of a program on PATH, or null. */
export async function which(program: string): Promise<string | null> {
  try {
    return (await run('/bin/sh', ['-c', 'command -v "$1"', 'which', program])).trim() || null;
  } catch {
    return null;
  }
}
