import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { PipelineConfig, type ResolvedPipelineConfig, resolvePipelineConfig } from '../model/config.ts';
import { inFile, ValidationError } from '../model/errors.ts';
import { parser } from '../model/validate.ts';

const pipelineConfig = parser(PipelineConfig);

/** Reads the YAML configuration file; no file means the embedded defaults. */
export async function loadPipelineConfig(path: string | undefined): Promise<ResolvedPipelineConfig> {
  if (path === undefined) return resolvePipelineConfig();
  const text = await readFile(path, 'utf8');
  let raw: unknown;
  try {
    raw = parse(text, { uniqueKeys: true }) ?? {};
  } catch (e) {
    throw new ValidationError([
      { path, message: `is not valid YAML: ${(e as Error).message.split('\n')[0]}` },
    ]);
  }
  if (!pipelineConfig.check(raw)) throw inFile(new ValidationError(pipelineConfig.issues(raw)), path);
  return resolvePipelineConfig(raw);
}
