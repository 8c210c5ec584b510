import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type KwokMinute, kwokStalled } from '../bench/kwok-watchdog.ts';

const idle = (waiting: number): KwokMinute => ({ podStarts: 0, waiting });
const busy: KwokMinute = { podStarts: 40, waiting: 500 };

test('KWOK is stalled after the given minutes without a pod start while jobs wait', () => {
  assert.equal(kwokStalled([busy, idle(500), idle(480), idle(470)], 3), true);
  assert.equal(kwokStalled([idle(500), idle(500), idle(500)], 3), true);
});

test('fewer idle minutes than asked, or one pod start among them, is not a stall', () => {
  assert.equal(kwokStalled([busy, idle(500), idle(500)], 3), false);
  assert.equal(kwokStalled([idle(500), { podStarts: 1, waiting: 499 }, idle(499)], 3), false);
  assert.equal(kwokStalled([], 3), false);
});

test('nothing waiting is not a stall: KWOK has no pod to start', () => {
  assert.equal(kwokStalled([idle(0), idle(0), idle(0)], 3), false);
  assert.equal(kwokStalled([idle(10), idle(0), idle(10)], 3), false);
});

test('0 minutes turns the watchdog off', () => {
  assert.equal(kwokStalled([idle(500), idle(500), idle(500)], 0), false);
});
