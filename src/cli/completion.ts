import { ADMIN_USAGE } from './admin.ts';
import { APPS_SHOW_USAGE } from './app-show.ts';
import { APPS_VALIDATE_USAGE } from './apps.ts';
import { parseCommandLine } from './args.ts';
import { CliError } from './errors.ts';
import { FILES_USAGE } from './files.ts';
import { IMAGES_USAGE } from './images.ts';
import { JOBS_USAGE } from './job-list.ts';
import { APPS_USAGE, CANCEL_USAGE, EXTEND_USAGE, LOGS_USAGE, PRODUCTS_USAGE, SHOW_USAGE } from './jobs.ts';
import { PLAN_USAGE } from './plan.ts';
import { RUN_USAGE } from './run.ts';
import { SSH_KEYS_USAGE } from './ssh-keys.ts';
import { BALANCE_USAGE, USAGE_USAGE } from './usage.ts';
import { VCJOB_USAGE } from './vcjob.ts';

export const COMPLETION_USAGE = `Usage: ucompute completion bash|zsh

Prints a completion script for the shell: commands, subcommands and options.
  bash:  source <(ucompute completion bash)      (or save it in ~/.local/share/bash-completion/completions/ucompute)
  zsh:   source <(ucompute completion zsh)       (or save it as _ucompute in a folder of $fpath)`;

/**
 * What each command completes: its subcommands and the options its usage text lists, so that the
 * scripts follow the usage texts. `serve`'s usage is spelled here, not imported: importing it would
 * load the backends just to print a script.
 */
function commandWords(): Record<string, string[]> {
  const options = (...usages: string[]) =>
    [...new Set(usages.join('\n').match(/--[a-z][a-z-]*/g) ?? [])].sort();
  return {
    serve: ['--config', '--port', '--host', '--data-dir', '--apps', '--products', '--backend', '--help'],
    plan: options(PLAN_USAGE),
    vcjob: ['run', ...options(VCJOB_USAGE)],
    images: ['ls', 'import', 'pull', 'build', 'rm', ...options(IMAGES_USAGE)],
    apps: ['show', 'validate', ...options(APPS_USAGE, APPS_SHOW_USAGE, APPS_VALIDATE_USAGE)],
    products: options(PRODUCTS_USAGE),
    run: options(RUN_USAGE),
    jobs: options(JOBS_USAGE),
    show: options(SHOW_USAGE),
    logs: ['-f', ...options(LOGS_USAGE)],
    files: ['ls', 'put', 'get', 'cat', 'mkdir', 'mv', 'cp', 'rm', ...options(FILES_USAGE)],
    cancel: options(CANCEL_USAGE),
    extend: options(EXTEND_USAGE),
    balance: options(BALANCE_USAGE),
    usage: options(USAGE_USAGE),
    admin: [
      ...['user', 'project', 'member', 'grant', 'token', 'users', 'projects', 'tokens', 'grants'],
      ...['revoke', 'disable', 'enable', 'remove-member', 'audit', ...options(ADMIN_USAGE)],
    ],
    completion: ['bash', 'zsh'],
    'ssh-keys': ['add', 'ls', 'rm', ...options(SSH_KEYS_USAGE)],
  };
}

function bashScript(words: Record<string, string[]>): string {
  const cases = Object.entries(words)
    .map(([command, w]) => `    ${command}) words="${w.join(' ')}" ;;`)
    .join('\n');
  return `# ucompute completion for bash: source <(ucompute completion bash)
_ucompute() {
  local cur=\${COMP_WORDS[COMP_CWORD]} words
  if [ "$COMP_CWORD" -eq 1 ]; then
    words="${Object.keys(words).join(' ')} --help"
  else
    case "\${COMP_WORDS[1]}" in
${cases}
      *) words="" ;;
    esac
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
# -o default: file names where no word fits (plan SPEC.json, --config FILE, run --file ...).
complete -o default -F _ucompute ucompute
`;
}

function zshScript(words: Record<string, string[]>): string {
  const cases = Object.entries(words)
    .map(([command, w]) => `    ${command}) candidates=(${w.join(' ')}) ;;`)
    .join('\n');
  return `#compdef ucompute
# ucompute completion for zsh: source <(ucompute completion zsh)
_ucompute() {
  local -a candidates
  if (( CURRENT == 2 )); then
    candidates=(${Object.keys(words).join(' ')} --help)
  else
    case $words[2] in
${cases}
    esac
  fi
  compadd -a candidates
  # File names too, past the command: plan SPEC.json, --config FILE, run --file ...
  (( CURRENT > 2 )) && _files
}
if (( $+functions[compdef] )); then compdef _ucompute ucompute; fi
`;
}

export async function completionCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(
    argv,
    { help: { type: 'boolean', short: 'h' } },
    COMPLETION_USAGE,
  );
  if (values.help) {
    process.stdout.write(`${COMPLETION_USAGE}\n`);
    return 0;
  }
  const shell = positionals[0];
  if (positionals.length !== 1 || (shell !== 'bash' && shell !== 'zsh')) {
    throw new CliError(`completion takes bash or zsh\n\n${COMPLETION_USAGE}`);
  }
  const words = commandWords();
  process.stdout.write(shell === 'bash' ? bashScript(words) : zshScript(words));
  return 0;
}
