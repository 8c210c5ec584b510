import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildCatalog } from '../src/catalog/catalog.ts';
import { renderJinja } from '../src/catalog/jinja.ts';
import { jinjaCommand, jinjaTemplate } from '../src/catalog/jinja-script.ts';
import { products } from './support/fixtures.ts';

/**
 * `application: v2` invocations rendered as UCloud's IM2 renders them with its gonja fork
 * (SDU-eScience/UCloud at 63551f4e, `provider-integration/im2/pkg/controller/jinja_invocation.go`:
 * the `flag` and `option` filters, `match`/`search`; `gonja/exec/renderer.go`: autoescape with
 * EscapeBash; `im2/pkg/integrations/k8s/containers/invocation.go` handleJinjaInvocation: the
 * context), and hardened because here the server renders them.
 */

test('a printed string is one single-quoted bash word; numbers, booleans and nothing print as gonja prints them', () => {
  const context = { name: "it's; rm -rf /", n: 3, f: 0.5, b: true, off: false };
  assert.equal(
    renderJinja('echo {{ name }} {{ n }} {{ f }} {{ b }} {{ off }} [{{ missing }}]', context),
    `echo 'it'"'"'s; rm -rf /' 3 0.5 True False []`,
  );
});

test('flag and option filters as IM2 defines them', () => {
  const render = (template: string, context: Record<string, unknown> = {}) => renderJinja(template, context);
  assert.equal(render('x {{ on | flag("--on", "--off") }}', { on: true }), "x '--on'");
  assert.equal(render('x {{ on | flag("--on", "--off") }}', { on: false }), "x '--off'");
  assert.equal(render('x {{ on | flag("--on") }}', { on: false }), 'x ');
  assert.equal(render('{{ v | option("--name") }}', { v: "a b'" }), `--name 'a b'"'"''`);
  assert.equal(render('{{ v | option("--name=") }}', { v: 'a b' }), "'--name=a b'");
  assert.equal(render('{{ v | option("-n", false) }}', { v: 4 }), "'-n4'");
  assert.equal(render('[{{ v | option("--name") }}]'), '[]');
  assert.throws(() => render('{{ v | option("--n", "yes") }}', { v: 1 }), /expected arg 2 to be a boolean/);
});

test("Jinja's constants, ternary, range and the match/search tests", () => {
  const template = [
    '{% if mode is match("fa.t") %}fast{% endif %}',
    '{% if mode is search("as") %} has-as{% endif %}{% if mode is match("as") %} whole{% endif %}',
    '{{ ternary(n > 2, "big", "small") }}',
    '{% for i in range(3) %}{{ i }}{% endfor %}',
    '{{ True }} {{ None }}',
  ].join('|');
  assert.equal(renderJinja(template, { mode: 'fast', n: 3 }), "fast| has-as|'big'|012|True ");
});

test("match/search take gonja's keyword arguments ignorecase and multiline, as IM2 defines them", () => {
  const is = (test: string, value: string) =>
    renderJinja(`{% if v is ${test} %}y{% else %}n{% endif %}`, { v: value });
  assert.equal(is('search("AS")', 'fast'), 'n');
  assert.equal(is('search("AS", ignorecase=True)', 'fast'), 'y');
  assert.equal(is('match("F.ST", ignorecase=True)', 'fast'), 'y');
  assert.equal(is('match("F.ST", ignorecase=False)', 'fast'), 'n');
  assert.equal(is('search("^b$")', 'a\nb'), 'n');
  assert.equal(is('search("^b$", multiline=True)', 'a\nb'), 'y');
  assert.equal(is('search("^B$", multiline=True, ignorecase=True)', 'a\nb'), 'y');
  assert.throws(() => is('search("a", ignorecase="yes")', 'a'), /ignorecase must be a boolean/);
  assert.throws(() => is('search("a", "b")', 'a'), /expected a pattern to match against/);
  assert.throws(() => is('search', 'a'), /expected a pattern to match against/);
  // nunjucks' own tests keep working with the arguments compiled this way.
  assert.equal(
    renderJinja('{% if 4 is divisibleby(2) %}y{% endif %}{% if x is not defined %}z{% endif %}', {}),
    'yz',
  );
});

test('a template reaches only data: no prototype, no Function, bounded loops and output', () => {
  assert.equal(
    renderJinja('[{{ ucloud.constructor }}][{{ name.length }}]', { ucloud: {}, name: 'abc' }),
    '[][]',
  );
  assert.throws(() => renderJinja('{{ name.constructor.constructor("return process")() }}', { name: 'x' }));
  assert.throws(() => renderJinja('{% for i in range(1000000) %}{% endfor %}', {}), /at most 100000/);
  assert.throws(
    () => renderJinja('{% for i in range(100000) %}{{ x }}{% endfor %}', { x: 'y'.repeat(100) }),
    /over 1048576 characters/,
  );
  assert.throws(() => renderJinja('{{ dynamicInterface(8080) }}', {}), /extra interfaces are not offered/);
});

test("IM2's template functions become comments; a syntax error is an error", () => {
  assert.equal(renderJinja('{- systemLoad -}\necho hi', {}), '\n# unknown function systemLoad\n\necho hi');
  assert.throws(() => renderJinja('{% if %}', {}));
});

const V2_APP = `
application: v2
name: ranks
version: "1"
software: { type: Container, image: "debian:12" }
features: { multiNode: true }
parameters:
  greeting: { type: Text, title: Greeting, optional: true, defaultValue: hello }
  count: { type: Integer, title: Count, optional: true }
invocation: |
  echo {{ greeting }} {{ count }} $HOME {{ ucloud.machine.cpu }}
  {% if ucloud.rank == 0 %}echo leader{% endif %}
`;

test('the container command: bash running the script of each rank, in Kubernetes expansion syntax', () => {
  const { catalog, issues } = buildCatalog([{ path: 'ranks.yml', text: V2_APP }]);
  assert.deepEqual(issues, []);
  const application = catalog.find('ranks', '1')!.application;
  const template = jinjaTemplate(application)!;
  const product = products.find((p) => p.id === 'u1-standard-1')!;
  const values = {
    greeting: { type: 'text', value: 'hi there' },
    count: { type: 'integer', value: 2 },
  } as const;
  const one = jinjaCommand(template, { id: 'j1', replicas: 1, application, product, values });
  assert.deepEqual(one, ['bash', '-c', `echo 'hi there' 2 $$HOME ${product.cpu}\necho leader\n`]);
  const [shell, flag, script] = jinjaCommand(template, {
    id: 'j1',
    replicas: 2,
    application,
    product,
    values,
  });
  assert.deepEqual([shell, flag], ['bash', '-c']);
  assert.match(
    script!,
    /^case "\$\$VC_TASK_INDEX" in\n0\) exec bash -c '.*echo leader\n' ;;\n1\) exec bash -c '[^;]*' ;;\nesac$/s,
  );
});
