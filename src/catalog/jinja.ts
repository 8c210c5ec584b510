import nunjucks from 'nunjucks';

/**
 * `application: v2` invocations: a Jinja template of a bash script, rendered with nunjucks the way
 * UCloud's IM2 renders it with its gonja fork (SDU-eScience/UCloud at 63551f4e,
 * `provider-integration/im2/pkg/controller/jinja_invocation.go`, `pkg/integrations/k8s/
 * cli_script_gen.go`, `containers/invocation.go` handleJinjaInvocation; `provider-integration/
 * gonja/exec/renderer.go`, `exec/value.go`, `utils/escape.go`):
 * - autoescape is on and escapes for bash: a string printed by `{{ … }}` is single-quoted
 *   (`'` becomes `'"'"'`) unless it is safe; numbers, booleans (`True`/`False`) and nothing (``)
 *   print as gonja prints them;
 * - filters `flag(on[, off])` (the flag, escaped, when the value is true; nothing for an empty
 *   flag) and `option(flag[, addSpace])` (`flag 'value'`, or `'flagvalue'` when the flag ends in
 *   `=` or addSpace is false; nothing without a value), tests `match` and `search` (with gonja's
 *   keyword arguments `ignorecase` and `multiline`);
 * - globals `ternary(condition, a, b)`, `range` and Jinja's `True`, `False`, `None`; `dynamicInterface` and `setInterfaceName`
 *   declare extra web interfaces, which ucompute does not offer: they fail the rendering;
 * - `{- name -}` template functions are replaced first, as IM2's Kubernetes integration does,
 *   by a comment `# unknown function name` (it configures none);
 * - the context is the job's values (./jinja-script.ts jinjaContext) and `ucloud` with `rank`, rendered
 *   once per rank.
 *
 * IM2 renders in an init container because a template is a program. Here it runs in the server,
 * hardened: a name in a template reaches only data (own properties, never a prototype, so no
 * path leads to JavaScript's Function), `range` is bounded and so is the script.
 */

const { runtime, lib, compiler } = nunjucks as unknown as {
  runtime: {
    SafeString: new (s: string) => object;
    suppressValue: (value: unknown, autoescape: boolean) => unknown;
    memberLookup: (obj: unknown, key: unknown) => unknown;
  };
  lib: { TemplateError: new (message: string) => Error };
  compiler: { Compiler: { prototype: TestCompiler } };
};

/** The part of nunjucks' compiler that compiles `value is test(args…)`. */
interface TestCompiler {
  compileIs(node: IsNode, frame: unknown): void;
  _emit(code: string): void;
  compile(node: unknown, frame: unknown): void;
  _compileAggregate(node: unknown, frame: unknown, start: string, end: string): void;
}
interface IsNode {
  left: unknown;
  right: { name?: { value: string }; value?: string; args?: unknown };
}

// nunjucks compiles a test's arguments without commas between them, so `is search(p,
// ignorecase=True)` (gonja's keyword arguments) or any second argument is a syntax error. This
// compiles them as a call's arguments are: separated, keyword arguments last as one object. The
// test name is nunjucks' own lookup (env.getTest), as before.
compiler.Compiler.prototype.compileIs = function compileIs(this: TestCompiler, node, frame) {
  const test = node.right.name ? node.right.name.value : node.right.value;
  this._emit(`env.getTest(${JSON.stringify(test)}).call(context, `);
  this.compile(node.left, frame);
  if (node.right.args) this._compileAggregate(node.right.args, frame, ', ', '');
  this._emit(') === true');
};

/** UCloud's EscapeBash: one single-quoted word. */
export function escapeBash(text: string): string {
  return `'${text.replaceAll("'", `'"'"'`)}'`;
}

/** A value as gonja's Value.String() prints it. */
function printed(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return String(value);
    const fixed = value.toFixed(11).replace(/0+$/, '');
    return fixed.endsWith('.') ? `${fixed}0` : fixed;
  }
  return String(value);
}

const safe = (text: string) => new runtime.SafeString(text);
const isSafe = (value: unknown) => value instanceof runtime.SafeString;

// nunjucks is used for nothing else in ucompute: its output and its lookups are gonja's here.
runtime.suppressValue = (value, autoescape) => {
  if (isSafe(value)) return value;
  if (typeof value === 'string') return autoescape ? escapeBash(value) : value;
  return printed(value);
};
runtime.memberLookup = (obj, key) => {
  if (obj === undefined || obj === null || typeof obj !== 'object') return undefined;
  return Object.hasOwn(obj, String(key)) ? (obj as Record<string, unknown>)[String(key)] : undefined;
};

/** Most items `range` makes, and most characters a rendered script has. */
const MAX_RANGE = 100_000;
const MAX_SCRIPT = 1024 * 1024;

function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error('range: step must not be 0');
  const count = Math.max(0, Math.ceil((to - from) / step));
  if (count > MAX_RANGE) throw new Error(`range: at most ${MAX_RANGE} items`);
  return Array.from({ length: count }, (_, i) => from + i * step);
}

const notOffered = (name: string) => () => {
  throw new Error(
    `${name}: ucompute opens one web or VNC interface per rank; extra interfaces are not offered`,
  );
};

/**
 * A `match`/`search` test as IM2 defines it: the value against a regular expression (the whole
 * value for match), with the keyword arguments `ignorecase` and `multiline` (booleans).
 */
const regexTest =
  (whole: boolean) =>
  (value: unknown, ...args: unknown[]): boolean => {
    if (typeof value !== 'string') throw new Error('input value must be a string');
    const last = args.at(-1);
    // nunjucks passes keyword arguments last, as one object it marks with `__keywords`.
    const keywords =
      typeof last === 'object' && last !== null && Object.hasOwn(last, '__keywords')
        ? (args.pop() as Record<string, unknown>)
        : {};
    if (args.length !== 1) throw new Error('expected a pattern to match against');
    let flags = '';
    for (const [name, flag] of [
      ['ignorecase', 'i'],
      ['multiline', 'm'],
    ] as const) {
      const given = Object.hasOwn(keywords, name) ? keywords[name] : false;
      if (typeof given !== 'boolean') throw new Error(`${name} must be a boolean`);
      if (given) flags += flag;
    }
    const pattern = String(args[0]);
    return new RegExp(whole ? `^(?:${pattern})$` : pattern, flags).test(value);
  };

const environment = new nunjucks.Environment([], { autoescape: true, throwOnUndefined: false });
environment.addFilter('flag', (value: unknown, on: unknown, off: unknown = '') => {
  if (typeof on !== 'string' || typeof off !== 'string') throw new Error("wrong signature for 'flag'");
  const chosen = value ? on : off;
  return chosen === '' ? safe('') : chosen;
});
environment.addFilter('option', (value: unknown, flag: unknown, addSpace?: unknown) => {
  if (flag === undefined) throw new Error("wrong signature for 'option'");
  if (addSpace !== undefined && typeof addSpace !== 'boolean') {
    throw new Error("wrong signature for 'option' expected arg 2 to be a boolean");
  }
  const name = printed(flag);
  if (value === undefined || value === null) return safe('');
  const spaced = addSpace ?? !name.endsWith('=');
  return safe(spaced ? `${name} ${escapeBash(printed(value))}` : escapeBash(name + printed(value)));
});
// addTest is nunjucks' (Environment.addTest), missing from its type definitions.
const withTests = environment as unknown as {
  addTest(name: string, test: ReturnType<typeof regexTest>): void;
};
withTests.addTest('match', regexTest(true));
withTests.addTest('search', regexTest(false));
// Jinja's spellings of the constants, which nunjucks reads as names.
for (const [name, value] of [
  ['True', true],
  ['False', false],
  ['None', null],
] as const)
  environment.addGlobal(name, value);
environment.addGlobal('range', range);
environment.addGlobal('ternary', (condition: unknown, ifTrue: unknown, ifFalse: unknown) =>
  condition ? ifTrue : ifFalse,
);
environment.addGlobal('dynamicInterface', notOffered('dynamicInterface'));
environment.addGlobal('setInterfaceName', notOffered('setInterfaceName'));

/** IM2's template functions, `{- name -}` or `{- name("arg", …) -}`. */
const TEMPLATE_FUNCTION = /{- ([^-{}()]*)(\(([^)]*)\))? -}/g;

/** Renders the template with `context`; throws a TemplateError that says where it failed. */
export function renderJinja(template: string, context: Record<string, unknown>): string {
  const source = template.replace(
    TEMPLATE_FUNCTION,
    (_all, name: string) => `\n# unknown function ${name}\n`,
  );
  const script = new nunjucks.Template(source, environment, 'invocation', true).render(context);
  if (script.length > MAX_SCRIPT) throw new lib.TemplateError(`the script is over ${MAX_SCRIPT} characters`);
  return script;
}
