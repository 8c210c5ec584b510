import fastifyPlugin from 'fastify-plugin';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { JOB_STATES } from '../model/job-states.ts';
import { type ApiRoutes, publicRoute } from './api.ts';

/**
 * Prometheus metrics at /metrics: jobs in the store by state, jobs accepted, and the duration of
 * every request. Not encapsulated (fastify-plugin), so its timing hook sees the whole app's requests,
 * unmatched ones and the web interface's pages included.
 */
export const metrics: ApiRoutes = fastifyPlugin(async (api) => {
  const { jobService, store } = api;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  new Gauge({
    name: 'ucompute_jobs',
    help: 'Jobs in the store, by state',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const counts = await store.jobs.countByState();
      for (const state of JOB_STATES) this.set({ state }, counts[state] ?? 0);
    },
  });
  const submitted = new Counter({
    name: 'ucompute_jobs_submitted_total',
    help: 'Jobs accepted through the API',
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'ucompute_http_request_duration_seconds',
    help: 'HTTP request duration',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const stopCounting = jobService.onCreated((ids) => submitted.inc(ids.length));
  api.addHook('onClose', async () => stopCounting());

  api.addHook('onResponse', async (request, reply) => {
    const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
    const seconds = reply.elapsedTime / 1000;
    durations.observe({ route, method: request.method, status: String(reply.statusCode) }, seconds);
  });

  api.get(
    '/metrics',
    {
      config: publicRoute,
      schema: { summary: 'Prometheus metrics (text exposition format)', security: [] },
    },
    async (_request, reply) => {
      reply.header('content-type', registry.contentType);
      return registry.metrics();
    },
  );
});
