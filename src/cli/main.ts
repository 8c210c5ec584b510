import { COMMANDS, USAGE } from './commands.ts';
import { reportError } from './errors.ts';
import { type CliIo, cliIo, PROCESS_IO, withCliIo } from './io.ts';
import { didYouMean } from './suggest.ts';

/**
 * Runs `ucompute ARGV...` and answers its exit code: `bin/ucompute.js` with the process's own
 * input, output and environment; a program (the tests) may run it in its own process with others.
 */
export function main(argv: string[], io: CliIo = PROCESS_IO): Promise<number> {
  return withCliIo(io, () => run(argv));
}

async function run(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    cliIo().stdout.write(`${USAGE}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    const names = COMMANDS.map((c) => c.name);
    cliIo().stderr.write(`error: unknown command "${name}"${didYouMean(name, names)}\n\n${USAGE}\n`);
    return 2;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    return reportError(error);
  }
}
