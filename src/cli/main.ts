import { reportError } from './errors.ts';

const USAGE = `ucompute: a compute service for research platforms

Usage: ucompute COMMAND [options]

Commands:
  serve                 start the service (embedded defaults without a configuration)
  plan SPEC.json        print the Kubernetes objects a job would become, without running it
  apps validate DIR     check a catalogue folder of UCloud YAML v1 documents
  completion bash|zsh   print a shell completion script (e.g. source <(ucompute completion bash))
  vcjob run FILE.yaml   run a Volcano Job manifest on this machine (--follow streams its output)
  images ls|import|pull|build|rm
                        the local backend's image store (images import FILE --name NAME:TAG)

Client commands (they talk to \`ucompute serve\`; see --url, --token, $UCOMPUTE_URL, $UCOMPUTE_TOKEN):
  apps                  list the applications
  apps show APP         an application's parameters: name, type, mandatory, default, description
  products              list the machine types and their prices
  run APP[@VERSION]     submit a job (--param NAME=VALUE, --file, --product, --time, --wait, --follow)
  jobs                  list jobs (--state, --app, --project, --limit, --watch)
  show ID               one job: state, times, expiry, output, exit codes, credits, updates
  files ls|put|get|cat|mkdir|mv|cp|rm
                        your drives' files (/home/<you>, /projects/<id>): e.g.
                        files put moby.txt /home/<you>/books/moby.txt
  logs ID [-f]          a job's output; -f follows it until the job ends (--rank N: one rank)
  cancel ID...          stop jobs
  extend ID DURATION    add time to a job's time limit (45s, 90m, 2h, 1h30m, 1d)
  open ID [--rank N]    a one-time link to a job's web app or desktop
  shell ID [--rank N]   a terminal in a running job
  web [--url-only]      a one-time link that signs a browser in to the web interface (opens it)
  ssh-keys add|ls|rm    your SSH public keys, which jobs with ssh accept
  balance               your credits left per product category
  usage                 credits charged per day or hour (--since 2026-11-01, --until, --by)
  admin ...             administrators: users, projects, members, grants of credits, tokens

A job ID may be given as any unique prefix of it.

Run "ucompute COMMAND --help" for a command's options.`;

// Commands load their modules on demand, so that `plan` does not start the server's libraries.
const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  serve: async (argv) => (await import('./serve.ts')).serveCommand(argv),
  plan: async (argv) => (await import('./plan.ts')).planCommand(argv),
  vcjob: async (argv) => (await import('./vcjob.ts')).vcjobCommand(argv),
  images: async (argv) => (await import('./images.ts')).imagesCommand(argv),
  apps: async (argv) => {
    // `apps validate` is local; plain `apps` asks the service.
    if (argv[0] === 'validate') return (await import('./apps.ts')).appsValidateCommand(argv.slice(1));
    if (argv[0] === 'show') return (await import('./app-show.ts')).appsShowCommand(argv.slice(1));
    return (await import('./jobs.ts')).appsListCommand(argv);
  },
  products: async (argv) => (await import('./jobs.ts')).productsCommand(argv),
  run: async (argv) => (await import('./run.ts')).runCommand(argv),
  jobs: async (argv) => (await import('./job-list.ts')).jobsCommand(argv),
  show: async (argv) => (await import('./jobs.ts')).showCommand(argv),
  logs: async (argv) => (await import('./jobs.ts')).logsCommand(argv),
  files: async (argv) => (await import('./files.ts')).filesCommand(argv),
  cancel: async (argv) => (await import('./jobs.ts')).cancelCommand(argv),
  extend: async (argv) => (await import('./jobs.ts')).extendCommand(argv),
  balance: async (argv) => (await import('./usage.ts')).balanceCommand(argv),
  usage: async (argv) => (await import('./usage.ts')).usageCommand(argv),
  admin: async (argv) => (await import('./admin.ts')).adminCommand(argv),
  completion: async (argv) => (await import('./completion.ts')).completionCommand(argv),
  open: async (argv) => (await import('./open.ts')).openCommand(argv),
  shell: async (argv) => (await import('./shell.ts')).shellCommand(argv),
  web: async (argv) => (await import('./web.ts')).webCommand(argv),
  'ssh-keys': async (argv) => (await import('./ssh-keys.ts')).sshKeysCommand(argv),
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
