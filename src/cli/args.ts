import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { CLIENT_OPTIONS, type ClientFlags } from './client.ts';
import { CliError } from './errors.ts';
import { cliIo } from './io.ts';

/**
 * `parseArgs` for one command: a mistake on the command line becomes a short sentence followed by
 * the command's usage, instead of Node's parser text.
 */
export function parseCommandLine<O extends ParseArgsOptionsConfig>(
  argv: string[],
  options: O,
  usage: string,
) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, options });
  } catch (error) {
    throw new CliError(`${usageMistake(error)}\n\n${usage}`);
  }
}

/** Node's parser error as a person would say it; anything else is not a parser error and goes up. */
function usageMistake(error: unknown): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS') || typeof message !== 'string')
    throw error;
  const option = /'(-{1,2}[^' ]+)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option ${option}`;
  if (message.includes('argument missing')) return `${option} needs a value`;
  if (message.includes('does not take an argument')) return `${option} takes no value`;
  return message.split('.')[0]!;
}

export type OptionValues = Record<string, string | boolean | undefined>;

/** Parses a client command's options: the connection's own plus `extra`; prints usage on --help. */
export function parseClientCommand(argv: string[], usage: string, extra: ParseArgsOptionsConfig) {
  const parsed = parseCommandLine(argv, { ...CLIENT_OPTIONS, ...extra }, usage);
  const values = parsed.values as OptionValues;
  const help = values.help === true;
  if (help) cliIo().stdout.write(`${usage}\n`);
  return { values, positionals: parsed.positionals, help };
}

export function clientFlags(values: OptionValues): ClientFlags {
  const s = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  return { url: s('url'), token: s('token'), 'data-dir': s('data-dir'), project: s('project') };
}

/** A string option's value, or undefined. */
export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}
