/**
 * What V8 CPU profiles (`--cpu-prof`; `node test/run-suite.ts --cpu-prof=DIR` writes one per test
 * process) spent their busy samples on (issue 22: the test processes' own CPU). Each sample (idle
 * ones left out) goes to one kind, the first that holds:
 *
 * - V8's own entries: `(garbage collector)`, `(program)` (native work outside JavaScript);
 * - a compile anywhere on its stack: Ajv's (fast-json-stringify's union branches, schemas Fastify
 *   compiles), fast-json-stringify's build, TypeBox's TypeCompiler;
 * - module loading: the stack is inside Node's module loader (resolving, reading, stripping types,
 *   compiling, and each module's top-level code);
 * - otherwise the code nearest the sample that is not Node's own: a package (`fastify`, `pg`,
 *   `playwright-core`…), a folder of src/, a file of test/support/, `test: <file>` (a test file's own
 *   code); Node's internals alone (sockets, fetch, timers, streams) by their module.
 *
 * A sample's time is the wall time since the previous one: on a loaded machine it includes the time
 * the thread waited for a core, so read the shares, and take CPU seconds from elsewhere.
 *
 *   node bench/cpuprofile-split.ts [--by-profile] [--top N] [--inclusive REGEX] DIR|FILE…
 *
 * `--inclusive REGEX` adds the time under each frame (`function url`) that matches, once per sample.
 * `--detail KIND` lists that kind's time by its frame nearest the sample (the one that named the kind,
 * or for a compile or module loading the frame of our code nearest it) and the sample's own function.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'by-profile': { type: 'boolean', default: false },
    top: { type: 'string', default: '25' },
    inclusive: { type: 'string' },
    detail: { type: 'string' },
  },
});
if (positionals.length === 0) {
  console.error(
    'usage: node bench/cpuprofile-split.ts [--by-profile] [--top N] [--inclusive REGEX] DIR|FILE…',
  );
  process.exit(2);
}
const top = Number(values.top);
const inclusivePattern = values.inclusive ? new RegExp(values.inclusive) : null;

function profilesIn(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => join(path, f))
    .sort();
}

function where(url: string): string {
  const path = url.startsWith('file://') ? decodeURIComponent(url.slice('file://'.length)) : url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
  if (pkg) return pkg[1]!;
  // The checkout's own files, wherever it is (a profile may come from another clone).
  const rel = /^.*?\/((?:src|test|bench|bin|scripts)\/.*)$/.exec(path)?.[1] ?? path;
  const src = /^src\/([^/]+)(?:\/([^/]+)\/)?/.exec(rel);
  if (src) return src[2] && src[1] === 'backends' ? `src/backends/${src[2]}` : `src/${src[1]}`;
  if (rel.startsWith('test/support/')) return rel;
  if (/^test\/.*\.test\.ts$/.test(rel)) return 'test: its own code';
  return rel;
}

const isLoader = (f: CallFrame) =>
  f.url.startsWith('node:internal/modules/') ||
  /\bamaro\b/.test(f.url) ||
  f.functionName === 'stripTypeScriptTypes';
function compileKind(f: CallFrame): string | undefined {
  if (/node_modules\/ajv\/dist\/compile\//.test(f.url)) return 'compile: Ajv';
  if (/node_modules\/fast-json-stringify\/index\.js$/.test(f.url) && f.functionName === 'build')
    return 'compile: fast-json-stringify build';
  if (/@sinclair\/typebox\/.*\/compiler\//.test(f.url) && f.functionName === 'Compile')
    return 'compile: TypeBox TypeCompiler';
  return undefined;
}

function kindOf(stack: CallFrame[]): string {
  const leaf = stack[0]!;
  if (leaf.functionName === '(garbage collector)') return '(garbage collector)';
  if (leaf.functionName === '(program)') return '(program)';
  for (const f of stack) {
    const kind = compileKind(f);
    if (kind) return kind;
  }
  if (stack.some(isLoader)) return 'module loading';
  for (const f of stack) if (f.url !== '' && !f.url.startsWith('node:')) return where(f.url);
  const nodeFrame = stack.find((f) => f.url.startsWith('node:'));
  return nodeFrame ? `node: ${nodeFrame.url.replace(/^node:(internal\/)?(deps\/)?/, '')}` : '(no frame)';
}

/** For --detail: the frame that made the kind, `function (file:line)`, and the sample's function. */
function detailOf(stack: CallFrame[], kind: string): string {
  const name = (f: CallFrame) =>
    `${f.functionName || '(anonymous)'} (${f.url.replace(/^.*?\/((?:src|test|node_modules)\/)/, '$1')}:${((f as { lineNumber?: number }).lineNumber ?? -1) + 1})`;
  const ours = stack.find((f) => /\/(src|test)\//.test(f.url) && !f.url.includes('node_modules'));
  const own = stack.find((f) => f.url !== '' && !f.url.startsWith('node:') && where(f.url) === kind);
  return `${own ? name(own) : ours ? `from ${name(ours)}` : '-'}  <  ${name(stack[0]!)}`;
}
const detail = new Map<string, number>();
const total = new Map<string, number>();
const inclusive = new Map<string, number>();
const rows: { file: string; busy: number; kinds: Map<string, number> }[] = [];
const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);

for (const file of positionals.flatMap(profilesIn)) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Each node's kind (and inclusive frames) once; samples then add their time.
  const kindCache = new Map<number, string>();
  const framesCache = new Map<number, string[]>();
  const time = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    time.set(id, (time.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
  });
  const kinds = new Map<string, number>();
  let busy = 0;
  for (const [id, us] of time) {
    const node = byId.get(id)!;
    if (node.callFrame.functionName === '(idle)' || node.callFrame.functionName === '(root)') continue;
    let kind = kindCache.get(id);
    if (kind === undefined) {
      const stack: CallFrame[] = [];
      for (let x: number | undefined = id; x !== undefined; x = parent.get(x))
        stack.push(byId.get(x)!.callFrame);
      kind = kindOf(stack);
      kindCache.set(id, kind);
      if (values.detail === kind) framesCache.set(-id, [detailOf(stack, kind)]);
      if (inclusivePattern)
        framesCache.set(id, [
          ...new Set(
            stack
              .map((f) => `${f.functionName || '(anonymous)'} ${where(f.url)}`)
              .filter((k) => inclusivePattern.test(k)),
          ),
        ]);
    }
    const ms = us / 1000;
    busy += ms;
    add(kinds, kind, ms);
    add(total, kind, ms);
    for (const frame of framesCache.get(id) ?? []) add(inclusive, frame, ms);
    for (const d of framesCache.get(-id) ?? []) add(detail, d, ms);
  }
  rows.push({ file, busy, kinds });
}

const busyAll = rows.reduce((s, r) => s + r.busy, 0);
const line = (ms: number, whole: number, label: string) =>
  `${(ms / 1000).toFixed(2).padStart(9)} s ${((ms / whole) * 100).toFixed(1).padStart(5)} %  ${label}`;
console.log(`${rows.length} profiles, ${(busyAll / 1000).toFixed(1)} s sampled busy`);
for (const [k, v] of [...total].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(line(v, busyAll, k));
if (inclusivePattern) {
  console.log(`\nunder frames matching ${inclusivePattern}:`);
  for (const [k, v] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(line(v, busyAll, k));
}
if (values.detail) {
  console.log(`\n${values.detail}, by its frame nearest the sample  <  the sample's function:`);
  for (const [k, v] of [...detail].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(line(v, busyAll, k));
}
if (values['by-profile']) {
  console.log('\nby profile (busy s; its three largest kinds):');
  for (const r of rows.sort((a, b) => b.busy - a.busy)) {
    const three = [...r.kinds]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3)
      .map(([k, v]) => `${k} ${((v / r.busy) * 100).toFixed(0)} %`)
      .join(', ');
    console.log(`${(r.busy / 1000).toFixed(2).padStart(7)}  ${relative(process.cwd(), r.file)}: ${three}`);
  }
}
