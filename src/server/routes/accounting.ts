import { type ApiRoutes, errors } from '../api.ts';
import { UsageQuery, UsageResponse, WalletsResponse } from '../schemas.ts';

/** A caller's credits: wallets, and usage per bucket. */
export const accountingRoutes: ApiRoutes = async (api) => {
  const service = api.jobService;
  api.get(
    '/api/accounting/wallets',
    {
      schema: {
        summary: "The caller's wallets (own and projects it manages)",
        tags: ['accounting'],
        response: { 200: WalletsResponse, ...errors },
      },
    },
    async (request) => ({ items: await service.wallets(request.caller) }),
  );

  api.get(
    '/api/accounting/usage',
    {
      schema: {
        summary: 'Credits charged per bucket and category',
        tags: ['accounting'],
        querystring: UsageQuery,
        response: { 200: UsageResponse, ...errors },
      },
    },
    async (request) => service.usage(request.caller, request.query),
  );
};
