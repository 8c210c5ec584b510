// A `node --test` reporter for test/run-suite.ts's batches (several files in one process): one JSON
// line per top-level test that passed or failed, with its file and duration, so that the runner can
// name the file that failed and time each file of a batch.
import type { TestEvent } from 'node:test/reporters';

export default async function* suiteReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (event.data.nesting !== 0) continue;
    const { file, name, details } = event.data;
    yield `${JSON.stringify({ ok: event.type === 'test:pass', file, name, ms: details.duration_ms })}\n`;
  }
}
