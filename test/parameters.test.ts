import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkParameters, type ParameterInput } from '../src/catalog/parameters.ts';
import { ValidationError } from '../src/model/errors.ts';
import type { AppParameterValue } from '../src/model/parameter-value.ts';
import { appFromYaml } from './support/apps.ts';

const app = appFromYaml(`invocation: [run]
allowAdditionalMounts: true
parameters:
  file: { type: input_file, optional: true }
  dir: { type: input_directory, optional: true }
  text: { type: text, optional: true }
  area: { type: textarea, optional: true }
  int: { type: integer, optional: true, min: 1, max: 10 }
  float: { type: floating_point, optional: true, min: 0.5, max: 2.5 }
  bool: { type: boolean, optional: true }
  choice: { type: enumeration, optional: true, options: [{ name: Small, value: s }, { name: Large, value: l }] }
  license: { type: license_server, optional: true }
  mandatory: { type: text }
  withDefault: { type: integer, optional: true, defaultValue: 5 }
  enumDefault: { type: enumeration, optional: true, defaultValue: { type: enumeration, value: Large }, options: [{ name: Large, value: l }] }
`);

const rules = { drives: ['/home/alice'], licenseServers: new Set(['lic-1']) };
const base = { mandatory: { type: 'text', value: 'm' } } as const;

function check(
  parameters: Record<string, AppParameterValue>,
  extra: Omit<ParameterInput, 'parameters'> = {},
) {
  return checkParameters(app, { parameters: { ...base, ...parameters }, ...extra }, rules);
}

function problems(
  parameters: Record<string, AppParameterValue>,
  extra: Omit<ParameterInput, 'parameters'> = {},
) {
  try {
    check(parameters, extra);
  } catch (e) {
    assert.ok(e instanceof ValidationError);
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
  return [];
}

describe('parameter values, type by type', () => {
  const cases: {
    name: string;
    valid: Record<string, AppParameterValue>[];
    invalid: [Record<string, AppParameterValue>, RegExp][];
  }[] = [
    {
      name: 'input_file',
      valid: [
        { file: { type: 'file', path: '/home/alice/a.txt' } },
        { file: { type: 'file', path: '/home/alice' } },
      ],
      invalid: [
        [
          { file: { type: 'file', path: '/home/bob/a.txt' } },
          /parameters\.file\.path: must lie inside \/home\/alice/,
        ],
        [
          { file: { type: 'file', path: '/home/alice/../bob/a' } },
          /parameters\.file\.path: must be an absolute path/,
        ],
        [{ file: { type: 'file', path: '/home/alicex/a' } }, /must lie inside/],
        [{ file: { type: 'text', value: '/home/alice/a' } }, /parameters\.file\.type: must be file/],
      ],
    },
    {
      name: 'input_directory',
      valid: [{ dir: { type: 'file', path: '/home/alice/data/', readOnly: true } }],
      invalid: [[{ dir: { type: 'integer', value: 1 } }, /parameters\.dir\.type: must be file/]],
    },
    {
      name: 'text',
      valid: [{ text: { type: 'text', value: 'hello world' } }, { text: { type: 'text', value: '' } }],
      invalid: [[{ text: { type: 'integer', value: 1 } }, /parameters\.text\.type: must be text/]],
    },
    {
      name: 'textarea',
      valid: [{ area: { type: 'textarea', value: 'a\nb' } }, { area: { type: 'text', value: 'a' } }],
      invalid: [
        [{ area: { type: 'boolean', value: true } }, /parameters\.area\.type: must be textarea or text/],
      ],
    },
    {
      name: 'integer',
      valid: [{ int: { type: 'integer', value: 1 } }, { int: { type: 'integer', value: 10 } }],
      invalid: [
        [{ int: { type: 'integer', value: 0 } }, /parameters\.int\.value: must be >= 1/],
        [{ int: { type: 'integer', value: 11 } }, /parameters\.int\.value: must be <= 10/],
        [{ int: { type: 'floating_point', value: 2 } }, /parameters\.int\.type: must be integer/],
      ],
    },
    {
      name: 'floating_point',
      valid: [{ float: { type: 'floating_point', value: 0.5 } }, { float: { type: 'integer', value: 2 } }],
      invalid: [
        [{ float: { type: 'floating_point', value: 0.25 } }, /parameters\.float\.value: must be >= 0.5/],
        [{ float: { type: 'floating_point', value: 3 } }, /parameters\.float\.value: must be <= 2.5/],
      ],
    },
    {
      name: 'boolean',
      valid: [{ bool: { type: 'boolean', value: false } }],
      invalid: [[{ bool: { type: 'text', value: 'true' } }, /parameters\.bool\.type: must be boolean/]],
    },
    {
      name: 'enumeration',
      valid: [{ choice: { type: 'text', value: 's' } }, { choice: { type: 'text', value: 'Large' } }],
      invalid: [
        [{ choice: { type: 'text', value: 'medium' } }, /parameters\.choice\.value: must be one of s, l/],
      ],
    },
    {
      name: 'license_server',
      valid: [{ license: { type: 'license_server', id: 'lic-1' } }],
      invalid: [
        [
          { license: { type: 'license_server', id: 'lic-9' } },
          /parameters\.license\.id: names no license server/,
        ],
      ],
    },
  ];

  for (const c of cases) {
    test(c.name, () => {
      for (const valid of c.valid) assert.deepEqual(problems(valid), [], JSON.stringify(valid));
      for (const [invalid, expected] of c.invalid) {
        const found = problems(invalid);
        assert.equal(found.length, 1, JSON.stringify(found));
        assert.match(found[0]!, expected);
      }
    });
  }
});

describe('parameter rules', () => {
  test('a mandatory parameter without a value is an error naming it', () => {
    assert.throws(
      () => checkParameters(app, { parameters: {} }, rules),
      (e: ValidationError) => e.issues.some((i) => i.path === 'specification.parameters.mandatory'),
    );
  });

  test('defaults fill what was not given, bare or in value form; enumerations keep the option value', () => {
    const { values } = check({});
    assert.deepEqual(values.withDefault, { type: 'integer', value: 5 });
    assert.deepEqual(values.enumDefault, { type: 'text', value: 'l' });
    assert.equal(values.int, undefined, 'an optional parameter without a default stays empty');
  });

  test('an enumeration given by option name is stored as the option value', () => {
    assert.deepEqual(check({ choice: { type: 'text', value: 'Small' } }).values.choice, {
      type: 'text',
      value: 's',
    });
  });

  test('an integer value widens to floating_point', () => {
    assert.deepEqual(check({ float: { type: 'integer', value: 2 } }).values.float, {
      type: 'floating_point',
      value: 2,
    });
  });

  test('an unknown parameter name is an error', () => {
    assert.deepEqual(problems({ nope: { type: 'text', value: 'x' } }), [
      'specification.parameters.nope: is not a parameter of app',
    ]);
  });

  test('paths are normalised and mounted at /work/<name>, read-write unless asked', () => {
    const { files, values } = check({ file: { type: 'file', path: '//home/alice//data/in.csv' } });
    assert.deepEqual(values.file, { type: 'file', path: '/home/alice/data/in.csv', readOnly: false });
    assert.deepEqual(files, [
      { path: '/home/alice/data/in.csv', readOnly: false, mountPath: '/work/in.csv' },
    ]);
  });

  test('two different files with one name are a conflict; the same folder twice is mounted once', () => {
    const conflict = problems({
      file: { type: 'file', path: '/home/alice/a/x' },
      dir: { type: 'file', path: '/home/alice/b/x' },
    });
    assert.match(conflict.join('\n'), /would both be mounted at \/work\/x/);
    const { files } = check(
      { dir: { type: 'file', path: '/home/alice/data', readOnly: true } },
      { resources: [{ type: 'file', path: '/home/alice/data', readOnly: false }] },
    );
    assert.deepEqual(files, [{ path: '/home/alice/data', readOnly: false, mountPath: '/work/data' }]);
  });

  test('project jobs take files from the project drive only', () => {
    const projectRules = { drives: ['/projects/climate'], licenseServers: new Set<string>() };
    const ok = checkParameters(
      app,
      { parameters: { ...base, file: { type: 'file', path: '/projects/climate/in.nc' } } },
      projectRules,
    );
    assert.equal(ok.files[0]?.mountPath, '/work/in.nc');
    assert.throws(
      () =>
        checkParameters(
          app,
          { parameters: { ...base, file: { type: 'file', path: '/home/alice/in.nc' } } },
          projectRules,
        ),
      /must lie inside \/projects\/climate/,
    );
  });

  test('openedFile mounts its folder and points UCLOUD_OPEN_WITH_FILE into it', () => {
    const result = check({}, { openedFile: '/home/alice/notes/today.txt' });
    assert.equal(result.openedFile, '/work/notes/today.txt');
    assert.deepEqual(result.files, [
      { path: '/home/alice/notes', readOnly: false, mountPath: '/work/notes' },
    ]);
    assert.match(
      problems({}, { openedFile: '/etc/passwd' }).join(),
      /specification\.openedFile: must be a file inside/,
    );
  });
});

describe('resources and peers', () => {
  const peerApp = appFromYaml(`invocation: [run]
parameters:
  server: { type: peer }
`);
  const closedApp = appFromYaml(`invocation: [run]
allowAdditionalMounts: false
allowAdditionalPeers: false
`);

  test('peers come from parameters and resources, and host names must be unique', () => {
    const server: AppParameterValue = { type: 'peer', hostname: 'db', jobId: 'j1' };
    const { peers } = checkParameters(
      peerApp,
      { parameters: { server }, resources: [{ type: 'peer', hostname: 'cache', jobId: 'j2' }] },
      rules,
    );
    assert.deepEqual(peers, [
      { hostname: 'db', jobId: 'j1' },
      { hostname: 'cache', jobId: 'j2' },
    ]);
    assert.throws(
      () =>
        checkParameters(peerApp, { parameters: { server }, resources: [{ ...server, jobId: 'j3' }] }, rules),
      /peer host name db is used twice/,
    );
  });

  test('extra folders and peers need the application to allow them', () => {
    assert.throws(
      () => checkParameters(closedApp, { resources: [{ type: 'file', path: '/home/alice/x' }] }, rules),
      /specification\.resources\[0\]: app does not allow additional folders/,
    );
    assert.throws(
      () => checkParameters(closedApp, { resources: [{ type: 'peer', hostname: 'x', jobId: 'y' }] }, rules),
      /specification\.resources\[0\]: app does not allow additional peers/,
    );
  });

  test('network and ingress resources are refused by this provider, with the field named', () => {
    assert.throws(
      () => checkParameters(peerApp, { parameters: {}, resources: [{ type: 'ingress', id: 'i' }] }, rules),
      (e: ValidationError) =>
        e.issues.some((i) => i.path === 'specification.resources[0].type' && /not offered/.test(i.message)),
    );
  });
});
