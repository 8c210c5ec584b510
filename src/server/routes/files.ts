import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../../jobs/errors.ts';
import type { Caller } from '../../jobs/service.ts';
import { closed } from '../../model/schema.ts';
import { driveFiles, drivesOf, FileError } from '../../storage/files.ts';
import { type StorageQuotas, storageQuotas } from '../../storage/quota.ts';
import { type ApiRoutes, errors } from '../api.ts';
import { errorBody } from '../errors.ts';

const FileEntry = Type.Object({
  name: Type.String(),
  path: Type.String(),
  type: Type.Union([
    Type.Literal('file'),
    Type.Literal('folder'),
    Type.Literal('link'),
    Type.Literal('other'),
  ]),
  size: Type.Integer(),
  modifiedAt: Type.Integer({ description: 'epoch ms' }),
});
const PathQuery = Type.Object(
  { path: Type.String({ description: 'e.g. /home/<user>/books/moby.txt' }) },
  closed,
);
const ListQuery = Type.Object(
  {
    path: Type.String(),
    itemsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    next: Type.Optional(Type.String({ description: 'the `next` token of the previous page' })),
  },
  closed,
);
const UploadQuery = Type.Object(
  {
    path: Type.String(),
    offset: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'continue an upload: must be the size the file has now (0, the default, starts afresh)',
      }),
    ),
  },
  closed,
);
const PathBody = Type.Object({ path: Type.String() }, closed);
const FromTo = Type.Object({ from: Type.String(), to: Type.String() }, closed);
const DriveBody = Type.Object(
  { drive: Type.String({ description: '/home/<you> or /projects/<id>' }) },
  closed,
);
const Emptied = Type.Object({
  entries: Type.Integer({ description: 'Entries that were directly in the Trash' }),
  bytes: Type.Integer({ description: 'Bytes of the files deleted' }),
});
const DriveUsage = Type.Object({
  drive: Type.String(),
  owner: Type.String({ description: 'user:<name> or project:<id>' }),
  usedBytes: Type.Integer({ description: 'Bytes on disk: the drive, its job folders and its Trash' }),
  quotaBytes: Type.Union([Type.Integer(), Type.Null()], { description: 'null: no limit' }),
  measuredAt: Type.Integer({
    description: 'epoch ms of the last whole measure; writes through the API are added since',
  }),
});
const ListResponse = Type.Object({
  items: Type.Array(FileEntry),
  next: Type.Union([Type.String(), Type.Null()]),
});

/**
 * Files in the drives a caller may reach (their home, their projects'): browse, stat, upload
 * (streamed, resumable by offset), download (ranges), mkdir, move, copy, delete to the trash, and
 * empty the trash; with quotas, what each drive's owner uses of its storage quota.
 */
export const fileRoutes: ApiRoutes<{ storageRoot: string; quotas?: StorageQuotas | undefined }> = async (
  api,
  options,
) => {
  const { storageRoot } = options;
  // The service passes the quotas its jobs are checked against; alone, the server keeps its own.
  const quotas = options.quotas ?? storageQuotas({ root: storageRoot, now: Date.now });
  const store = api.store;
  const drivesOfCaller = async (caller: Caller) =>
    drivesOf(
      caller.username,
      (await store.users.memberships(caller.username)).map((m) => m.projectId),
    );
  const filesOf = async (caller: Caller) => driveFiles(storageRoot, await drivesOfCaller(caller), quotas);
  const answer = <T>(work: Promise<T>): Promise<T> =>
    work.catch((e: unknown) => {
      throw e instanceof FileError ? new ServiceError(e.status, e.message) : e;
    });
  const tags = ['files'];

  // Uploads arrive as raw bytes and are streamed to disk by the handler, never buffered whole.
  api.addContentTypeParser('application/octet-stream', (_request, payload, done) => done(null, payload));

  api.get(
    '/api/files/browse',
    {
      schema: {
        summary: "A folder's entries by name, a page at a time",
        tags,
        querystring: ListQuery,
        response: { 200: ListResponse, ...errors },
      },
    },
    async (request) =>
      answer(
        (await filesOf(request.caller)).list(request.query.path, {
          limit: request.query.itemsPerPage ?? 100,
          after: request.query.next,
        }),
      ),
  );

  api.get(
    '/api/files/usage',
    {
      schema: {
        summary: "What each of your drives' owners uses of its storage quota",
        description:
          'One entry per drive you may reach (your home, your projects’): bytes used by the drive with its job folders and Trash, and the quota (storage.quota; null: no limit).',
        tags,
        response: { 200: Type.Object({ items: Type.Array(DriveUsage) }), ...errors },
      },
    },
    async (request) => {
      const drives = await drivesOfCaller(request.caller);
      return { items: await Promise.all(drives.map((drive) => quotas.usage(drive))) };
    },
  );

  api.get(
    '/api/files/stat',
    {
      schema: {
        summary: 'One file or folder',
        tags,
        querystring: PathQuery,
        response: { 200: FileEntry, ...errors },
      },
    },
    async (request) => answer((await filesOf(request.caller)).stat(request.query.path)),
  );

  api.get(
    '/api/files/download',
    {
      schema: {
        summary: "A file's content (the Range header selects one byte range)",
        tags,
        querystring: PathQuery,
      },
    },
    async (request, reply) => {
      const file = await answer((await filesOf(request.caller)).openForReading(request.query.path));
      const range = byteRange(request, file.size);
      if (range === 'unsatisfiable') {
        await file.handle.close();
        return reply
          .code(416)
          .header('content-range', `bytes */${file.size}`)
          .send(
            errorBody(416, `the range ${request.headers.range} lies outside the file's ${file.size} bytes`),
          );
      }
      const { start, end } = range ?? { start: 0, end: file.size - 1 };
      reply
        .header('content-type', 'application/octet-stream')
        .header('accept-ranges', 'bytes')
        .header('last-modified', new Date(file.modifiedAt).toUTCString())
        .header('content-length', String(Math.max(end - start + 1, 0)));
      if (range) reply.code(206).header('content-range', `bytes ${start}-${end}/${file.size}`);
      if (file.size === 0) {
        await file.handle.close();
        return reply.send('');
      }
      return reply.send(file.handle.createReadStream({ start, end }));
    },
  );

  api.put(
    '/api/files/upload',
    {
      schema: {
        summary: 'Write a file from the request body (application/octet-stream), streamed to disk',
        description:
          'offset=0 (the default) writes the file afresh; a larger offset appends to a partial upload and must equal its current size (409 otherwise).',
        tags,
        querystring: UploadQuery,
        response: { 200: FileEntry, ...errors },
      },
    },
    async (request) => {
      // An empty body may come without a content type (and so without the stream).
      const body = request.body ?? Readable.from([]);
      if (!(body instanceof Readable)) {
        throw new ServiceError(415, 'send the file as content-type application/octet-stream');
      }
      return answer(
        (await filesOf(request.caller)).write(request.query.path, body, request.query.offset ?? 0),
      );
    },
  );

  api.post(
    '/api/files/folder',
    {
      schema: {
        summary: 'Make a folder (and any above it)',
        tags,
        body: PathBody,
        response: { 200: FileEntry, ...errors },
      },
    },
    async (request) => answer((await filesOf(request.caller)).mkdir(request.body.path)),
  );

  api.post(
    '/api/files/move',
    {
      schema: {
        summary: 'Move or rename; never over an existing name',
        tags,
        body: FromTo,
        response: { 200: FileEntry, ...errors },
      },
    },
    async (request) => answer((await filesOf(request.caller)).move(request.body.from, request.body.to)),
  );

  api.post(
    '/api/files/copy',
    {
      schema: {
        summary: 'Copy a file or a folder; never over an existing name',
        tags,
        body: FromTo,
        response: { 200: FileEntry, ...errors },
      },
    },
    async (request) => answer((await filesOf(request.caller)).copy(request.body.from, request.body.to)),
  );

  api.post(
    '/api/files/trash',
    {
      schema: {
        summary: "Move a file or folder to its drive's Trash folder; answers where it went",
        tags,
        body: PathBody,
        response: { 200: FileEntry, ...errors },
      },
    },
    async (request) => answer((await filesOf(request.caller)).trash(request.body.path)),
  );

  api.post(
    '/api/files/trash/empty',
    {
      schema: {
        summary: "Delete for good everything in a drive's Trash folder; answers what went",
        tags,
        body: DriveBody,
        response: { 200: Emptied, ...errors },
      },
    },
    async (request) => answer((await filesOf(request.caller)).emptyTrash(request.body.drive)),
  );
};

/** The one byte range of a Range header, `unsatisfiable`, or undefined for the whole file. */
function byteRange(
  request: FastifyRequest,
  size: number,
): { start: number; end: number } | 'unsatisfiable' | undefined {
  const header = request.headers.range;
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'unsatisfiable';
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(size - suffix, 0), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return 'unsatisfiable';
  return { start, end };
}
