import { Type } from '@sinclair/typebox';
import { findProduct } from '../../jobs/prepare.ts';
import { JOB_ID_PATTERN } from '../../model/ids.ts';
import { closed } from '../../model/schema.ts';
import { type ApiRoutes, errors } from '../api.ts';

const GIB = 2 ** 30;

const ResourcesQuery = Type.Object(
  {
    id: Type.String({ pattern: JOB_ID_PATTERN }),
    after: Type.Optional(
      Type.Integer({ minimum: 0, description: 'only samples after this time (epoch ms)' }),
    ),
  },
  closed,
);
const Sample = Type.Object({
  at: Type.Integer({ description: 'epoch ms' }),
  cpuCores: Type.Optional(Type.Number({ description: 'CPU in cores' })),
  memoryBytes: Type.Optional(Type.Integer({ description: 'memory in use, without reclaimable page cache' })),
  gpuUtilization: Type.Optional(Type.Number({ description: '0 to 1, where a GPU is seen' })),
  gpuMemoryBytes: Type.Optional(Type.Integer()),
});
const ResourcesResponse = Type.Object({
  jobId: Type.String(),
  periodMs: Type.Integer({ description: 'how often the ranks are sampled' }),
  limits: Type.Object(
    {
      cpuCores: Type.Number(),
      memoryBytes: Type.Integer(),
      gpus: Type.Integer(),
    },
    { description: "what each rank may use: the job's machine type" },
  ),
  ranks: Type.Array(Type.Object({ rank: Type.Integer(), samples: Type.Array(Sample) })),
});

/** The live resource views: what each rank of a job used, sampled while it runs. */
export const resourceRoutes: ApiRoutes = async (api) => {
  api.get(
    '/api/jobs/resources',
    {
      schema: {
        summary:
          'What each rank of a job uses: CPU, memory (and GPU where seen), sampled while it runs (ucompute)',
        description:
          "The series of the job's life so far (older samples thinned to a coarser grain as it grows); " +
          'with `after`, only what is newer. Removed once the job has ended and been cleaned up.',
        tags: ['jobs'],
        querystring: ResourcesQuery,
        response: { 200: ResourcesResponse, ...errors },
      },
    },
    async (request) => {
      const job = await api.jobService.retrieve(request.caller, request.query.id);
      const { id, category } = job.specification.product;
      const product = findProduct(api.jobEnvironment.products, id, category);
      return {
        jobId: job.id,
        periodMs: api.resourceSampleMs,
        limits: {
          cpuCores: product?.cpu ?? 0,
          memoryBytes: Math.round((product?.memoryInGigs ?? 0) * GIB),
          gpus: product?.gpu ?? 0,
        },
        ranks: await api.store.resourceSeries.of(job.id, request.query.after ?? 0),
      };
    },
  );
};
