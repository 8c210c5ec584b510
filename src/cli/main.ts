import { APPS_VALIDATE_USAGE, appsValidateCommand } from './apps.ts';
import { reportError } from './errors.ts';
import { planCommand } from './plan.ts';

const USAGE = `ucompute: a compute service for research platforms

Usage: ucompute COMMAND [options]

Commands:
  plan SPEC.json        print the Kubernetes objects a job would become, without running it
  apps validate DIR     check a catalogue folder of UCloud YAML v1 documents

Run "ucompute COMMAND --help" for a command's options.`;

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  plan: planCommand,
  apps: async (argv) => {
    if (argv[0] === 'validate') return appsValidateCommand(argv.slice(1));
    process.stderr.write(`${APPS_VALIDATE_USAGE}\n`);
    return 2;
  },
};

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  const run = COMMANDS[command];
  if (!run) {
    process.stderr.write(`error: unknown command "${command}"\n\n${USAGE}\n`);
    return 2;
  }
  try {
    return await run(rest);
  } catch (error) {
    return reportError(error);
  }
}

process.exitCode = await main(process.argv.slice(2));
