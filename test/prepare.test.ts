import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ValidationError } from '../src/model/errors.ts';
import { prepare } from './support/fixtures.ts';

const terminal = {
  application: { name: 'terminal', version: '1.0' },
  product: { id: 'u1-standard-1', category: 'u1-standard' },
};

function issuesOf(spec: unknown): string[] {
  try {
    prepare(spec);
  } catch (e) {
    assert.ok(e instanceof ValidationError);
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
  return [];
}

test('sshEnabled where the application offers ssh; restartOnExit for every application, as UCloud', () => {
  assert.deepEqual(issuesOf({ ...terminal, sshEnabled: true }), [
    'specification.sshEnabled: terminal does not offer ssh',
  ]);
  assert.deepEqual(issuesOf({ ...terminal, restartOnExit: true, sshEnabled: false }), []);
  assert.equal(prepare({ ...terminal, sshEnabled: false }).sshEnabled, false);
});

test('a time allocation of zero is refused; omitted, the tool default applies; null means none', () => {
  assert.deepEqual(issuesOf({ ...terminal, timeAllocation: { hours: 0, minutes: 0, seconds: 0 } }), [
    'specification.timeAllocation: must be longer than zero',
  ]);
  assert.equal(prepare(terminal).timeAllocationMillis, 3_600_000);
  assert.equal(prepare({ ...terminal, timeAllocation: null }).timeAllocationMillis, null);
});

test('an unknown product or provider is named', () => {
  assert.deepEqual(
    issuesOf({ ...terminal, product: { id: 'u9', category: 'u1-standard', provider: 'elsewhere' } }),
    [
      'specification.product: names no product (u9 in u1-standard)',
      'specification.product.provider: must be ucompute',
    ],
  );
});

test("interactive apps mount the owner's drive at /work/<name>; more folders come from any drive the creator may use", () => {
  const jupyter = { ...terminal, application: { name: 'jupyter', version: '1.0' } };
  assert.deepEqual(prepare(jupyter).parameters.files, [
    { path: '/home/alice', readOnly: false, mountPath: '/work/alice' },
  ]);
  const inProject = prepare(
    { ...terminal, resources: [{ type: 'file', path: '/home/alice/data', readOnly: true }] },
    { project: 'climate', drives: ['/home/alice', '/projects/climate'] },
  );
  assert.deepEqual(inProject.parameters.files, [
    { path: '/projects/climate', readOnly: false, mountPath: '/work/climate' },
    { path: '/home/alice/data', readOnly: true, mountPath: '/work/data' },
  ]);
  assert.deepEqual(
    issuesOf({ ...terminal, resources: [{ type: 'file', path: '/projects/secret/data', readOnly: true }] }),
    ['specification.resources[0].path: must lie inside /home/alice'],
  );
  assert.deepEqual(issuesOf({ ...terminal, resources: [{ type: 'file', path: '/home/alice/x/alice' }] }), [
    'specification: /home/alice/x/alice and /home/alice would both be mounted at /work/alice',
  ]);
  // A batch application without additional folders mounts only its inputs.
  const counted = prepare({
    application: { name: 'word-count', version: '1.0' },
    product: terminal.product,
    parameters: { input: { type: 'file', path: '/home/alice/moby.txt', readOnly: true } },
  });
  assert.deepEqual(
    counted.parameters.files.map((f) => f.mountPath),
    ['/work/moby.txt'],
  );
});
