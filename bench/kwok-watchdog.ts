/**
 * When bench/cluster.bench.ts restarts a side's KWOK, decided from what the bench sees once a
 * minute. KWOK v0.7.0 (the harness's kubelets) can stop starting pods for good on a loaded API
 * server: the server closes its pod watch as too slow, each new watch re-delivers every pod, and
 * KWOK's one event goroutine never catches up to the new pods (BENCHMARKS.md, issue 17). A restart
 * starts the waiting pods within seconds (72576fa). The restarts are counted in the result: a
 * run that needed them says so.
 */

/** One side's minute: KWOK's pod starts in it, and the side's jobs submitted but not yet RUNNING. */
export interface KwokMinute {
  podStarts: number;
  waiting: number;
}

/**
 * True when KWOK started no pod in each of the last `minutes` minutes while jobs waited the whole
 * time: a KWOK that is merely slow starts some, and a side with nothing waiting has nothing to
 * start. `history` holds the minutes since KWOK (re)started, oldest first; 0 minutes never restarts.
 */
export function kwokStalled(history: readonly KwokMinute[], minutes: number): boolean {
  if (minutes <= 0 || history.length < minutes) return false;
  return history.slice(-minutes).every((m) => m.podStarts === 0 && m.waiting > 0);
}
