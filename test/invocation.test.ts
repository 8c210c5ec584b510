import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { renderCommand, renderEnvironment } from '../src/catalog/invocation.ts';
import type { AppParameterValue } from '../src/model/parameter-value.ts';
import { appFromYaml } from './support/apps.ts';

const text = (value: string): AppParameterValue => ({ type: 'text', value });
const v1v2 = { var1: text('v1'), var2: text('v2') };
const twoTextParameters = `parameters:
  var1: { type: text, optional: true }
  var2: { type: text, optional: true }
`;

function render(
  invocation: string,
  values: Record<string, AppParameterValue>,
  parameters = twoTextParameters,
) {
  return renderCommand(appFromYaml(`invocation:\n${invocation}\n${parameters}`), values);
}

describe('invocation: the examples of UCloud apps.md', () => {
  test('plain words, numbers and booleans pass as they are', () => {
    assert.deepEqual(render('  - foo\n  - bar\n  - 42\n  - true', {}), ['foo', 'bar', '42', 'true']);
  });

  test('a single variable', () => {
    assert.deepEqual(render('  - foo\n  - type: var\n    vars: var1', { var1: text('hello') }), [
      'foo',
      'hello',
    ]);
  });

  test('several variables', () => {
    assert.deepEqual(render('  - foo\n  - type: var\n    vars: [var1, var2]', v1v2), ['foo', 'v1', 'v2']);
  });

  test('a global prefix is its own argument', () => {
    const items = '  - foo\n  - type: var\n    prefixGlobal: --flag\n    vars: [var1, var2]';
    assert.deepEqual(render(items, v1v2), ['foo', '--flag', 'v1', 'v2']);
  });

  test('a variable prefix comes before each variable', () => {
    const items = '  - foo\n  - type: var\n    prefixVariable: --flag\n    vars: [var1, var2]';
    assert.deepEqual(render(items, v1v2), ['foo', '--flag', 'v1', '--flag', 'v2']);
  });

  test('isPrefixVariablePartOfArg glues the prefix to the value', () => {
    const items =
      '  - foo\n  - type: var\n    prefixVariable: --flag\n    isPrefixVariablePartOfArg: true\n    vars: [var1, var2]';
    assert.deepEqual(render(items, v1v2), ['foo', '--flagv1', '--flagv2']);
  });

  test('global and variable prefixes and suffixes', () => {
    const items = `  - foo
  - type: var
    prefixGlobal: --gloPre
    suffixGlobal: --gloSuf
    prefixVariable: --pre
    suffixVariable: --suf
    vars: [var1, var2]`;
    assert.deepEqual(render(items, v1v2), [
      'foo',
      '--gloPre',
      '--pre',
      'v1',
      '--suf',
      '--pre',
      'v2',
      '--suf',
      '--gloSuf',
    ]);
  });

  test('a glued prefix with global affixes: --entries --entry42 --next', () => {
    const items = `  - type: var
    prefixGlobal: --entries
    suffixGlobal: --next
    prefixVariable: --entry
    isPrefixVariablePartOfArg: true
    vars: n`;
    const parameters = 'parameters:\n  n: { type: integer }\n';
    assert.deepEqual(render(items, { n: { type: 'integer', value: 42 } }, parameters), [
      '--entries',
      '--entry42',
      '--next',
    ]);
  });

  test('a glued suffix: --entries --entry 42--next --entry hello--next --endOfEntries', () => {
    const items = `  - type: var
    prefixGlobal: --entries
    suffixGlobal: --endOfEntries
    prefixVariable: --entry
    suffixVariable: --next
    isSuffixVariablePartOfArg: true
    vars: [n, s]`;
    const parameters = 'parameters:\n  n: { type: integer }\n  s: { type: text }\n';
    assert.deepEqual(render(items, { n: { type: 'integer', value: 42 }, s: text('hello') }, parameters), [
      '--entries',
      '--entry',
      '42--next',
      '--entry',
      'hello--next',
      '--endOfEntries',
    ]);
  });

  test('nothing at all, global affixes included, when no variable has a value', () => {
    const items =
      '  - foo\n  - type: var\n    prefixGlobal: --a\n    suffixGlobal: --b\n    vars: [var1, var2]\n  - bar';
    assert.deepEqual(render(items, {}), ['foo', 'bar']);
  });

  test('variables without a value are skipped, the others rendered', () => {
    const items = '  - type: var\n    prefixVariable: --x\n    vars: [var1, var2]';
    assert.deepEqual(render(items, { var2: text('only') }), ['--x', 'only']);
  });

  test('affixes are trimmed', () => {
    const items = "  - type: var\n    prefixGlobal: '  --g  '\n    prefixVariable: ' --p'\n    vars: var1";
    assert.deepEqual(render(items, { var1: text('v') }), ['--g', '--p', 'v']);
  });

  test('type: flag gives the flag when true and nothing when false', () => {
    const items = '  - foo\n  - type: flag\n    var: var1\n    flag: --do-this-thing\n  - bar';
    const parameters = 'parameters:\n  var1: { type: boolean }\n';
    assert.deepEqual(render(items, { var1: { type: 'boolean', value: true } }, parameters), [
      'foo',
      '--do-this-thing',
      'bar',
    ]);
    assert.deepEqual(render(items, { var1: { type: 'boolean', value: false } }, parameters), ['foo', 'bar']);
  });

  test('booleans render their trueValue and falseValue', () => {
    const items = '  - foo\n  - --my-flag\n  - type: var\n    vars: b';
    const parameters = 'parameters:\n  b: { type: boolean, trueValue: "1", falseValue: "0" }\n';
    assert.deepEqual(render(items, { b: { type: 'boolean', value: true } }, parameters), [
      'foo',
      '--my-flag',
      '1',
    ]);
    assert.deepEqual(render(items, { b: { type: 'boolean', value: false } }, parameters), [
      'foo',
      '--my-flag',
      '0',
    ]);
  });

  test('booleans default to true and false, not the Kotlin bug of ignoring trueValue', () => {
    const parameters =
      'parameters:\n  b: { type: boolean }\n  c: { type: boolean, trueValue: --yes, falseValue: --no }\n';
    const items = '  - type: var\n    vars: [b, c]';
    assert.deepEqual(
      render(items, { b: { type: 'boolean', value: true }, c: { type: 'boolean', value: true } }, parameters),
      ['true', '--yes'],
    );
  });

  test('a boolean whose value renders empty contributes nothing', () => {
    const parameters = 'parameters:\n  b: { type: boolean, trueValue: --fast, falseValue: "" }\n';
    const items = '  - run\n  - type: var\n    prefixGlobal: --opts\n    vars: b';
    assert.deepEqual(render(items, { b: { type: 'boolean', value: false } }, parameters), ['run']);
    assert.deepEqual(render(items, { b: { type: 'boolean', value: true } }, parameters), [
      'run',
      '--opts',
      '--fast',
    ]);
  });
});

describe('invocation: values', () => {
  const parameters = `parameters:
  f: { type: input_file }
  d: { type: input_directory }
  i: { type: integer }
  x: { type: floating_point }
  e: { type: enumeration, options: [{ name: Bash, value: "0" }, { name: Zsh, value: "1" }] }
  p: { type: peer }
  l: { type: license_server }
`;
  test('files render as /work/<name>, numbers as text, peers as their host name', () => {
    const items = '  - type: var\n    vars: [f, d, i, x, p]';
    const values: Record<string, AppParameterValue> = {
      f: { type: 'file', path: '/home/alice/data/in.csv' },
      d: { type: 'file', path: '/home/alice/data' },
      i: { type: 'integer', value: -7 },
      x: { type: 'floating_point', value: 0.25 },
      p: { type: 'peer', hostname: 'spark', jobId: 'abc' },
    };
    assert.deepEqual(render(items, values, parameters), [
      '/work/in.csv',
      '/work/data',
      '-7',
      '0.25',
      'spark',
    ]);
  });

  test('an enumeration renders the chosen option value', () => {
    assert.deepEqual(render('  - type: var\n    vars: e', { e: text('1') }, parameters), ['1']);
  });

  test('a license server renders address:port/license', () => {
    const app = appFromYaml(`invocation:\n  - type: var\n    vars: l\n${parameters}`);
    const licenseAddress = (id: string) => (id === 'lic' ? 'licenses.example.org:8080/KEY' : undefined);
    assert.deepEqual(renderCommand(app, { l: { type: 'license_server', id: 'lic' } }, { licenseAddress }), [
      'licenses.example.org:8080/KEY',
    ]);
  });

  test('type: env refers to a container variable, expanded by Kubernetes as $(NAME)', () => {
    assert.deepEqual(render('  - echo\n  - type: env\n    var: HOME', {}), ['echo', '$(HOME)']);
  });
});

describe('Kubernetes expansion', () => {
  test('every $ of words, values, affixes and flags is doubled, so the process sees it as written', () => {
    const items = `  - sh
  - -c
  - echo "$1 $(date)"
  - type: var
    prefixVariable: $p
    vars: var1
  - type: flag
    var: f
    flag: $f`;
    const parameters = `${twoTextParameters}  f: { type: boolean }\n`;
    assert.deepEqual(
      render(items, { var1: text('$(HOME) costs $5'), f: { type: 'boolean', value: true } }, parameters),
      ['sh', '-c', 'echo "$$1 $$(date)"', '$$p', '$$(HOME) costs $$5', '$$f'],
    );
  });

  test('only type: env items stay references', () => {
    assert.deepEqual(render('  - type: env\n    var: HOME\n  - $(HOME)', {}), ['$(HOME)', '$$(HOME)']);
  });
});

describe('environment', () => {
  const app = appFromYaml(`invocation: [run]
parameters:
  name: { type: text, optional: true }
  threads: { type: integer, optional: true }
environment:
  GREETING: hello
  OPTS:
    type: var
    prefixVariable: --threads
    vars: threads
  WHO:
    type: var
    vars: name
  ALIAS:
    type: env
    var: GREETING
`);

  test('pieces are joined by spaces, empty results set nothing, env items alias other variables', () => {
    assert.deepEqual(renderEnvironment(app, { threads: { type: 'integer', value: 4 } }), {
      GREETING: 'hello',
      OPTS: '--threads 4',
      ALIAS: '$(GREETING)',
    });
    assert.equal(renderEnvironment(app, { name: text('Ada') }).WHO, 'Ada');
  });
});
