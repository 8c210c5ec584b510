import { parseCommandLine } from './args.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

export const COMPLETION_USAGE = `Usage: ucompute completion bash|zsh

Prints a completion script for the shell: commands, subcommands and options.
  bash:  source <(ucompute completion bash)      (or save it in ~/.local/share/bash-completion/completions/ucompute)
  zsh:   source <(ucompute completion zsh)       (or save it as _ucompute in a folder of $fpath)`;

/** A command as the completion sees it. */
export interface Completed {
  name: string;
  /**
   * What the shell completes after it: `words` (subcommands, short options) and the options its
   * usage texts list, so that the scripts follow the usage texts. Loaded only for the scripts.
   */
  completes(): Promise<{ words?: readonly string[]; usages: string[] }>;
}

/** Each command's words: its own, then its options in order. */
async function commandWords(commands: Completed[]): Promise<Record<string, string[]>> {
  const entries = await Promise.all(
    commands.map(async (command) => {
      const { words = [], usages } = await command.completes();
      // Every command takes --help, whether its usage text says so or not.
      const options = new Set([...(usages.join('\n').match(/--[a-z][a-z-]*/g) ?? []), '--help']);
      return [command.name, [...words, ...[...options].sort()]];
    }),
  );
  return Object.fromEntries(entries);
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

export async function completionCommand(argv: string[], commands: Completed[]): Promise<number> {
  const { values, positionals } = parseCommandLine(
    argv,
    { help: { type: 'boolean', short: 'h' } },
    COMPLETION_USAGE,
  );
  if (values.help) {
    cliIo().stdout.write(`${COMPLETION_USAGE}\n`);
    return 0;
  }
  const shell = positionals[0];
  if (positionals.length !== 1 || (shell !== 'bash' && shell !== 'zsh')) {
    throw new CliError(`completion takes bash or zsh\n\n${COMPLETION_USAGE}`);
  }
  const words = await commandWords(commands);
  cliIo().stdout.write(shell === 'bash' ? bashScript(words) : zshScript(words));
  return 0;
}
