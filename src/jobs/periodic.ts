import type { Logger } from './log.ts';

/**
 * Runs `pass` every `periodMs` (the next one `periodMs` after the last ended, so passes never
 * overlap), logging what a pass throws as `what` failing; `stop` waits for a pass under way.
 */
export function periodic(
  pass: () => Promise<void>,
  periodMs: number,
  what: string,
  log?: Pick<Logger, 'error'>,
) {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const tick = () => {
    running = pass()
      .catch((err: unknown) => log?.error({ err }, `${what} failed`))
      .finally(() => {
        if (stopped) return;
        timer = setTimeout(tick, periodMs);
        timer.unref();
      });
  };
  return {
    start(): void {
      stopped = false;
      timer = setTimeout(tick, periodMs);
      timer.unref();
    },
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
