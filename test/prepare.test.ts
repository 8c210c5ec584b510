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
