import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

/**
 * The source's imports, as README "Layout" states them: no import cycle, and every import points
 * down the layers model ← catalog/volcano/store/storage/accounting ← plugins ← jobs ←
 * backends/server ← config ← cli (the command line starts the server and the backends, so it sits on top).
 * Type-only imports count too: they are dependencies of the code as read.
 */

const SRC = resolve(import.meta.dirname, '../src');
const WEB = resolve(import.meta.dirname, '../web/src');

const LAYER: Record<string, number> = {
  model: 0,
  catalog: 1,
  volcano: 1,
  store: 1,
  storage: 1,
  accounting: 1,
  plugins: 2,
  jobs: 3,
  // Sessions and the web proxy: on the jobs, under the server that serves them.
  interactive: 3.5,
  backends: 4,
  server: 4,
  // UCloud provider mode: the routes Core calls and the calls to Core, beside the server.
  provider: 4,
  // The configuration file's schema: the pipeline's settings and each backend's own.
  config: 4.5,
  cli: 5,
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(e.name) ? [path] : [];
  });
}

/** Relative specifiers of `import … from`, `export … from`, `import '…'` and `import('…')`. */
function importsOf(text: string): string[] {
  const found: string[] = [];
  const pattern = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;
  for (const m of text.matchAll(pattern)) found.push(m[1]!);
  return found;
}

/** The file → files graph of src, relative paths (`jobs/service.ts`). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const targets = importsOf(readFileSync(file, 'utf8')).map((spec) =>
      relative(SRC, resolve(dirname(file), spec)),
    );
    graph.set(relative(SRC, file), targets);
  }
  return graph;
}

/** Strongly connected components with more than one file, or a file importing itself (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const folderOf = (path: string) => path.split('/')[0]!;

test('every import resolves to a source file', () => {
  const graph = importGraph();
  const missing = [...graph].flatMap(([file, targets]) =>
    targets.filter((t) => !graph.has(t)).map((t) => `${file} → ${t}`),
  );
  assert.deepEqual(missing, []);
});

test('the source has no import cycle', () => {
  assert.deepEqual(cycles(importGraph()), []);
});

test('imports point down the layers', () => {
  const graph = importGraph();
  const wrong: string[] = [];
  for (const [file, targets] of graph) {
    const from = folderOf(file);
    assert.ok(from in LAYER, `${file}: its folder has no layer; add it to README and here`);
    for (const target of targets) {
      const to = folderOf(target);
      if (to === from) continue;
      if (!(LAYER[to]! < LAYER[from]!)) wrong.push(`${file} → ${target} (${from} may not import ${to})`);
    }
  }
  assert.deepEqual(wrong, []);
});

test("Volcano's API is only Volcano's: volcano/api imports nothing of the emulation or of ucompute", () => {
  const wrong = [...importGraph()].flatMap(([file, targets]) =>
    file.startsWith('volcano/api/')
      ? targets.filter((t) => !t.startsWith('volcano/api/')).map((t) => `${file} → ${t}`)
      : [],
  );
  assert.deepEqual(wrong, []);
});

/** A file has one job and stays under ~400 lines (STYLE; issue 22): the server's and the web's. */
test('no file of src or web/src is over 400 lines', () => {
  const MAX_LINES = 400;
  const over = [...sourceFiles(SRC), ...sourceFiles(WEB)]
    .map((file) => ({ file: relative(resolve(SRC, '..'), file), lines: linesOf(readFileSync(file, 'utf8')) }))
    .filter(({ lines }) => lines > MAX_LINES)
    .map(({ file, lines }) => `${file}: ${lines} lines`);
  assert.deepEqual(over, []);
});

/** Lines as `wc -l` counts them: a last line without its newline counts too. */
const linesOf = (text: string) => (text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0));

test('the checks find what they look for', () => {
  assert.deepEqual(
    importsOf(
      `import a from './a.ts';\nimport type { B } from "../b/b.ts";\nexport * from './c.ts';\nawait import('./d.ts');\nimport './e.ts';\nimport x from 'node:fs';`,
    ),
    ['./a.ts', '../b/b.ts', './c.ts', './d.ts', './e.ts'],
  );
  const graph = new Map([
    ['cli/jobs.ts', ['cli/run.ts']],
    ['cli/run.ts', ['cli/jobs.ts', 'model/job.ts']],
    ['model/job.ts', []],
  ]);
  assert.deepEqual(cycles(graph), [['cli/jobs.ts', 'cli/run.ts']]);
  assert.deepEqual([linesOf(''), linesOf('a\n'), linesOf('a\nb'), linesOf('a\n\nb\n')], [0, 1, 2, 3]);
});

/**
 * The local controller's decisions are pure (controller/decisions.ts, job-status.ts, end-messages.ts,
 * failure-reasons.ts, pod-deadline.ts, probes.ts): no Node
 * module (no file, process or timer), and of the backend's own files only the pure scheduler and
 * each other, besides type-only imports of the job's shape.
 */
test("the local controller's decisions import nothing with effects", () => {
  const PURE = [
    'backends/local/controller/decisions.ts',
    'backends/local/controller/job-status.ts',
    'backends/local/controller/end-messages.ts',
    'backends/local/controller/failure-reasons.ts',
    'backends/local/controller/pod-deadline.ts',
    'backends/local/controller/probes.ts',
  ];
  const ALLOWED = new Set([...PURE, 'backends/local/scheduler.ts']);
  const wrong: string[] = [];
  for (const file of PURE) {
    const text = readFileSync(join(SRC, file), 'utf8');
    for (const m of text.matchAll(/^import (type )?[^;]*?from '([^']+)';/gms)) {
      const [, typeOnly, spec] = m;
      if (spec!.startsWith('node:') || !spec!.startsWith('.')) wrong.push(`${file} → ${spec}`);
      else {
        const target = relative(SRC, resolve(dirname(join(SRC, file)), spec!));
        const pureLayer = !target.startsWith('backends/');
        if (!typeOnly && !pureLayer && !ALLOWED.has(target)) wrong.push(`${file} → ${target}`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});
