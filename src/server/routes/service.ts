import { BACKEND_LEASE } from '../../store/leases.ts';
import { type ApiRoutes, publicRoute } from '../api.ts';
import { HealthResponse, ReadinessResponse } from '../schemas.ts';

/** The service's own: liveness, and the API's description. */
export const serviceRoutes: ApiRoutes = async (api) => {
  api.get(
    '/healthz',
    { config: publicRoute, schema: { summary: 'Liveness', security: [], response: { 200: HealthResponse } } },
    async () => ({ ok: true }),
  );

  // Ready when the store answers and, with replicas, a leader is known (a lease that was not given
  // up: while a crashed leader's lease runs out the followers still serve, so they stay ready).
  api.get(
    '/readyz',
    {
      config: publicRoute,
      schema: {
        summary: 'Readiness: the store is reachable and a leader known',
        security: [],
        response: { 200: ReadinessResponse, 503: ReadinessResponse },
      },
    },
    async (_request, reply) => {
      try {
        const held = await api.store.leases.current(BACKEND_LEASE);
        if (api.replicated && (!held || held.expiresAt === 0)) {
          return reply.code(503).send({ ok: false, reason: 'no replica leads yet' });
        }
        return { ok: true, ...(api.replicated && held ? { leader: held.holder } : {}) };
      } catch (err) {
        return reply
          .code(503)
          .send({ ok: false, reason: `the store is not reachable: ${(err as Error).message}` });
      }
    },
  );

  api.get('/openapi.json', { config: publicRoute, schema: { hide: true } }, async () => api.swagger());
};
