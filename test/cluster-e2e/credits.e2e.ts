/**
 * Accounting on the real cluster: an owner whose credits run out has its running jobs stopped —
 * their Volcano Jobs deleted, and the garbage collector their pods — and new jobs refused.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { objectsOf, skip, spec, startUcompute } from './cluster.ts';

test('an owner out of credits has its running job stopped and its objects removed; the next job is refused', {
  skip,
}, async (t) => {
  // One credit: one minute of one vCPU of u1-standard (examples/products.yml prices 1 a minute).
  const ucompute = await startUcompute(t, { config: 'accounting: { initialCredits: 1 }' });
  const id = await ucompute.submit(spec('terminal'));
  await ucompute.untilState(id, 'RUNNING');
  // The first minute is charged once it has run: then the balance is 0 and the job stops.
  const stopped = await ucompute.untilState(id, 'SUCCESS', 1500);
  assert.match(JSON.stringify(stopped.updates), /The job was terminated \(no credits\)/);
  await until(async () => (await objectsOf(id)).length === 0, {
    describe: 'the job objects deleted',
    timeout: 180_000,
    every: 200,
  });
  const refused = await fetch(`${ucompute.served.url}/api/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ucompute.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ items: [spec('terminal')] }),
  });
  assert.equal(refused.status, 402);
  assert.match(JSON.stringify(await refused.json()), /no credits left for u1-standard/);
});
