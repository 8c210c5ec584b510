import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { Config } from '../config/config.ts';
import { type ResolvedPipelineConfig, resolvePipelineConfig } from '../model/config.ts';
import { inFile, ValidationError } from '../model/errors.ts';
import { parser } from '../model/validate.ts';
import { EMBEDDED_CONFIG } from './defaults.ts';

const config = parser(Config);

/** Reads the YAML configuration file; no file means the embedded defaults. */
export async function loadConfig(path: string | undefined): Promise<Config> {
  if (path === undefined) return structuredClone(EMBEDDED_CONFIG);
  const text = await readFile(path, 'utf8');
  let raw: unknown;
  try {
    raw = parse(text, { uniqueKeys: true }) ?? {};
  } catch (e) {
    throw new ValidationError([
      { path, message: `is not valid YAML: ${(e as Error).message.split('\n')[0]}` },
    ]);
  }
  if (!config.check(raw)) throw inFile(new ValidationError(config.issues(raw)), path);
  return raw;
}

export async function loadPipelineConfig(path: string | undefined): Promise<ResolvedPipelineConfig> {
  return resolvePipelineConfig(await loadConfig(path));
}
