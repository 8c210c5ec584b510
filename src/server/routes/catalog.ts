import { ServiceError } from '../../jobs/errors.ts';
import type { JobEnvironment } from '../../jobs/prepare.ts';
import { type ApiRoutes, errors } from '../api.ts';
import {
  AppRetrieveQuery,
  AppRetrieveResponse,
  type AppSummary,
  AppsResponse,
  ProductsResponse,
} from '../schemas.ts';

/** The catalogue and the products. */
export const catalogRoutes: ApiRoutes = async (api) => {
  const env = api.jobEnvironment;
  // Summarised once per catalogue: `serve` may replace the catalogue when its folders change, and
  // a catalogue's list is the same array for as long as it is in use.
  let summarised: { list: unknown; summaries: AppSummary[] } | undefined;
  const summaries = (): AppSummary[] => {
    const list = env.catalog.list();
    if (summarised?.list !== list) summarised = { list, summaries: summarise(list) };
    return summarised.summaries;
  };
  const summarise = (list: ReturnType<JobEnvironment['catalog']['list']>): AppSummary[] =>
    list.map(({ application: a }) => ({
      name: a.metadata.name,
      version: a.metadata.version,
      title: a.metadata.title,
      description: a.metadata.description,
      tags: a.metadata.tags,
      applicationType: a.invocation.applicationType,
      parameters: a.invocation.parameters.map((p) => ({
        name: p.name,
        type: p.type,
        title: p.title,
        optional: p.optional,
      })),
    }));

  api.get(
    '/api/apps',
    { schema: { summary: 'List applications', tags: ['apps'], response: { 200: AppsResponse, ...errors } } },
    async () => ({ items: summaries() }),
  );

  api.get(
    '/api/apps/retrieve',
    {
      schema: {
        summary: 'Retrieve an application and its tool',
        tags: ['apps'],
        querystring: AppRetrieveQuery,
        response: { 200: AppRetrieveResponse, ...errors },
      },
    },
    async (request) => {
      const { name } = request.query;
      const version = request.query.version ?? env.catalog.versions(name).at(-1);
      const found = version !== undefined ? env.catalog.find(name, version) : undefined;
      if (!found) {
        throw new ServiceError(
          404,
          `application ${name}${request.query.version ? `@${version}` : ''} was not found`,
        );
      }
      return found;
    },
  );

  api.get(
    '/api/products',
    {
      schema: {
        summary: 'List products',
        tags: ['products'],
        response: { 200: ProductsResponse, ...errors },
      },
    },
    async () => ({ items: [...env.products] }),
  );
};
