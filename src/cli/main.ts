import { COMMANDS, USAGE } from './commands.ts';
import { reportError } from './errors.ts';

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    process.stderr.write(`error: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    return reportError(error);
  }
}

process.exitCode = await main(process.argv.slice(2));
