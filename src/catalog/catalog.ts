import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { isScalar, LineCounter, parseAllDocuments } from 'yaml';
import type { Application, ResolvedApplication, Tool } from '../model/application.ts';
import { type Issue, ValidationError } from '../model/errors.ts';
import { readDocument } from './document.ts';

/** A loaded catalogue: applications with their tools resolved, by name and version. */
export interface Catalog {
  /** Every application; the same array on every call (the server summarises it once per catalogue). */
  list(): ResolvedApplication[];
  find(name: string, version: string): ResolvedApplication | undefined;
  versions(name: string): string[];
}

export interface SourceFile {
  path: string;
  text: string;
}

/** Where a catalogue problem is: file, 1-based document number and line, then the field. */
export interface CatalogIssue extends Issue {
  file: string;
  document: number;
  line?: number;
}

export function formatCatalogIssue(issue: CatalogIssue, severity: 'error' | 'warning' = 'error'): string {
  const where = `${issue.file}${issue.line !== undefined ? `:${issue.line}` : ''} (document ${issue.document})`;
  return `${where} ${severity === 'warning' ? 'warning: ' : ''}${issue.path || '(document)'}: ${issue.message}`;
}

const key = (name: string, version: string) => `${name}@${version}`;

/**
 * Parses and checks every document of every file; returns the catalogue, every problem found, and
 * the warnings about what was ignored (as UCloud ignores it) without making a document unusable.
 */
export function buildCatalog(files: readonly SourceFile[]): {
  catalog: Catalog;
  issues: CatalogIssue[];
  warnings: CatalogIssue[];
} {
  const issues: CatalogIssue[] = [];
  const warnings: CatalogIssue[] = [];
  /** Tools whose documents were refused, so an application naming one is told why it has none. */
  const refusedTools = new Set<string>();
  const apps: { application: Application; file: string; document: number; line?: number }[] = [];
  const tools = new Map<string, Tool>();

  for (const file of files) {
    const lineCounter = new LineCounter();
    const docs = parseAllDocuments(file.text, { lineCounter, uniqueKeys: true, prettyErrors: false });
    const list = Array.isArray(docs) ? docs : [];
    if (!Array.isArray(docs)) {
      issues.push({ file: file.path, document: 1, path: '', message: 'is not a YAML stream' });
    }
    list.forEach((doc, index) => {
      const document = index + 1;
      const lineOf = (path: (string | number)[]): number | undefined => {
        for (let n = path.length; n >= 0; n--) {
          const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | undefined;
          if (node?.range) return lineCounter.linePos(node.range[0]).line;
        }
        return undefined;
      };
      if (doc.errors.length > 0) {
        for (const e of doc.errors) {
          issues.push({
            file: file.path,
            document,
            line: lineCounter.linePos(e.pos[0]).line,
            path: '',
            message: e.message.split('\n')[0] ?? 'is not valid YAML',
          });
        }
        return;
      }
      let value: unknown;
      try {
        value = doc.toJS({ maxAliasCount: 100 });
      } catch (e) {
        // toJS throws on aliases it cannot resolve and on expansions past maxAliasCount ("billion laughs").
        issues.push({ file: file.path, document, path: '', message: (e as Error).message.split('\n')[0]! });
        return;
      }
      if (value === null || value === undefined) return; // an empty document, e.g. after a trailing `---`
      const sourceText = (path: readonly (string | number)[]) => {
        const node = doc.getIn(path, true);
        return isScalar(node) ? node.source : undefined;
      };
      const result = readDocument(value, sourceText);
      const locate = (issue: Issue): CatalogIssue => {
        const line = lineOf(splitPath(issue.path));
        return { file: file.path, document, ...(line !== undefined ? { line } : {}), ...issue };
      };
      issues.push(...result.issues.map(locate));
      warnings.push(...result.warnings.map(locate));
      if (!result.document && isToolDocument(value)) {
        const text = (field: 'name' | 'version') => sourceText([field]) ?? String(value[field]);
        refusedTools.add(key(text('name'), text('version')));
      }
      // A v2 application document is its own tool too.
      const read = result.document;
      const v2 = read?.kind === 'application-v2' ? read.resolved : undefined;
      const tool = read?.kind === 'tool' ? read.tool : v2?.tool;
      const application = read?.kind === 'application' ? read.application : v2?.application;
      if (tool) {
        const t = tool;
        if (tools.has(key(t.name, t.version))) {
          issues.push({
            file: file.path,
            document,
            path: 'name',
            message: `tool ${key(t.name, t.version)} is defined twice`,
          });
        }
        tools.set(key(t.name, t.version), t);
      }
      if (application) {
        const line = lineOf([v2 ? 'software' : 'tool']);
        apps.push({
          application,
          file: file.path,
          document,
          ...(line ? { line } : {}),
        });
      }
    });
  }

  const resolved = new Map<string, ResolvedApplication>();
  const versions = new Map<string, string[]>();
  for (const { application, file, document, line } of apps) {
    const { name, version } = application.metadata;
    const ref = application.invocation.tool;
    const tool = tools.get(key(ref.name, ref.version));
    const at = { file, document, ...(line !== undefined ? { line } : {}) };
    if (!tool) {
      const refused = refusedTools.has(key(ref.name, ref.version));
      issues.push({
        ...at,
        path: 'tool',
        message: refused
          ? `names tool ${key(ref.name, ref.version)}, whose document was refused`
          : `names no tool in the catalogue (${key(ref.name, ref.version)})`,
      });
      continue;
    }
    if (resolved.has(key(name, version))) {
      issues.push({ ...at, path: 'version', message: `application ${key(name, version)} is defined twice` });
      continue;
    }
    resolved.set(key(name, version), { application, tool });
    versions.set(name, [...(versions.get(name) ?? []), version]);
  }

  const all = [...resolved.values()].sort((a, b) =>
    a.application.metadata.name === b.application.metadata.name
      ? compareVersions(a.application.metadata.version, b.application.metadata.version)
      : a.application.metadata.name.localeCompare(b.application.metadata.name),
  );
  const catalog: Catalog = {
    list: () => all,
    find: (name, version) => resolved.get(key(name, version)),
    versions: (name) => [...(versions.get(name) ?? [])].sort(compareVersions),
  };
  return { catalog, issues, warnings };
}

function isToolDocument(value: unknown): value is { tool: unknown; name: unknown; version: unknown } {
  return (
    typeof value === 'object' && value !== null && 'tool' in value && 'name' in value && 'version' in value
  );
}

/** Loads every `.yml`/`.yaml` file under the folders as one catalogue; any problem makes it throw them all. */
export async function loadCatalog(dirs: string | readonly string[]): Promise<Catalog> {
  const files = await Promise.all((typeof dirs === 'string' ? [dirs] : dirs).map(readCatalogFiles));
  const { catalog, issues } = buildCatalog(files.flat());
  if (issues.length > 0) {
    throw new ValidationError(issues.map((i) => ({ path: '', message: formatCatalogIssue(i) })));
  }
  return catalog;
}

export async function readCatalogFiles(dir: string): Promise<SourceFile[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const found = entries
    .filter((e) => (e.isFile() || e.isSymbolicLink()) && /\.ya?ml$/.test(e.name))
    .map((e) => join(e.parentPath, e.name))
    // A ConfigMap volume (the Helm chart's catalogue) keeps its files in a hidden `..<time>` folder,
    // linked as `..data` and from each visible name: the visible links are read, the hidden copies not.
    .filter(
      (path) =>
        !relative(dir, path)
          .split(sep)
          .some((part) => part.startsWith('..')),
    );
  const isFile = await Promise.all(found.map(async (path) => (await stat(path)).isFile()));
  const paths = found.filter((_, i) => isFile[i]).sort();
  return Promise.all(
    paths.map(async (path) => ({ path: relative(process.cwd(), path), text: await readFile(path, 'utf8') })),
  );
}

function splitPath(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (m[2] !== undefined) out.push(Number(m[2]));
    else if (m[1] !== undefined) out.push(m[1]);
  }
  return out;
}

/** Orders versions like "1.2.10" after "1.2.9"; non-numeric parts compare as text. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/);
  const pb = b.split(/[.-]/);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? '';
    const y = pb[i] ?? '';
    const nx = Number(x);
    const ny = Number(y);
    const c =
      x !== '' && y !== '' && Number.isFinite(nx) && Number.isFinite(ny) ? nx - ny : x.localeCompare(y);
    if (c !== 0) return c;
  }
  return 0;
}
