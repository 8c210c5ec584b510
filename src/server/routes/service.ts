import { type ApiRoutes, publicRoute } from '../api.ts';
import { HealthResponse } from '../schemas.ts';

/** The service's own: liveness, and the API's description. */
export const serviceRoutes: ApiRoutes = async (api) => {
  api.get(
    '/healthz',
    { config: publicRoute, schema: { summary: 'Liveness', security: [], response: { 200: HealthResponse } } },
    async () => ({ ok: true }),
  );

  api.get('/openapi.json', { config: publicRoute, schema: { hide: true } }, async () => api.swagger());
};
