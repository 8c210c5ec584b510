import type { Completed } from './completion.ts';

/** A line of `ucompute --help`: how the command is called and what it does (one line or more). */
interface HelpLine {
  call: string;
  does: string | string[];
  /** Talks to `ucompute serve` (listed under the client commands). */
  client?: true;
}

/**
 * A command of `ucompute`: its lines in the overview, what runs it and what the shell completes
 * after it. Modules load on demand, so that `plan` does not start the server's libraries.
 */
export interface Command extends Completed {
  help: HelpLine[];
  run(argv: string[]): Promise<number>;
}

/**
 * What runs a command and what the shell completes after it, for a command whose module exports
 * its runner and its usage text; the module loads when either is wanted. `words`: subcommands and
 * short options, completed before the usage text's options.
 */
function fromModule<R extends string, U extends string>(
  load: () => Promise<Record<R, (argv: string[]) => Promise<number>> & Record<U, string>>,
  runner: R,
  usage: U,
  words?: readonly string[],
): Pick<Command, 'run' | 'completes'> {
  return {
    run: async (argv) => (await load())[runner](argv),
    completes: async () => ({ ...(words ? { words } : {}), usages: [(await load())[usage]] }),
  };
}

/**
 * Every command, in the order of `ucompute --help`: the overview, the dispatch and the completion
 * scripts are made from this table.
 */
export const COMMANDS: Command[] = [
  {
    name: 'serve',
    help: [{ call: 'serve', does: 'start the service (embedded defaults without a configuration)' }],
    run: async (argv) => (await import('./serve.ts')).serveCommand(argv),
    completes: async () => ({ usages: [(await import('./serve-usage.ts')).SERVE_USAGE] }),
  },
  {
    name: 'plan',
    help: [
      { call: 'plan SPEC.json', does: 'print the Kubernetes objects a job would become, without running it' },
    ],
    ...fromModule(() => import('./plan.ts'), 'planCommand', 'PLAN_USAGE'),
  },
  {
    name: 'apps',
    help: [
      { call: 'apps validate DIR', does: 'check a catalogue folder of UCloud YAML v1 documents' },
      { call: 'apps', does: 'list the applications', client: true },
      {
        call: 'apps show APP',
        does: "an application's parameters: name, type, mandatory, default, description",
        client: true,
      },
    ],
    run: async (argv) => {
      // `apps validate` is local; plain `apps` asks the service.
      if (argv[0] === 'validate') return (await import('./apps.ts')).appsValidateCommand(argv.slice(1));
      if (argv[0] === 'show') return (await import('./app-show.ts')).appsShowCommand(argv.slice(1));
      return (await import('./jobs.ts')).appsListCommand(argv);
    },
    completes: async () => ({
      words: ['show', 'validate'],
      usages: [
        (await import('./jobs.ts')).APPS_USAGE,
        (await import('./app-show.ts')).APPS_SHOW_USAGE,
        (await import('./apps.ts')).APPS_VALIDATE_USAGE,
      ],
    }),
  },
  {
    name: 'completion',
    help: [
      {
        call: 'completion bash|zsh',
        does: 'print a shell completion script (e.g. source <(ucompute completion bash))',
      },
    ],
    run: async (argv) => (await import('./completion.ts')).completionCommand(argv, COMMANDS),
    completes: async () => ({ words: ['bash', 'zsh'], usages: [] }),
  },
  {
    name: 'vcjob',
    help: [
      {
        call: 'vcjob run FILE.yaml',
        does: 'run a Volcano Job manifest on this machine (--follow streams its output)',
      },
    ],
    ...fromModule(() => import('./vcjob.ts'), 'vcjobCommand', 'VCJOB_USAGE', ['run']),
  },
  {
    name: 'images',
    help: [
      {
        call: 'images ls|import|pull|build|rm',
        does: "the local backend's image store (images import FILE --name NAME:TAG)",
      },
    ],
    run: async (argv) => (await import('./images.ts')).imagesCommand(argv),
    completes: async () => ({
      words: ['ls', 'import', 'pull', 'build', 'rm'],
      usages: [(await import('./images.ts')).IMAGES_USAGE],
    }),
  },
  {
    name: 'products',
    help: [{ call: 'products', does: 'list the machine types and their prices', client: true }],
    ...fromModule(() => import('./jobs.ts'), 'productsCommand', 'PRODUCTS_USAGE'),
  },
  {
    name: 'run',
    help: [
      {
        call: 'run APP[@VERSION]',
        does: 'submit a job (--param NAME=VALUE, --file, --product, --time, --wait, --follow)',
        client: true,
      },
    ],
    ...fromModule(() => import('./run.ts'), 'runCommand', 'RUN_USAGE'),
  },
  {
    name: 'jobs',
    help: [{ call: 'jobs', does: 'list jobs (--state, --app, --project, --limit, --watch)', client: true }],
    ...fromModule(() => import('./job-list.ts'), 'jobsCommand', 'JOBS_USAGE'),
  },
  {
    name: 'show',
    help: [
      {
        call: 'show ID',
        does: 'one job: state, times, expiry, output, exit codes, credits, updates',
        client: true,
      },
    ],
    ...fromModule(() => import('./jobs.ts'), 'showCommand', 'SHOW_USAGE'),
  },
  {
    name: 'files',
    help: [
      {
        call: 'files ls|put|get|cat|mkdir|mv|cp|rm',
        does: [
          "your drives' files (/home/<you>, /projects/<id>): e.g.",
          'files put moby.txt /home/<you>/books/moby.txt',
        ],
        client: true,
      },
    ],
    run: async (argv) => (await import('./files.ts')).filesCommand(argv),
    completes: async () => {
      const { FILES_COMMANDS, FILES_USAGE } = await import('./files.ts');
      return { words: FILES_COMMANDS, usages: [FILES_USAGE] };
    },
  },
  {
    name: 'logs',
    help: [
      {
        call: 'logs ID [-f]',
        does: "a job's output; -f follows it until the job ends (--rank N: one rank)",
        client: true,
      },
    ],
    ...fromModule(() => import('./jobs.ts'), 'logsCommand', 'LOGS_USAGE', ['-f']),
  },
  {
    name: 'cancel',
    help: [{ call: 'cancel ID...', does: 'stop jobs', client: true }],
    ...fromModule(() => import('./jobs.ts'), 'cancelCommand', 'CANCEL_USAGE'),
  },
  {
    name: 'suspend',
    help: [
      {
        call: 'suspend ID...',
        does: 'stop jobs for now, keeping them and their folders (resume queues them again)',
        client: true,
      },
    ],
    ...fromModule(() => import('./suspend.ts'), 'suspendCommand', 'SUSPEND_USAGE'),
  },
  {
    name: 'resume',
    help: [{ call: 'resume ID...', does: 'put suspended jobs back in the queue', client: true }],
    ...fromModule(() => import('./suspend.ts'), 'resumeCommand', 'RESUME_USAGE'),
  },
  {
    name: 'extend',
    help: [
      {
        call: 'extend ID DURATION',
        does: "add time to a job's time limit (45s, 90m, 2h, 1h30m, 1d)",
        client: true,
      },
    ],
    ...fromModule(() => import('./jobs.ts'), 'extendCommand', 'EXTEND_USAGE'),
  },
  {
    name: 'open',
    help: [
      { call: 'open ID [--rank N]', does: "a one-time link to a job's web app or desktop", client: true },
    ],
    ...fromModule(() => import('./open.ts'), 'openCommand', 'OPEN_USAGE'),
  },
  {
    name: 'top',
    help: [
      { call: 'top ID', does: 'what each rank of a running job uses (CPU, memory, GPU), live', client: true },
    ],
    ...fromModule(() => import('./top.ts'), 'topCommand', 'TOP_USAGE'),
  },
  {
    name: 'shell',
    help: [{ call: 'shell ID [--rank N]', does: 'a terminal in a running job', client: true }],
    ...fromModule(() => import('./shell.ts'), 'shellCommand', 'SHELL_USAGE'),
  },
  {
    name: 'web',
    help: [
      {
        call: 'web [--url-only]',
        does: 'a one-time link that signs a browser in to the web interface (opens it)',
        client: true,
      },
    ],
    ...fromModule(() => import('./web.ts'), 'webCommand', 'WEB_USAGE'),
  },
  {
    name: 'ssh-keys',
    help: [
      { call: 'ssh-keys add|ls|rm', does: 'your SSH public keys, which jobs with ssh accept', client: true },
    ],
    run: async (argv) => (await import('./ssh-keys.ts')).sshKeysCommand(argv),
    completes: async () => ({
      words: ['add', 'ls', 'rm'],
      usages: [(await import('./ssh-keys.ts')).SSH_KEYS_USAGE],
    }),
  },
  {
    name: 'balance',
    help: [{ call: 'balance', does: 'your credits left per product category', client: true }],
    ...fromModule(() => import('./usage.ts'), 'balanceCommand', 'BALANCE_USAGE'),
  },
  {
    name: 'usage',
    help: [
      {
        call: 'usage',
        does: 'credits charged per day or hour (--since 2026-11-01, --until, --by)',
        client: true,
      },
    ],
    ...fromModule(() => import('./usage.ts'), 'usageCommand', 'USAGE_USAGE'),
  },
  {
    name: 'admin',
    help: [
      {
        call: 'admin ...',
        does: 'administrators: users, projects, members, grants, tokens; lists, revoke, audit log',
        client: true,
      },
    ],
    run: async (argv) => (await import('./admin.ts')).adminCommand(argv),
    completes: async () => {
      const { ADMIN_COMMANDS, ADMIN_USAGE } = await import('./admin.ts');
      return { words: ADMIN_COMMANDS, usages: [ADMIN_USAGE] };
    },
  },
];

/** The overview's column of calls: a longer call has what it does on the next lines. */
const CALL_WIDTH = 22;

function helpLines(client: boolean): string {
  const indent = ' '.repeat(CALL_WIDTH + 2);
  return COMMANDS.flatMap((c) => c.help)
    .filter((line) => (line.client ?? false) === client)
    .map(({ call, does }) => {
      const [first, ...more] = typeof does === 'string' ? [does] : does;
      const head =
        call.length < CALL_WIDTH ? `  ${call.padEnd(CALL_WIDTH)}${first}` : `  ${call}\n${indent}${first}`;
      return [head, ...more.map((line) => `${indent}${line}`)].join('\n');
    })
    .join('\n');
}

/** `ucompute --help`. */
export const USAGE = `ucompute: a compute service for research platforms

Usage: ucompute COMMAND [options]

Commands:
${helpLines(false)}

Client commands (they talk to \`ucompute serve\`; see --url, --token, $UCOMPUTE_URL, $UCOMPUTE_TOKEN):
${helpLines(true)}

A job ID may be given as any unique prefix of it.

Run "ucompute COMMAND --help" for a command's options.`;
