import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nearest } from '../src/cli/suggest.ts';

const COMMANDS = [
  'apps',
  'products',
  'run',
  'jobs',
  'show',
  'files',
  'logs',
  'cancel',
  'suspend',
  'resume',
  'extend',
];

test('a letter dropped, added, changed or two swapped: the command meant', () => {
  assert.equal(nearest('app', COMMANDS), 'apps');
  assert.equal(nearest('jobss', COMMANDS), 'jobs');
  assert.equal(nearest('cancle', COMMANDS), 'cancel');
  assert.equal(nearest('extand', COMMANDS), 'extend');
});

test('nothing near, or two as near: no guess', () => {
  assert.equal(nearest('frobnicate', COMMANDS), null);
  assert.equal(nearest('xyz', COMMANDS), null);
  assert.equal(nearest('lobs', COMMANDS), null); // one step from both jobs and logs
});
