import { socketTo } from './api.ts';
import type { FollowMessage } from './types.ts';

/**
 * Follows one job over /api/jobs/follow: its updates and log chunks, pushed by the server, which
 * closes the socket once the job has ended and its logs are complete. Returns `stop`.
 */
export function followJob(
  id: string,
  onMessage: (message: FollowMessage) => void,
  onEnd?: (reason: string) => void,
): () => void {
  const socket = socketTo(`/api/jobs/follow?id=${encodeURIComponent(id)}`);
  let stopped = false;
  socket.onmessage = (event) => onMessage(JSON.parse(String(event.data)) as FollowMessage);
  socket.onclose = (event) => {
    if (!stopped) onEnd?.(event.reason);
  };
  return () => {
    stopped = true;
    socket.close();
  };
}
