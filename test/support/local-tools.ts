/** What the tests of the local backend's real runtime need from the machine. */
import { execFileSync } from 'node:child_process';

function has(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Options for `test()`: nothing when every tool is here. Otherwise the test is skipped with the
 * reason, except under CI, where a missing tool must fail the run rather than hide a test.
 */
export function needs(...commands: string[]): { skip?: string } {
  const missing = commands.filter((c) => !has(c));
  if (process.getuid?.() !== 0) missing.push('root');
  if (missing.length === 0) return {};
  const reason = `needs ${missing.join(', ')}`;
  if (process.env.CI === 'true') throw new Error(`CI must have what these tests need: ${reason}`);
  return { skip: reason };
}
