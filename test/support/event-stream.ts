/** Reading `text/event-stream` answers (/api/jobs/events) in tests. */

/** One named server-sent event, its data parsed as JSON. */
export interface Received {
  event: string;
  id: string;
  data: unknown;
}

/**
 * A `data` listener for a stream's text chunks: pushes each complete named event into `received`
 * (comments and unnamed blocks skipped), keeping a block split across chunks until its end.
 */
export function eventStreamParser(received: Received[]): (chunk: string) => void {
  let text = '';
  return (chunk) => {
    text += chunk;
    for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
      const fields = new Map(
        text
          .slice(0, end)
          .split('\n')
          .filter((line) => !line.startsWith(':'))
          .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
      );
      text = text.slice(end + 2);
      const event = fields.get('event');
      if (event !== undefined) {
        received.push({ event, id: fields.get('id') ?? '', data: JSON.parse(fields.get('data') ?? 'null') });
      }
    }
  };
}
