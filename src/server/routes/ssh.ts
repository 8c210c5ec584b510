import { Type } from '@sinclair/typebox';
import { sshKeys } from '../../jobs/ssh-keys.ts';
import { closed } from '../../model/schema.ts';
import { type ApiRoutes, errors } from '../api.ts';

const bulkType = { type: Type.Optional(Type.Literal('bulk')) };
const MAX_ITEMS = 100;

const SshKeySpecification = Type.Object(
  {
    title: Type.String({ maxLength: 1000 }),
    key: Type.String({
      maxLength: 65_536,
      description:
        'an OpenSSH public key: ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of 2048 bits or more',
    }),
  },
  closed,
);
const SshKey = Type.Object({
  id: Type.String(),
  owner: Type.String(),
  createdAt: Type.Integer({ description: 'epoch ms' }),
  fingerprint: Type.String({ description: 'SHA256:<base64>, as ssh-keygen -l prints it' }),
  specification: SshKeySpecification,
});
const CreateRequest = Type.Object(
  { ...bulkType, items: Type.Array(SshKeySpecification, { minItems: 1, maxItems: MAX_ITEMS }) },
  closed,
);
const CreateResponse = Type.Object({ responses: Type.Array(Type.Object({ id: Type.String() })) });
const DeleteRequest = Type.Object(
  {
    ...bulkType,
    items: Type.Array(Type.Object({ id: Type.String() }, closed), { minItems: 1, maxItems: MAX_ITEMS }),
  },
  closed,
);
const BrowseQuery = Type.Object(
  {
    itemsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    next: Type.Optional(Type.String({ description: 'the `next` token of the previous page' })),
  },
  closed,
);
const BrowseResponse = Type.Object({
  items: Type.Array(SshKey),
  next: Type.Union([Type.String(), Type.Null()]),
  itemsPerPage: Type.Integer(),
});

/** A user's SSH public keys, at UCloud's paths (`ssh.create`, `ssh.browse`, `ssh.delete`). */
export const sshKeyRoutes: ApiRoutes = async (api) => {
  const keys = sshKeys(api.store);
  const tags = ['ssh'];
  // UCloud's path, and the one the issue names.
  for (const path of ['/api/ssh', '/api/ssh/keys']) {
    api.post(
      path,
      {
        schema: {
          summary: 'Add SSH public keys: jobs with sshEnabled accept them',
          tags,
          body: CreateRequest,
          response: { 200: CreateResponse, ...errors },
        },
      },
      async (request) => ({
        responses: (await keys.create(request.caller, request.body.items)).map((id) => ({ id })),
      }),
    );
  }

  api.get(
    '/api/ssh/browse',
    {
      schema: {
        summary: 'Browse your SSH public keys, oldest first (UCloud PageV2)',
        tags,
        querystring: BrowseQuery,
        response: { 200: BrowseResponse, ...errors },
      },
    },
    async (request) => keys.browse(request.caller, request.query),
  );

  api.delete(
    '/api/ssh',
    {
      schema: {
        summary: 'Remove SSH public keys (all or none: 404 when one is not yours)',
        tags,
        body: DeleteRequest,
        response: { 200: Type.Object({}), ...errors },
      },
    },
    async (request) => {
      await keys.remove(
        request.caller,
        request.body.items.map((item) => item.id),
      );
      return {};
    },
  );
};
