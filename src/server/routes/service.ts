import { BACKEND_LEASE } from '../../store/leases.ts';
import { type ApiRoutes, publicRoute } from '../api.ts';
import { HealthResponse, ReadinessResponse, UnreadyResponse } from '../schemas.ts';

/** The service's own: liveness, readiness, and the API's description. */
export const serviceRoutes: ApiRoutes = async (api) => {
  // Liveness: the process answers. It does not ask the store, so that a database outage makes the
  // replicas unready instead of having them all restarted.
  api.get(
    '/healthz',
    { config: publicRoute, schema: { summary: 'Liveness', security: [], response: { 200: HealthResponse } } },
    async () => ({ ok: true }),
  );

  // Readiness: the store answers; and which replica leads, for operators. A replica without a
  // known leader still serves and records submissions, so that does not make it unready.
  api.get(
    '/readyz',
    {
      config: publicRoute,
      schema: {
        summary: 'Readiness: the store answers; the leader, if one holds the lease',
        security: [],
        response: { 200: ReadinessResponse, 503: UnreadyResponse },
      },
    },
    async (_request, reply) => {
      try {
        const lease = await api.store.leases.current(BACKEND_LEASE);
        const held = lease !== undefined && lease.expiresAt > Date.now();
        const leader = held ? { holder: lease.holder, epoch: lease.epoch, expiresAt: lease.expiresAt } : null;
        return { ok: true, leader };
      } catch (err) {
        api.log.warn({ err }, 'not ready: the store does not answer');
        return reply
          .code(503)
          .send({ ok: false as const, error: `the store does not answer: ${(err as Error).message}` });
      }
    },
  );

  api.get('/openapi.json', { config: publicRoute, schema: { hide: true } }, async () => api.swagger());
};
