/** What the tests of the local backend's real runtime need from the machine. */
import { which } from '../../src/backends/local/exec.ts';

/**
 * Options for `test()`: nothing when every tool is here. Otherwise the test is skipped with the
 * reason, except under CI, where a missing tool must fail the run rather than hide a test.
 */
export async function needs(...commands: string[]): Promise<{ skip?: string }> {
  const found = await Promise.all(commands.map(which));
  const missing = commands.filter((_, i) => found[i] === null);
  if (process.getuid?.() !== 0) missing.push('root');
  if (missing.length === 0) return {};
  const reason = `needs ${missing.join(', ')}`;
  if (process.env.CI === 'true') throw new Error(`CI must have what these tests need: ${reason}`);
  return { skip: reason };
}
